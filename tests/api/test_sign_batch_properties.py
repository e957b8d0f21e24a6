"""Property-based tests of `POST /{family}/{name}/sign-batch` through real HTTP, on both
backends.

From requests each family's endpoints sign, hypothesis makes batches: items as they
are, with a field replaced by any JSON value, with a key the endpoint does not read,
or any JSON at all; and bodies that are any JSON. Whatever arrives: never a 5xx; an
answer is the envelope; a batch refused whole signs nothing; and in a batch that is
answered, every item's answer is exactly what its endpoint alone answers for the same
body (so a batch never signs what a single request would refuse).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from tests.api.test_sign_batch import alone
from tests.api.test_sign_cosmos import ADDRESS, PRIVATE, TRANSFER, direct_doc
from tests.api.test_sign_eos import CHAIN, NAME, build, transfer
from tests.api.test_sign_properties import JSON, objects, paths, replaced
from tests.api.test_sign_utxo import KEY, RECIPIENT
from tests.conftest import Server
from tests.node import run_node

pytestmark = pytest.mark.slow
SETTINGS = settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    phases=(Phase.explicit, Phase.generate),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
FAMILIES = ("cosmos", "dogecoin", "eos", "litecoin")


@dataclass
class Target:
    client: httpx.Client
    paths: dict[str, str]  # family -> the account's path
    items: dict[str, list[dict[str, Any]]]  # family -> an item of each kind, each signed


@pytest.fixture(scope="module")
def target(server: Server) -> Iterator[Target]:
    client = server.client(server.new_token())
    made = {
        "cosmos": client.post("/cosmos", json={"private_key": PRIVATE}),
        "eos": client.post("/eos", json={"private_key": PRIVATE, "name": NAME}),
        "dogecoin": client.post("/dogecoin", json={"private_key": KEY["private_key_hex"]}),
        "litecoin": client.post("/litecoin", json={"private_key": KEY["private_key_hex"]}),
    }
    assert all(r.status_code == 200 for r in made.values())
    doge, ltc = made["dogecoin"].json(), made["litecoin"].json()
    raw = run_node(
        "utxo.mjs",
        {
            "action": "build_rawtx",
            "network": "dogecoin/mainnet",
            "kind": "p2pkh",
            "pubkey": doge["data"]["public_key"],
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
    psbt = run_node(
        "utxo.mjs",
        {
            "action": "build_psbt",
            "network": "litecoin/mainnet",
            "kind": "p2wpkh",
            "pubkey": ltc["data"]["public_key"],
            "amountIn": 1_000_000,
            "witness": True,
            "outputs": [{"address": RECIPIENT["litecoin"], "value": 900_000}],
        },
    )["psbt"]
    items: dict[str, list[dict[str, Any]]] = {
        "cosmos": [
            {"kind": "sign-direct", "signDoc": direct_doc()},
            {"kind": "sign-message", "data": "aGVsbG8="},
            {"kind": "sign-transfer", **TRANSFER},
        ],
        "dogecoin": [
            {"kind": "sign-message", "message": "hi"},
            {"kind": "sign-raw-transaction", "hex": raw["hex"], "prevtxs": [prev]},
        ],
        "eos": [
            {
                "kind": "sign-transaction",
                "chainId": CHAIN,
                "serializedTransaction": build(transfer())["serializedTransaction"],
            },
            {"kind": "sign-message", "data": "00ff10"},
        ],
        "litecoin": [
            {"kind": "sign-psbt", "psbt": psbt},
            {"kind": "sign-message", "message": "hi"},
        ],
    }
    where = {
        "cosmos": f"/cosmos/{ADDRESS}",
        "eos": f"/eos/{NAME}",
        "dogecoin": f"/dogecoin/{doge['address']}",
        "litecoin": f"/litecoin/{ltc['address']}",
    }
    t = Target(client, where, items)
    for family, found in items.items():  # every base item signs: the mutations start valid
        r = client.post(f"{where[family]}/sign-batch", json={"items": found})
        assert [x["status"] for x in r.json()["data"]["results"]] == [200] * len(found), r.text
    yield t
    client.close()


def item_strategy(base: list[dict[str, Any]]) -> st.SearchStrategy[Any]:
    """An item of the family: as it is, a field replaced by any JSON, a key its endpoint
    does not read, or any JSON at all."""

    @st.composite
    def mutated(draw: st.DrawFn) -> Any:
        item = draw(st.sampled_from(base))
        how = draw(st.sampled_from(["as-is", "field", "key", "any"]))
        if how == "field":
            where = draw(st.sampled_from([p for p in paths(item)[1:] if p != ("kind",)]))
            return replaced(item, where, draw(JSON))
        if how == "key":
            where = draw(st.sampled_from(objects(item)))
            key = draw(st.text(min_size=1, max_size=12))
            return replaced(item, where, {key: draw(JSON), **_at(item, where)})
        if how == "any":
            return draw(JSON)
        return item

    return mutated()


def _at(value: Any, where: tuple[Any, ...]) -> Any:
    for step in where:
        value = value[step]
    return value


def post(t: Target, family: str, body: Any) -> httpx.Response:
    r = t.client.post(
        f"{t.paths[family]}/sign-batch",
        content=json.dumps(body).encode(),
        headers={"content-type": "application/json"},
    )
    assert r.status_code < 500, (family, body, r.text)
    answer = r.json()
    if r.status_code != 200:
        assert set(answer) == {"success", "message", "code"} and answer["success"] is False
    return r


def newest(t: Target, n: int) -> list[dict[str, Any]]:
    """The tenant's `n` newest sign events, newest first."""
    found: list[dict[str, Any]] = t.client.get(
        "/audit", params={"action": "sign", "limit": n}
    ).json()["data"]["events"]
    return found


@pytest.mark.parametrize("family", FAMILIES)
@SETTINGS
@given(data=st.data())
def test_every_item_is_answered_as_its_endpoint_alone_answers_it(
    target: Target, family: str, data: st.DataObject
) -> None:
    items = data.draw(st.lists(item_strategy(target.items[family]), min_size=1, max_size=4))
    r = post(target, family, {"items": items})
    if r.status_code != 200:  # refused whole: what no item could be told from, or the body's
        code, kinds = r.json()["code"], {i["kind"] for i in target.items[family]}
        if code == "invalid_batch":  # an item that is not an object of a kind of the family
            assert any(not isinstance(i, dict) or i.get("kind") not in kinds for i in items)
        else:  # text no engine keeps: every endpoint refuses it alike, whole
            assert code == "invalid_text" and "\\u0000" in json.dumps(items), r.text
        return
    results = r.json()["data"]["results"]
    for item, result in zip(items, results, strict=True):
        assert alone(target.client, target.paths[family], item) == result, item


@pytest.mark.parametrize("family", ["cosmos", "dogecoin"])
@SETTINGS
@given(body=JSON)
def test_any_json_body_is_refused_whole_and_signs_nothing(
    target: Target, family: str, body: Any
) -> None:
    before = newest(target, 1)
    r = post(target, family, body)
    assert r.status_code == 400, r.text
    refusal, previous = newest(target, 2)  # one row more: the refusal, audited
    assert refusal["outcome"] == r.json()["code"] and previous == before[0]
