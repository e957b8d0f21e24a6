"""Property-based tests of every sign endpoint through real HTTP, on both backends.

From a request each endpoint signs, hypothesis makes others: a field replaced
by any JSON value (wrong types, huge integers, deep nesting, random text), an
unknown key added to any object at any depth, random bytes where the request
carries base64 or hex, and bodies that are any JSON at all. Whatever arrives:
never a 5xx; a request with a key the decoder does not read is never signed;
and every request that reached its endpoint (its token was good) leaves one
audit row, signed or refused.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from tests.api.test_sign_cosmos import ADDRESS, OTHER, PRIVATE, TRANSFER, direct_doc
from tests.api.test_sign_eos import CHAIN, NAME, build, transfer
from tests.api.test_sign_utxo import KEY, RECIPIENT
from tests.conftest import Server
from tests.node import run_node

# what a decoder answers is the engine's too: each kind and property on one engine
pytestmark = [pytest.mark.slow, pytest.mark.one_engine, pytest.mark.long(45)]
# per test and backend, every sign kind drawn from (derandomized: the same each run)
EXAMPLES = 50
SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    phases=(Phase.explicit, Phase.generate),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

JSON_LEAF = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**300), max_value=2**300)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=40)
    | st.sampled_from(["", "0", "-1", "1e999999", "18446744073709551616", "ALL", "\u0000"])
)
JSON = st.recursive(
    JSON_LEAF,
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


@dataclass
class Endpoint:
    path: str
    body: dict[str, Any]  # a request this endpoint signs
    binary: dict[str, str] = field(default_factory=dict)  # dotted field -> "b64" | "hex"


@dataclass
class Target:
    client: httpx.Client
    endpoints: dict[str, Endpoint]
    sent: int = 0  # requests that reached an endpoint (an audit row each)


@pytest.fixture(scope="module")
def target(server: Server) -> Iterator[Target]:
    """One tenant with an account of every family and a signed request for every kind."""
    client = server.client(server.new_token())
    ok = [
        client.post("/cosmos", json={"private_key": PRIVATE}),
        client.post("/eos", json={"private_key": PRIVATE, "name": NAME}),
    ]
    ltc = client.post("/litecoin", json={"private_key": KEY["private_key_hex"]})
    doge = client.post("/dogecoin", json={"private_key": KEY["private_key_hex"]})
    assert all(r.status_code == 200 for r in [*ok, ltc, doge])
    ltc_addr, ltc_pub = ltc.json()["address"], ltc.json()["data"]["public_key"]
    doge_addr, doge_pub = doge.json()["address"], doge.json()["data"]["public_key"]
    psbt = run_node(
        "utxo.mjs",
        {
            "action": "build_psbt",
            "network": "litecoin/mainnet",
            "kind": "p2wpkh",
            "pubkey": ltc_pub,
            "amountIn": 1_000_000,
            "witness": True,
            "outputs": [{"address": RECIPIENT["litecoin"], "value": 900_000}],
        },
    )["psbt"]
    raw = run_node(
        "utxo.mjs",
        {
            "action": "build_rawtx",
            "network": "dogecoin/mainnet",
            "kind": "p2pkh",
            "pubkey": doge_pub,
            "amountIn": 1_000_000,
            "outputs": [{"address": RECIPIENT["dogecoin"], "value": 900_000}],
        },
    )
    prev = {
        "txid": raw["fundTxid"],
        "vout": 0,
        "scriptPubKey": raw["scriptPubKey"],
        "amount": "0.01",
        "hex": raw["fundHex"],
    }
    amino = {
        "chain_id": "cosmoshub-4",
        "account_number": "1",
        "sequence": "0",
        "memo": "m",
        "fee": {"amount": [{"denom": "uatom", "amount": "5"}], "gas": "100000"},
        "msgs": [
            {
                "type": "cosmos-sdk/MsgSend",
                "value": {
                    "from_address": ADDRESS,
                    "to_address": OTHER,
                    "amount": [{"denom": "uatom", "amount": "7"}],
                },
            }
        ],
    }
    eos_tx = build(transfer())["serializedTransaction"]
    c, e = f"/cosmos/{ADDRESS}", f"/eos/{NAME}"
    endpoints = {
        "sign-direct": Endpoint(
            f"{c}/sign-direct",
            {"signDoc": direct_doc()},
            {"signDoc.bodyBytes": "b64", "signDoc.authInfoBytes": "b64"},
        ),
        "sign-amino": Endpoint(f"{c}/sign-amino", {"signDoc": amino}),
        "cosmos-message": Endpoint(f"{c}/sign-message", {"data": "aGVsbG8="}, {"data": "b64"}),
        "sign-transfer": Endpoint(f"{c}/sign-transfer", dict(TRANSFER)),
        "sign-ibc-transfer": Endpoint(
            f"{c}/sign-ibc-transfer",
            {
                **TRANSFER,
                "toAddress": "osmo1qypqxpq9qcrsszg2pvxq6rs0zqg3yyc5helwsw",
                "sourcePort": "transfer",
                "sourceChannel": "channel-141",
                "timeoutTimestamp": 1_800_000_000_000_000_000,
            },
        ),
        "sign-psbt": Endpoint(f"/litecoin/{ltc_addr}/sign-psbt", {"psbt": psbt}, {"psbt": "b64"}),
        "sign-raw-transaction": Endpoint(
            f"/dogecoin/{doge_addr}/sign-raw-transaction",
            {"hex": raw["hex"], "prevtxs": [prev]},
            {"hex": "hex", "prevtxs.0.hex": "hex", "prevtxs.0.scriptPubKey": "hex"},
        ),
        "utxo-message": Endpoint(f"/litecoin/{ltc_addr}/sign-message", {"message": "hi"}),
        "sign-transaction": Endpoint(
            f"{e}/sign-transaction",
            {"chainId": CHAIN, "serializedTransaction": eos_tx},
            {"serializedTransaction": "hex", "chainId": "hex"},
        ),
        "eos-message": Endpoint(f"{e}/sign-message", {"data": "00ff10" * 3}, {"data": "hex"}),
    }
    t = Target(client, endpoints)
    for name, ep in endpoints.items():  # every base request signs: the mutations start valid
        r = post(t, ep.path, json.dumps(ep.body).encode())
        assert r.status_code == 200, (name, r.text)
    before = audit_count(client)
    yield t
    # Every request that reached an endpoint left exactly one audit row.
    assert audit_count(client) - before == t.sent - len(endpoints)
    client.close()


def audit_count(client: httpx.Client) -> int:
    n, cursor = 0, None
    while True:
        params: dict[str, Any] = {"action": "sign", "limit": 1000}
        if cursor:
            params["cursor"] = cursor
        data = client.get("/audit", params=params).json()["data"]
        n += len(data["events"])
        cursor = data.get("next_cursor")
        if not cursor:
            return n


def post(t: Target, path: str, content: bytes) -> httpx.Response:
    r = t.client.post(path, content=content, headers={"content-type": "application/json"})
    assert r.status_code < 500, (path, content[:500], r.text)
    assert r.status_code in (200, 400, 413), (path, r.status_code, r.text)
    t.sent += 1
    return r


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in a JSON value (dict keys and list indexes)."""
    out = [prefix]
    if isinstance(value, dict):
        for k, v in value.items():
            out += paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += paths(v, (*prefix, i))
    return out


def objects(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    return [p for p in paths(value) if isinstance(get(value, p), dict)]


def get(value: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        value = value[step]
    return value


def replaced(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    copy = json.loads(json.dumps(value))
    get(copy, path[:-1])[path[-1]] = new
    return copy


KINDS = [
    "sign-direct",
    "sign-amino",
    "cosmos-message",
    "sign-transfer",
    "sign-ibc-transfer",
    "sign-psbt",
    "sign-raw-transaction",
    "utxo-message",
    "sign-transaction",
    "eos-message",
]


@pytest.mark.parametrize("kind", KINDS)
@SETTINGS
@given(data=st.data())
def test_any_field_replaced_by_any_json_is_never_a_5xx(
    target: Target, kind: str, data: st.DataObject
) -> None:
    ep = target.endpoints[kind]
    where = data.draw(st.sampled_from(paths(ep.body)[1:]), label="field")
    new = data.draw(JSON, label="value")
    post(target, ep.path, json.dumps(replaced(ep.body, where, new)).encode())


@pytest.mark.parametrize("kind", KINDS)
@SETTINGS
@given(data=st.data())
def test_a_key_the_decoder_does_not_read_is_never_signed(
    target: Target, kind: str, data: st.DataObject
) -> None:
    ep = target.endpoints[kind]
    where = data.draw(st.sampled_from(objects(ep.body)), label="object")
    key = data.draw(st.text(min_size=1, max_size=12), label="key")
    obj = get(ep.body, where)
    if key in obj:
        return
    body = replaced(ep.body, where, {**obj, key: data.draw(JSON, label="value")})
    r = post(target, ep.path, json.dumps(body).encode())
    assert r.status_code == 400, (kind, where, key, r.text)


@pytest.mark.parametrize(
    "kind",
    [
        k
        for k in KINDS
        if k not in ("sign-amino", "sign-transfer", "sign-ibc-transfer", "utxo-message")
    ],
)
@SETTINGS
@given(data=st.data())
def test_random_bytes_in_binary_fields_are_never_a_5xx(
    target: Target, kind: str, data: st.DataObject
) -> None:
    ep = target.endpoints[kind]
    dotted = data.draw(st.sampled_from(sorted(ep.binary)), label="field")
    where = tuple(int(p) if p.isdigit() else p for p in dotted.split("."))
    original = get(ep.body, where)
    raw = bytes.fromhex(original) if ep.binary[dotted] == "hex" else base64.b64decode(original)
    mutation = data.draw(st.sampled_from(["random", "flip", "truncate", "extend"]), label="how")
    if mutation == "random":
        new = data.draw(st.binary(max_size=300), label="bytes")
    elif mutation == "flip" and raw:
        i = data.draw(st.integers(0, len(raw) - 1), label="at")
        new = (
            raw[:i] + bytes((raw[i] ^ data.draw(st.integers(1, 255), label="xor"),)) + raw[i + 1 :]
        )
    elif mutation == "truncate":
        new = raw[: data.draw(st.integers(0, max(0, len(raw) - 1)), label="to")]
    else:
        new = raw + data.draw(st.binary(min_size=1, max_size=40), label="tail")
    text = new.hex() if ep.binary[dotted] == "hex" else base64.b64encode(new).decode()
    post(target, ep.path, json.dumps(replaced(ep.body, where, text)).encode())


@pytest.mark.parametrize("kind", KINDS)
@SETTINGS
@given(body=JSON)
def test_any_json_body_is_never_a_5xx(target: Target, kind: str, body: Any) -> None:
    post(target, target.endpoints[kind].path, json.dumps(body).encode())


# Optional fields each endpoint knows: given a wrong value, each is read and refused,
# never ignored. (Random keys above would almost never hit these names.)
OPTIONAL = [
    ("sign-direct", ("signDoc", "body_bytes"), "CgA="),  # the other casing of a field given
    ("sign-direct", ("signDoc", "chain_id"), "cosmoshub-4"),
    ("sign-amino", ("signDoc", "timeout_height"), "x"),
    ("sign-amino", ("signDoc", "fee", "granter"), 5),
    ("sign-raw-transaction", ("prevtxs", 0, "redeemScript"), "0014" + "00" * 20),
    ("sign-raw-transaction", ("prevtxs", 0, "witnessScript"), "51"),
    (
        "sign-transaction",
        ("requiredKeys",),
        ["EOS6MRyAjQq8ud7hVNYcfnVPJqcVpscN5So8BhtHuGYqET5GDW5CV"],
    ),
    ("sign-transaction", ("serializedContextFreeData",), "00"),
    ("sign-psbt", ("finalize",), "yes"),
]


@pytest.mark.parametrize(("kind", "where", "value"), OPTIONAL)
def test_optional_fields_are_read_not_ignored(
    target: Target, kind: str, where: tuple[Any, ...], value: Any
) -> None:
    ep = target.endpoints[kind]
    parent = get(ep.body, where[:-1])
    body = replaced(ep.body, where[:-1], {**parent, where[-1]: value})
    r = post(target, ep.path, json.dumps(body).encode())
    assert r.status_code == 400, r.text
