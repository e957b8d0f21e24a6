"""A body that fails its schema is refused in words, through real HTTP, on both engines.

The malformed bodies are made from the request types themselves (msgspec.inspect), for
every sign and create endpoint and the policy dry run: each field in turn given a value
of the wrong type, out of its bounds, too long, outside its pattern or its enum; an
unknown field; a missing required one; a body that is no object. Hypothesis adds any JSON
value at any of those places. Every 400 must name the field (its path) and say what it
must be without a validator's pattern: no `\\Z`, `^[`, `]{`, nor msgspec's own phrasing
(jsonvalues.py). A refused sign request's audit row says the same words.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import msgspec
import msgspec.inspect as mi
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from tests.conftest import Server

from chainkeys import jsonvalues
from chainkeys.api.app import api_routes
from chainkeys.api.body import together
from chainkeys.api.doc import Doc
from chainkeys.api.routes.common import ops_of
from chainkeys.config import Settings

# what a validator says and a person should never read
RAW = ("\\Z", "^[", "]{", "(?", "matching regex", "Expected `", " - at `", "$.")
ACCOUNTS = {
    "cosmos": "cosmos1w508d6qejxtdg4y5r3zarvary0c5xw7k6ah60c",
    "dogecoin": "DFpN6QqFfUm3gKNaxN6tNcab1FArL9cZLE",
    "litecoin": "ltc1qw508d6qejxtdg4y5r3zarvary0c5xw7kgmn4n9",
    "eos": "custodytest1",
}
HOLES = {"{wallet}": "w1", "{multisig}": "wms_x"}  # bodies are read before these are
SCOPES = ("sign", "create")  # the sign and create endpoints; the dry run (read) embeds the former


@dataclass(frozen=True)
class Case:
    path: str  # the field's path as the message names it ("" for the body itself)
    body: Any
    why: str


def endpoints() -> dict[str, Any]:
    """url -> request type of every endpoint whose body is checked by its schema."""
    found: dict[str, Any] = {}
    for route in api_routes(Settings()):
        for _, op in ops_of(route).items():
            if not isinstance(op.doc, Doc) or op.doc.request is None:
                continue
            if op.scope in SCOPES or route.path == "/policy/test":
                family = route.path.split("/")[1]
                url = route.path.replace("{accountName}", ACCOUNTS.get(family, "x"))
                for hole, value in HOLES.items():
                    url = url.replace(hole, value)
                found[url] = op.doc.request
    return found


ENDPOINTS = endpoints()


def join(at: str, step: str) -> str:
    if not at or not step:
        return at or step
    return f"{at}{step}" if step.startswith("[") else f"{at}.{step}"


def bad_values(node: mi.Type, seen: frozenset[type]) -> Iterator[tuple[str, Any, str]]:
    """(path below the node, value, why) of values the node's schema refuses."""
    if isinstance(node, mi.Metadata):
        yield from bad_values(node.type, seen)
    elif isinstance(node, mi.UnionType):
        members = [m for m in node.types if not isinstance(m, mi.NoneType)]
        if not any(isinstance(m, (mi.ListType, mi.DictType)) for m in members):
            yield "", [[]], "not any of its types"
        for member in members:
            yield from bad_values(member, seen)
    elif isinstance(node, mi.StructType):
        if node.cls in seen:
            return
        for at, body, why in struct_cases(node, seen | {node.cls}):
            yield at, body, why
    elif isinstance(node, mi.StrType):
        yield "", 12345, "a number for a string"
        if node.pattern is not None:
            yield "", "~!~", "outside its pattern"
        if node.max_length is not None:
            yield "", "a" * (node.max_length + 1), "too long"
        if node.min_length:
            yield "", "", "too short"
    elif isinstance(node, mi.IntType):
        yield "", "1", "a string for a number"
        yield "", 1.5, "a fraction"
        if node.ge is not None:
            yield "", node.ge - 1, "below its minimum"
        if node.le is not None:
            yield "", node.le + 1, "above its maximum"
        yield "", 2**70, "out of range"
    elif isinstance(node, (mi.ListType, mi.SetType, mi.VarTupleType, mi.FrozenSetType)):
        yield "", "x", "a string for an array"
        if node.max_length is not None:
            yield "", [None] * (node.max_length + 1), "too many items"
        for at, value, why in bad_values(node.item_type, seen):
            yield join("[0]", at), [value], why
    elif isinstance(node, mi.DictType):
        yield "", "x", "a string for an object"
    elif isinstance(node, (mi.LiteralType, mi.EnumType)):
        yield "", "~not one~", "not one of its values"
    elif isinstance(node, mi.DecimalType):
        yield "", "1e", "not a decimal"
        yield "", [], "an array for a decimal"
    elif isinstance(node, mi.BoolType):
        yield "", "yes", "a string for true or false"


def struct_cases(node: mi.StructType, seen: frozenset[type]) -> Iterator[tuple[str, Any, str]]:
    """Bodies of one struct (its tag given) wrong in one place each."""
    base: dict[str, Any] = {node.tag_field: node.tag} if node.tag_field else {}
    yield "", [], "an array for an object"
    yield "zz_unknown", {**base, "zz_unknown": 1}, "an unknown field"
    required = [f.encode_name for f in node.fields if f.required]
    if required:
        yield required[0], dict(base), "a required field missing"
    for f in node.fields:
        for at, value, why in bad_values(f.type, seen):
            yield join(f.encode_name, at), {**base, f.encode_name: value}, why
    rules = together(node.cls)  # a field read as the type another field selects
    if "account" in required and isinstance(node.tag, str):  # the dry run's: valid
        base["account"] = ACCOUNTS[node.tag]
    for a, b, types in rules.selects if rules is not None else ():
        for choice, type_ in types.items():
            for at, value, why in bad_values(mi.type_info(type_), seen):
                yield join(b, at), {**base, a: choice, b: value}, why


def cases(type_: Any) -> list[Case]:
    found = {
        (at, repr(body)): Case(at, body, why)
        for at, body, why in bad_values(mi.type_info(type_), frozenset())
    }
    return list(found.values())


CASES = [(url, case) for url, type_ in ENDPOINTS.items() for case in cases(type_)]


def check_words(r: httpx.Response, case: Case) -> str:
    """The refusal's message: in words, naming the field when it names one. A batch's
    item is answered in its place in `results`, as its own endpoint answers it (so its
    message names the field within the item)."""
    assert r.status_code < 500, r.text
    answer, path = r.json() if r.content else {}, case.path
    if r.status_code == 200 and path.startswith("items[0]") and "results" in answer.get("data", {}):
        answer, path = answer["data"]["results"][0], path.removeprefix("items[0]").lstrip(".")
        if answer["status"] != 400:
            return ""
    elif r.status_code != 400:  # a value the schema takes after all (a union's other member)
        return ""
    message: str = answer["message"]
    for raw in RAW:
        assert raw not in message, (case, message)
    assert "/openapi.json" not in message, (case, message)  # a pattern PATTERN_WORDS lacks
    if answer["code"] in ("invalid_field", "invalid_amount") and path:
        assert message.startswith(path) or " is required" in message, (case, message)
    return message


def test_the_endpoints_are_all_there() -> None:
    families = ("cosmos", "dogecoin", "eos", "litecoin")
    for family in families:
        assert f"/{family}" in ENDPOINTS
        assert any(u.startswith(f"/{family}/") and "/sign-" in u for u in ENDPOINTS)
    assert len(CASES) > 300


@pytest.fixture(scope="module")
def client(server: Server) -> Iterator[httpx.Client]:
    with server.client(server.new_token()) as c:
        yield c


def live(client: httpx.Client, url: str) -> str:
    """A batch reads its items once its account is found (a single endpoint reads its
    body first): its url names an account of the client's tenant."""
    family, _, rest = url.lstrip("/").partition("/")
    if not rest.endswith("sign-batch"):
        return url
    if (client, family) not in MADE:
        made = client.post(f"/{family}", json={})
        assert made.status_code == 200, made.text
        MADE[client, family] = made.json()["data"]["data"]["address"]
    return f"/{family}/{MADE[client, family]}/sign-batch"


MADE: dict[tuple[httpx.Client, str], str] = {}


@pytest.mark.parametrize("url", sorted(ENDPOINTS))
def test_every_schema_refusal_is_in_words(client: httpx.Client, url: str) -> None:
    mine = [case for u, case in CASES if u == url]
    refused = 0
    url = live(client, url)
    for case in mine:
        r = client.post(
            url,
            content=msgspec.json.encode(case.body),
            headers={"content-type": "application/json"},
        )
        refused += bool(check_words(r, case))
    assert refused >= len(mine) // 2, (url, refused, len(mine))


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6,
)


def put(body: Any, path: str, value: Any) -> Any:
    """`body` with the value at `path` (as the case built it) replaced by `value`."""
    if not path:
        return value
    steps = re.findall(r"\.?(\w+)|\[(\d+)\]", path)
    holder = body
    for name, index in steps[:-1]:
        holder = holder[int(index)] if index else holder[name]
    name, index = steps[-1]
    if isinstance(holder, dict) and name:
        holder[name] = value
    elif isinstance(holder, list) and index:
        holder[int(index)] = value
    return body


@settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    phases=(Phase.explicit, Phase.generate),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_any_value_anywhere_is_refused_in_words(client: httpx.Client, data: st.DataObject) -> None:
    url, case = data.draw(st.sampled_from(CASES))
    value = data.draw(JSON)
    body = put(msgspec.json.decode(msgspec.json.encode(case.body)), case.path, value)
    r = client.post(live(client, url), json=body)
    check_words(r, Case(case.path, body, "any value"))


def test_the_examples_of_the_issue(client: httpx.Client) -> None:
    """The messages a new user met, as they read now."""
    eos, ltc = ACCOUNTS["eos"], ACCOUNTS["litecoin"]
    said = {
        f"/eos/{eos}/sign-transaction": (
            {"chainId": "zz", "serializedTransaction": "00"},
            "chainId must be 64 hex digits",
        ),
        "/cosmos/cosmos1w508d6qejxtdg4y5r3zarvary0c5xw7k6ah60c/sign-transfer": (
            {"amount": "1.5"},
            "amount must be a string of digits",
        ),
        f"/litecoin/{ltc}/sign-raw-transaction": (
            {"hex": "00", "prevtxs": [{"txid": "ab", "vout": 0}]},
            "prevtxs[0].txid must be 64 hex digits",
        ),
        "/eos": ({"name": "a" * 13}, "name must be at most 12 characters"),
        "/dogecoin": ({"privateKey": "x"}, "privateKey is not a field of this request"),
        "/litecoin/multisig": (
            {"threshold": "2"},
            "threshold must be a whole number, not a string",
        ),
    }
    for url, (body, words) in said.items():
        r = client.post(url, json=body)
        assert r.status_code == 400, r.text
        assert r.json()["message"].startswith(words), r.text


def test_the_audit_row_says_the_same_words(server: Server) -> None:
    """What the caller reads is what the audit log (and the console, which shows it) keeps."""
    eos = ACCOUNTS["eos"]
    with server.client(server.new_token()) as client:
        body = {"chainId": "zz", "serializedTransaction": "00"}
        r = client.post(f"/eos/{eos}/sign-transaction", json=body)
        assert r.status_code == 400
        [event] = client.get("/audit", params={"action": "sign"}).json()["data"]["events"]
    assert event["outcome"] == "invalid_field"
    assert event["details"]["reason"] == r.json()["message"] == "chainId must be 64 hex digits"


def test_every_pattern_a_request_checks_has_words() -> None:
    """Each pattern of a request field is in PATTERN_WORDS or said by its format (an
    account's name): a new pattern without words fails here, not in front of a user."""
    patterns: set[str] = set()

    def walk(node: mi.Type, seen: frozenset[type]) -> None:
        if isinstance(node, mi.Metadata):
            named = jsonvalues.NAME_FORMAT.match(
                str((node.extra_json_schema or {}).get("format", ""))
            )
            if named is None:
                walk(node.type, seen)
        elif isinstance(node, mi.StrType) and node.pattern is not None:
            patterns.add(node.pattern)
        elif isinstance(node, mi.StructType) and node.cls not in seen:
            for f in node.fields:
                walk(f.type, seen | {node.cls})
        elif isinstance(node, mi.UnionType):
            for m in node.types:
                walk(m, seen)
        elif isinstance(node, (mi.ListType, mi.SetType, mi.VarTupleType, mi.FrozenSetType)):
            walk(node.item_type, seen)
        elif isinstance(node, mi.DictType):
            walk(node.value_type, seen)

    for type_ in ENDPOINTS.values():
        walk(mi.type_info(type_), frozenset())
    assert patterns and patterns <= jsonvalues.PATTERN_WORDS.keys(), (
        patterns - jsonvalues.PATTERN_WORDS.keys()
    )
