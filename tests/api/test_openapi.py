"""/openapi.json describes the real responses: each one validates against its schema."""

from __future__ import annotations

from typing import Any

import httpx
import jsonschema_rs
import pytest
from tests.conftest import TLS


@pytest.fixture(scope="module")
def spec(server: Any) -> dict[str, Any]:
    r = httpx.get(f"{server.base_url}/openapi.json", verify=TLS)
    assert r.status_code == 200
    return dict(r.json())


def check(spec: dict[str, Any], path: str, method: str, response: httpx.Response) -> None:
    op = spec["paths"][path][method]
    declared = op["responses"][str(response.status_code)]
    schema = {**declared["content"]["application/json"]["schema"], "components": spec["components"]}
    jsonschema_rs.validator_for(schema).validate(response.json())


def test_every_interface_path_is_documented(spec: dict[str, Any]) -> None:
    paths = spec["paths"]
    for family in ("cosmos", "dogecoin", "eos", "litecoin"):
        assert set(paths[f"/{family}"]) == {"get", "post"}
        assert set(paths[f"/{family}/{{accountName}}"]) == {"get", "delete"}
        assert set(paths[f"/{family}/{{accountName}}/delete"]) == {"post"}
    assert {"/networks", "/healthz", "/audit"} <= set(paths)
    assert spec["components"]["securitySchemes"]["token"]["name"] == "Authorization"


def test_responses_match_their_schemas(server: Any, spec: dict[str, Any]) -> None:
    with server.client(server.new_token()) as c:
        for family in ("cosmos", "dogecoin", "eos", "litecoin"):
            created = c.post(f"/{family}", json={})
            check(spec, f"/{family}", "post", created)
            name = created.json()["data"]["data"]["address"]
            check(spec, f"/{family}/{{accountName}}", "get", c.get(f"/{family}/{name}"))
            check(spec, f"/{family}", "get", c.get(f"/{family}", params={"limit": 1}))
            check(spec, f"/{family}", "post", c.post(f"/{family}", json={"network": "x"}))
            check(spec, f"/{family}/{{accountName}}", "get", c.get(f"/{family}/{name[:-1]}"))
        check(
            spec,
            "/cosmos/{accountName}",
            "delete",
            c.delete(
                f"/cosmos/{name}"
                if False
                else "/cosmos/cosmos1w508d6qejxtdg4y5r3zarvary0c5xw7k6ah60c"
            ),
        )
        check(spec, "/audit", "get", c.get("/audit"))
    check(spec, "/networks", "get", httpx.get(f"{server.base_url}/networks", verify=TLS))
    check(spec, "/healthz", "get", httpx.get(f"{server.base_url}/healthz", verify=TLS))
    check(spec, "/cosmos", "get", httpx.get(f"{server.base_url}/cosmos", verify=TLS))


def test_the_cosmos_answers_hex_key_and_the_multisig_forms_are_described(
    spec: dict[str, Any],
) -> None:
    """Issue 55, item 5: the hex `public_key` beside Moon's `pubkey` (create, get, list
    items), and a multisig member's key in hex or base64."""
    schemas = spec["components"]["schemas"]
    for name in ("CosmosAccount", "CosmosKey"):
        assert "public_key" in schemas[name]["required"], name
        assert "66 hex digits" in schemas[name]["properties"]["public_key"]["description"]
        assert "pubkey" in schemas[name]["properties"]
    keys = schemas["CosmosMultisigCreate"]["properties"]["public_keys"]["items"]
    assert "66 hex digits" in keys["description"] and "base64" in keys["description"]


def test_request_schemas_refuse_unknown_fields(spec: dict[str, Any]) -> None:
    for family in ("cosmos", "dogecoin", "eos", "litecoin"):
        ref = spec["paths"][f"/{family}"]["post"]["requestBody"]["content"]["application/json"][
            "schema"
        ]
        schema = spec["components"]["schemas"][ref["$ref"].rsplit("/", 1)[1]]
        assert schema.get("additionalProperties") is False


def test_every_example_validates_against_its_schema(spec: dict[str, Any]) -> None:
    """A client generated from the document, or a person copying an example, gets
    something the service accepts (requests) or really answers (responses)."""
    seen = 0
    for path, methods in spec["paths"].items():
        for method, op in methods.items():
            bodies = [op.get("requestBody", {}), *op["responses"].values()]
            for body in bodies:
                media = body.get("content", {}).get("application/json", {})
                for name, example in media.get("examples", {}).items():
                    schema = {**media["schema"], "components": spec["components"]}
                    validator = jsonschema_rs.validator_for(schema)
                    assert validator.is_valid(example["value"]), (path, method, name)
                    seen += 1
    assert seen >= 8  # wallets, approvals (request, answer and the 202 on every sign route)


def test_links_lead_to_operations_that_take_what_they_pass() -> None:
    """Create -> get, sign, delete, export; a sign's 202 -> the approval's operations;
    wallet create -> derive, xpub, export, …: each link names a real operation and fills
    only parameters that operation has, from a field its answer has."""
    from chainkeys.api.app import openapi_document
    from chainkeys.config import Settings

    spec = openapi_document(Settings())
    ops = {op["operationId"]: op for item in spec["paths"].values() for op in item.values()}
    seen = set()
    for op in ops.values():
        for status, response in op["responses"].items():
            for name, link in response.get("links", {}).items():
                target = ops[link["operationId"]]
                takes = {p["name"] for p in target.get("parameters", ())}
                assert set(link["parameters"]) <= takes, (op["operationId"], name)
                for expression in link["parameters"].values():
                    assert expression.startswith("$response.body#/"), expression
                seen.add((op["operationId"], status, link["operationId"]))
    assert ("createCosmosAccount", "200", "cosmosSignTransfer") in seen
    assert ("createEosAccount", "200", "getEosAccount") in seen
    assert ("cosmosSignTransfer", "202", "approveApproval") in seen
    assert ("createWallet", "200", "walletXpub") in seen


def test_rules_between_fields_are_in_the_schema_and_enforced_alike(
    server: Any, spec: dict[str, Any]
) -> None:
    """What the document says of two fields together is what the service does: each body
    the schema refuses is a 400 naming the rule, each it accepts is served."""
    phrase = " ".join(["abandon"] * 11 + ["about"])
    key = "11" * 32
    schema = {"$ref": "#/components/schemas/CreateCosmosAccount", "components": spec["components"]}
    valid = jsonschema_rs.validator_for(schema)
    cases = [
        ({"private_key": key, "mnemonic": phrase}, "send private_key or mnemonic, not both"),
        ({"private_key": key, "account_index": 1}, "account_index goes with mnemonic"),
        ({"passphrase": "x"}, "passphrase goes with mnemonic"),
        ({"private_key": key, "mnemonic": None, "passphrase": None}, None),
        ({"mnemonic": phrase, "passphrase": "x", "account_index": 2}, None),
    ]
    with server.client(server.new_token()) as c:
        for body, refusal in cases:
            r = c.post("/cosmos", json=body)
            assert valid.is_valid(body) is (refusal is None), body
            if refusal is None:
                assert r.status_code == 200, r.text
            else:
                assert (r.status_code, r.json()["code"]) == (400, "invalid_input"), r.text
                assert r.json()["message"] == refusal


def test_a_whole_number_written_as_a_float_is_that_number(server: Any) -> None:
    """JSON Schema's integer admits 2.0, so the service reads it as 2 (never 2.5, never a
    string, never a free-form object's numbers)."""
    phrase = " ".join(["abandon"] * 11 + ["about"])
    with server.client(server.new_token()) as c:
        as_int = c.post(
            "/cosmos", json={"mnemonic": phrase, "account_index": 2, "network": "osmosis"}
        )
        assert as_int.status_code == 200, as_int.text
        with server.client(server.new_token()) as other:
            r = other.post(
                "/cosmos",
                content=f'{{"mnemonic": "{phrase}", "account_index": 2.0, "network": "osmosis"}}',
                headers={"Content-Type": "application/json"},
            )
        assert r.status_code == 200, r.text
        assert r.json()["data"]["data"]["address"] == as_int.json()["data"]["data"]["address"]
        for text in ("2.5", '"2"', "1e400"):
            r = c.post(
                "/cosmos",
                content=f'{{"mnemonic": "{phrase}", "account_index": {text}}}',
                headers={"Content-Type": "application/json"},
            )
            assert (r.status_code, r.json()["code"]) == (400, "invalid_field"), (text, r.text)
