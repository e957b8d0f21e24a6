"""The dry run and the sign endpoint agree (issue 49), on both engines: for every sign
kind of every family (a multisig account's too), the request each endpoint signs and
hypothesis' changes of it (a field replaced by any JSON value), `POST /policy/test`
answers what the sign endpoint then does: allow → 200, deny → 403, approval → 202, and
a request it cannot decode → the same 400 code."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from tests.api.test_sign_cosmos import PRIVATE
from tests.api.test_sign_eos import NAME
from tests.api.test_sign_properties import JSON, KINDS, Target, paths, replaced, target
from tests.api.test_sign_utxo import KEY
from tests.conftest import Server

pytestmark = pytest.mark.slow
__all__ = ["target"]  # the module fixture: one request every kind signs

POLICY = [
    {
        "family": "cosmos",
        "effect": "deny",
        "name": "no-big",
        "when": "'uatom' in tx.total && tx.total['uatom'] > 5000",
    },
    {
        "family": "cosmos",
        "name": "amino-by-hand",
        "when": "tx.kind == 'amino'",
        "approval": {"quorum": 1, "group": "g"},
    },
    {
        "family": "cosmos",
        "raw_messages": True,
        "max_per_tx": {"uatom": "4000"},
        "messages": ["/cosmos.bank.v1beta1.MsgSend", "/ibc.applications.transfer.v1.MsgTransfer"],
    },
    {"family": "litecoin", "effect": "deny", "name": "no-messages", "when": "tx.kind == 'message'"},
    {"family": "litecoin", "approval": {"quorum": 2, "group": "g"}, "above": {"LTC": "100"}},
    {"family": "dogecoin", "raw_messages": True},
    {"family": "eos", "when": "tx.kind == 'transaction'"},
]
EXPECTED = {"allow": 200, "deny": 403, "approval": 202}
SETTINGS = settings(
    max_examples=15,
    deadline=None,
    derandomize=True,
    phases=(Phase.explicit, Phase.generate),
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,
    ],
)


@pytest.fixture(scope="module")
def governed(server: Server, target: Target) -> Any:
    """A tenant of its own holding the same accounts as `target`, under POLICY."""
    assert server.services is not None
    name = "agree-" + server.new_token()[-8:].lower()
    client = server.client(server.new_token(name))
    made = [
        client.post("/cosmos", json={"private_key": PRIVATE}),
        client.post("/eos", json={"private_key": PRIVATE, "name": NAME}),
        client.post("/litecoin", json={"private_key": KEY["private_key_hex"]}),
        client.post("/dogecoin", json={"private_key": KEY["private_key_hex"]}),
    ]
    assert all(r.status_code == 200 for r in made), [r.text for r in made]
    server.call(server.services.policies.set(name, json.dumps({"rules": POLICY}), "json"))
    yield client
    client.close()


def agree(client: httpx.Client, path: str, body: Any) -> None:
    family, account, kind = path.strip("/").split("/")
    run = client.post(
        "/policy/test", json={"family": family, "account": account, "kind": kind, "request": body}
    )
    real = client.post(
        path, content=json.dumps(body).encode(), headers={"content-type": "application/json"}
    )
    assert run.status_code < 500 and real.status_code < 500, (run.text, real.text)
    if run.status_code == 400:
        assert (real.status_code, real.json()["code"]) == (400, run.json()["code"]), (
            path,
            body,
            run.text,
            real.text,
        )
        return
    assert run.status_code == 200, run.text
    decision = run.json()["data"]["decision"]
    assert real.status_code == EXPECTED[decision], (path, body, decision, real.text)


@pytest.mark.parametrize("kind", KINDS)
def test_every_kinds_request_is_decided_alike(
    governed: httpx.Client, target: Target, kind: str
) -> None:
    ep = target.endpoints[kind]
    agree(governed, ep.path, ep.body)


@pytest.mark.parametrize("kind", KINDS)
@SETTINGS
@given(data=st.data())
def test_changed_requests_are_decided_alike(
    governed: httpx.Client, target: Target, kind: str, data: st.DataObject
) -> None:
    ep = target.endpoints[kind]
    where = data.draw(st.sampled_from(paths(ep.body)[1:]), label="field")
    agree(governed, ep.path, replaced(ep.body, where, data.draw(JSON, label="value")))


def test_a_multisig_accounts_kinds_are_decided_alike(governed: httpx.Client) -> None:
    keys = [governed.post("/litecoin", json={}).json()["data"]["public_key"] for _ in range(2)]
    r = governed.post("/litecoin/multisig", json={"threshold": 2, "public_keys": keys})
    assert r.status_code == 200, r.text
    address = r.json()["data"]["address"]
    agree(governed, f"/litecoin/{address}/sign-message", {"message": "hello"})
    agree(governed, f"/litecoin/{address}/sign-raw-transaction", {"hex": "00", "prevtxs": []})
    agree(governed, f"/litecoin/{address}/sign-psbt", {"psbt": "cHNidP8="})
