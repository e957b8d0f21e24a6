"""Every account endpoint over real HTTP, with the exact response shapes of DESIGN.md."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.conftest import TLS

VECTORS = json.loads(
    (Path(__file__).parents[1] / "chains" / "vectors" / "vectors.json").read_text()
)
MNEMONICS = json.loads(
    (Path(__file__).parents[1] / "chains" / "vectors" / "mnemonic_vectors.json").read_text()
)
KEYS = {k["id"]: k for k in VECTORS["keys"]}
KEY = KEYS["bitcoin-wiki-wif-example"]
ABANDON = next(m for m in MNEMONICS["mnemonics"] if m["id"] == "bip39-abandon-about")
UTXO = ["dogecoin", "eos", "litecoin"]
FAMILIES = ["cosmos", *UTXO]


def ok(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert body["success"] is True
    assert isinstance(body["message"], str) and body["message"]
    return dict(body)


def account_fields(body: dict[str, Any]) -> dict[str, Any]:
    """Dogecoin/EOS/Litecoin: data and data.data carry the same fields."""
    data = dict(body["data"])
    inner = data.pop("data")
    assert data == inner
    assert body["address"] == data["address"]
    return dict(inner)


# Fields added since the contract (issue 16): every response says its network and when
# it was created; Cosmos create/get carry the keyring pubkey as list does, and the key as
# hex beside it (issue 55).
ADDED = {"network", "created_at", "pubkey", "public_key"}


def contract(fields: dict[str, Any]) -> dict[str, Any]:
    """The contract's own fields of a response object."""
    return {k: v for k, v in fields.items() if k not in ADDED}


# ---- create (generated) -------------------------------------------------------------


def test_cosmos_create_generates_a_key_shown_once(client: httpx.Client) -> None:
    body = ok(client.post("/cosmos", json={}))
    assert set(body) == {"success", "message", "data"}
    assert set(body["data"]) == {"data"}
    inner = body["data"]["data"]
    assert set(inner) == {"address", "private_key", *ADDED}
    assert inner["network"] == "cosmoshub" and inner["created_at"].endswith("Z")
    assert inner["pubkey"].startswith('{"@type":"/cosmos.crypto.secp256k1.PubKey","key":"')
    assert inner["address"].startswith("cosmos1")
    assert len(inner["private_key"]) == 64
    int(inner["private_key"], 16)

    got = ok(client.get(f"/cosmos/{inner['address']}"))
    assert contract(got["data"]["data"]) == {"address": inner["address"]}  # no private key
    assert got["data"]["data"]["pubkey"] == inner["pubkey"]
    listed = ok(client.get("/cosmos"))["data"]["data"]["keys"]
    assert [k["pubkey"] for k in listed] == [inner["pubkey"]]  # the same form as list


def test_cosmos_create_with_no_body_at_all(client: httpx.Client) -> None:
    body = ok(client.post("/cosmos"))
    assert body["data"]["data"]["address"].startswith("cosmos1")


@pytest.mark.parametrize(
    ("family", "prefix", "wif_lengths"),
    [("dogecoin", "D", {52}), ("litecoin", "ltc1q", {52}), ("eos", "", {51})],
)
def test_utxo_shape_create_and_get(
    client: httpx.Client, family: str, prefix: str, wif_lengths: set[int]
) -> None:
    body = ok(client.post(f"/{family}", json={}))
    assert set(body) == {"success", "message", "address", "data"}
    fields = account_fields(body)
    expected = {"address", "public_key", "private_key", "network", "created_at"} | (
        {"public_key_k1"} if family == "eos" else set()
    )
    assert set(fields) == expected
    assert fields["address"].startswith(prefix)
    assert len(fields["private_key"]) in wif_lengths
    if family == "eos":
        assert fields["public_key"].startswith("EOS")
        assert fields["public_key_k1"].startswith("PUB_K1_")
        assert len(fields["address"]) == 12
    else:
        assert len(fields["public_key"]) == 66

    got = account_fields(ok(client.get(f"/{family}/{fields['address']}")))
    assert "private_key" not in got
    assert got == {k: v for k, v in fields.items() if k != "private_key"}


@pytest.mark.parametrize("family", FAMILIES)
def test_generated_private_key_reimports_to_the_same_account(
    server: Any, client: httpx.Client, family: str
) -> None:
    created = ok(client.post(f"/{family}", json={}))
    if family == "cosmos":
        address, private_key = (
            created["data"]["data"]["address"],
            created["data"]["data"]["private_key"],
        )
    else:
        fields = account_fields(created)
        address, private_key = fields["address"], fields["private_key"]
    with server.client(server.new_token()) as other:
        imported = ok(other.post(f"/{family}", json={"private_key": private_key}))
    again = imported["data"]["data"]["address"] if family == "cosmos" else imported["address"]
    assert again == address
    assert "private_key" not in json.dumps(imported)  # imported keys are never echoed


# ---- imports against the vectors ------------------------------------------------------


@pytest.mark.parametrize("key_id", sorted(KEYS))
def test_cosmos_import_hex_matches_vectors(server: Any, key_id: str) -> None:
    vec = KEYS[key_id]
    with server.client(server.new_token()) as c:
        for network, hrp in [("cosmoshub", "cosmos"), ("osmosis", "osmo"), ("juno", "juno")]:
            body = ok(
                c.post("/cosmos", json={"network": network, "private_key": vec["private_key_hex"]})
            )
            assert contract(body["data"]["data"]) == {"address": vec["cosmos"]["addresses"][hrp]}
            assert body["data"]["data"]["network"] == network
            assert body["data"]["data"]["public_key"] == vec["public_key_compressed_hex"]
        listed = ok(c.get("/cosmos"))["data"]["data"]["keys"]
        assert {k["pubkey"] for k in listed} == {vec["cosmos"]["pubkey_keyring_json_string"]}
        assert {k["public_key"] for k in listed} == {vec["public_key_compressed_hex"]}


@pytest.mark.parametrize(
    "key_id", ["scalar-one", "order-minus-one", "bitcoin-wiki-wif-example", "thornode-test-1"]
)
@pytest.mark.parametrize("family", ["dogecoin", "litecoin"])
@pytest.mark.parametrize("network", ["mainnet", "testnet"])
def test_base58_import_wif_and_hex_match_vectors(
    server: Any, key_id: str, family: str, network: str
) -> None:
    vec = KEYS[key_id][family][network]
    with server.client(server.new_token()) as c:
        kw = {"address_type": "p2pkh"} if family == "litecoin" else {}
        by_wif = account_fields(
            ok(c.post(f"/{family}", json={"network": network, "private_key": vec["wif"], **kw}))
        )
        assert by_wif["address"] == vec["p2pkh"]
        assert by_wif["public_key"] == KEYS[key_id]["public_key_compressed_hex"]
        unc = vec["uncompressed_key"]
        by_unc = account_fields(
            ok(c.post(f"/{family}", json={"network": network, "private_key": unc["wif"]}))
        )
        assert by_unc["address"] == unc["p2pkh"]  # never the compressed-key address
        assert by_unc["public_key"] == KEYS[key_id]["public_key_uncompressed_hex"]


@pytest.mark.parametrize("network", ["mainnet", "testnet"])
def test_litecoin_address_types_match_vectors(server: Any, network: str) -> None:
    vec = KEY["litecoin"][network]
    with server.client(server.new_token()) as c:
        default = account_fields(
            ok(
                c.post(
                    "/litecoin", json={"network": network, "private_key": KEY["private_key_hex"]}
                )
            )
        )
        assert default["address"] == vec["p2wpkh"]
        for address_type, field in [("p2pkh", "p2pkh"), ("p2sh-p2wpkh", "p2sh_p2wpkh")]:
            body = ok(
                c.post(
                    "/litecoin",
                    json={
                        "network": network,
                        "private_key": KEY["private_key_hex"],
                        "address_type": address_type,
                    },
                )
            )
            assert body["address"] == vec[field]


@pytest.mark.parametrize("key_id", ["eosio-dev-key", "bitcoin-wiki-wif-example", "order-minus-one"])
@pytest.mark.parametrize("form", ["private_key_wif", "private_key_k1", "hex"])
def test_eos_import_matches_vectors(server: Any, key_id: str, form: str) -> None:
    vec = KEYS[key_id]
    secret = vec["private_key_hex"] if form == "hex" else vec["eos"][form]
    with server.client(server.new_token()) as c:
        fields = account_fields(ok(c.post("/eos", json={"private_key": secret})))
        assert fields["public_key"] == vec["eos"]["public_key_legacy"]
        assert fields["public_key_k1"] == vec["eos"]["public_key_k1"]
        jungle = account_fields(
            ok(c.post("/eos", json={"network": "jungle4", "private_key": secret}))
        )
        assert jungle["address"] != fields["address"]  # one key, two networks, two names


def test_eos_caller_chosen_name(client: httpx.Client) -> None:
    body = ok(
        client.post("/eos", json={"name": "alice.acct", "private_key": KEY["private_key_hex"]})
    )
    assert body["address"] == "alice.acct"
    assert (
        account_fields(ok(client.get("/eos/alice.acct")))["public_key"]
        == KEY["eos"]["public_key_legacy"]
    )
    assert client.post("/eos", json={"name": "Bad_Name"}).status_code == 400


def test_mnemonic_import_each_family(client: httpx.Client) -> None:
    acct = ABANDON["accounts"][1]
    phrase = ABANDON["mnemonic"]
    cosmos = ok(client.post("/cosmos", json={"mnemonic": phrase, "account_index": 1}))
    assert contract(cosmos["data"]["data"]) == {"address": acct["cosmos"]["addresses"]["cosmos"]}
    doge = ok(client.post("/dogecoin", json={"mnemonic": phrase, "account_index": 1}))
    assert doge["address"] == acct["dogecoin"]["mainnet"]["p2pkh"]
    for address_type, field in [
        ("p2wpkh", "p2wpkh"),
        ("p2pkh", "p2pkh"),
        ("p2sh-p2wpkh", "p2sh_p2wpkh"),
    ]:
        ltc = ok(
            client.post(
                "/litecoin",
                json={"mnemonic": phrase, "account_index": 1, "address_type": address_type},
            )
        )
        assert ltc["address"] == acct["litecoin"]["mainnet"][field]["address"]
    eos = account_fields(ok(client.post("/eos", json={"mnemonic": phrase, "account_index": 1})))
    assert eos["public_key"] == acct["eos"]["public_key_legacy"]


def test_mnemonic_with_passphrase(client: httpx.Client) -> None:
    trezor = next(m for m in MNEMONICS["mnemonics"] if m["id"] == "bip39-abandon-about-trezor")
    body = ok(client.post("/cosmos", json={"mnemonic": trezor["mnemonic"], "passphrase": "TREZOR"}))
    assert body["data"]["data"]["address"] == trezor["accounts"][0]["cosmos"]["addresses"]["cosmos"]


# ---- uniqueness, list, delete ------------------------------------------------------------


@pytest.mark.parametrize("family", FAMILIES)
def test_duplicate_import_is_409_and_changes_nothing(client: httpx.Client, family: str) -> None:
    payload = {"private_key": KEY["private_key_hex"]}
    ok(client.post(f"/{family}", json=payload))
    before = client.get(f"/{family}").json()
    dup = client.post(f"/{family}", json=payload)
    assert dup.status_code == 409
    assert dup.json()["success"] is False and dup.json()["code"] == "account_exists"
    assert client.get(f"/{family}").json() == before


def test_cosmos_list_and_delete(client: httpx.Client) -> None:
    a = ok(client.post("/cosmos", json={}))["data"]["data"]["address"]
    b = ok(client.post("/cosmos", json={"network": "osmosis"}))["data"]["data"]["address"]
    keys = ok(client.get("/cosmos"))["data"]["data"]["keys"]
    assert [k["address"] for k in keys] == [a, b]
    assert all(set(k) == {"address", "pubkey", "public_key"} for k in keys)
    assert all(json.loads(k["pubkey"])["@type"] == "/cosmos.crypto.secp256k1.PubKey" for k in keys)

    assert (
        ok(client.get(f"/cosmos/{a.upper()}"))["data"]["data"]["address"] == a
    )  # bech32 ignores case
    deleted = ok(client.delete(f"/cosmos/{a}"))
    assert set(deleted) == {"success", "message"}
    assert client.get(f"/cosmos/{a}").status_code == 404
    assert client.delete(f"/cosmos/{a}").status_code == 404
    assert [k["address"] for k in ok(client.get("/cosmos"))["data"]["data"]["keys"]] == [b]


@pytest.mark.parametrize("family", UTXO)
def test_utxo_list_shape(client: httpx.Client, family: str) -> None:
    names = [ok(client.post(f"/{family}", json={}))["address"] for _ in range(3)]
    body = ok(client.get(f"/{family}"))
    assert set(body) == {"success", "message", "data"}
    assert body["data"] == {"keys": names, "data": {"keys": names}}


@pytest.mark.parametrize("family", FAMILIES)
def test_pagination_visits_every_account_once(client: httpx.Client, family: str) -> None:
    for _ in range(5):
        ok(client.post(f"/{family}", json={}))
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        params = {"limit": 2, **({"cursor": cursor} if cursor else {})}
        body = ok(client.get(f"/{family}", params=params))
        level = body["data"]["data"] if family == "cosmos" else body["data"]
        keys = level["keys"]
        seen += [k["address"] if family == "cosmos" else k for k in keys]
        pages += 1
        cursor = level.get("next_cursor")
        if family != "cosmos":
            assert body["data"]["data"].get("next_cursor") == cursor
        if not cursor:
            break
    assert pages == 3
    assert len(seen) == 5 == len(set(seen))


def test_empty_list(client: httpx.Client) -> None:
    assert ok(client.get("/cosmos"))["data"] == {"data": {"keys": []}}
    assert ok(client.get("/eos"))["data"] == {"keys": [], "data": {"keys": []}}


# ---- service endpoints ----------------------------------------------------------------------


def test_networks_lists_every_family_with_defaults(server: Any) -> None:
    body = ok(httpx.get(f"{server.base_url}/networks", verify=TLS))
    families = body["data"]["families"]
    assert {f: families[f]["default"] for f in families} == {
        "cosmos": "cosmoshub",
        "dogecoin": "mainnet",
        "eos": "eos",
        "litecoin": "mainnet",
    }
    cosmos = {n["name"] for n in families["cosmos"]["networks"]}
    assert {"cosmoshub", "osmosis", "juno", "akash", "stargaze", "celestia"} <= cosmos
    assert {"mainnet", "testnet", "regtest"} <= {
        n["name"] for n in families["litecoin"]["networks"]
    }
    assert {"eos", "jungle4", "wax", "telos"} <= {n["name"] for n in families["eos"]["networks"]}


def test_healthz(server: Any) -> None:
    assert ok(httpx.get(f"{server.base_url}/healthz", verify=TLS))["message"] == "ok"


def test_every_response_has_the_servers_own_request_id(client: httpx.Client) -> None:
    """A client's X-Request-ID never becomes the request id (it could copy another
    request's): the server's own id is on the response and in the audit log."""
    first = client.get("/cosmos").headers["x-request-id"]
    assert len(first) >= 16
    given = client.get("/cosmos", headers={"X-Request-ID": first}).headers["x-request-id"]
    assert given != first and len(given) >= 16


@pytest.mark.parametrize("family", FAMILIES)
def test_list_filters_by_network(client: httpx.Client, family: str) -> None:
    networks = sorted(
        ok(client.get("/networks"))["data"]["families"][family]["networks"], key=lambda n: n["name"]
    )
    one, two = networks[0]["name"], networks[1]["name"]
    made = {n: ok(client.post(f"/{family}", json={"network": n})) for n in (one, two)}

    def names(query: str) -> list[str]:
        data = ok(client.get(f"/{family}{query}"))["data"]
        if family == "cosmos":
            return [k["address"] for k in data["data"]["keys"]]
        return list(data["keys"])

    def name(body: dict[str, Any]) -> str:
        return str(body["data"]["data"]["address"] if family == "cosmos" else body["address"])

    assert names(f"?network={one}") == [name(made[one])]
    assert names(f"?network={two}") == [name(made[two])]
    assert len(names("")) == 2
    r = client.get(f"/{family}?network=nosuchnet")
    assert r.status_code == 400 and r.json()["code"] == "unknown_network"
