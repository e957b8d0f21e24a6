"""Approvals through real HTTP on both backends: every state and move, who may vote,
what a vote names, caps and policy changes at the quorum, and the signed answer checked
by cosmjs."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.api.tenants import Tenant
from tests.api.test_sign_cosmos import ADDRESS, OTHER, PRIVATE, PUBKEY, TRANSFER
from tests.conftest import Server
from tests.node import chromium, require_node, run_node

from chainkeys import clock

SEND = f"/cosmos/{ADDRESS}/sign-transfer"
RULE = {
    "family": "cosmos",
    "network": "cosmoshub",
    "max_per_day": {"uatom": "100000"},
    "approval": {"quorum": 2, "group": "treasury", "ttl": "1h"},
    "above": {"uatom": "1000"},
}


def send(amount: int, sequence: int = 1, fee: int = 0) -> dict[str, Any]:
    return {**TRANSFER, "amount": str(amount), "sequence": sequence, "feeAmount": str(fee)}


@dataclass
class Team:
    tenant: Tenant
    alice: httpx.Client
    bob: httpx.Client
    alice_again: httpx.Client  # a second token of alice: one person, one vote
    outsider: httpx.Client  # an approver of another group
    reader: httpx.Client  # the tenant, no approve scope


@pytest.fixture
def team(server: Server, tenant: Tenant) -> Iterator[Team]:
    assert server.services is not None
    assert tenant.client.post("/cosmos", json={"private_key": PRIVATE}).status_code == 200
    tenant.policy(RULE)

    def token(label: str, scopes: set[str], group: str | None = None) -> httpx.Client:
        assert server.services is not None
        _, t = server.call(
            server.services.tokens.create(tenant.name, label, frozenset(scopes), None, None, group)
        )
        return server.client(t)

    clients = [
        token("alice", {"approve"}, "treasury"),
        token("bob", {"approve"}, "treasury"),
        token("alice", {"approve", "read"}, "treasury"),
        token("carol", {"approve"}, "audit"),
        token("viewer", {"read"}),
    ]
    yield Team(tenant, *clients)
    for c in clients:
        c.close()


def pending(t: Tenant, body: dict[str, Any]) -> dict[str, Any]:
    r = t.sign(SEND, body)
    assert r.status_code == 202, r.text
    data: dict[str, Any] = r.json()["data"]
    assert data["state"] == "pending" and data["required"] == 2 and r.json()["success"] is True
    return data


def vote(c: httpx.Client, approval: dict[str, Any], digest: str | None = None) -> httpx.Response:
    return c.post(
        f"/approvals/{approval['id']}/approve", json={"digest": digest or approval["digest"]}
    )


def test_small_signs_large_waits_and_two_people_sign_it(team: Team) -> None:
    require_node()
    t = team.tenant
    t.allowed(SEND, send(1000))  # within `above`: signed at once
    waiting = pending(t, send(50_000, sequence=2))
    assert waiting["summary"]["items"][0]["recipient"] == OTHER
    assert pending(t, send(50_000, sequence=2))["id"] == waiting["id"]  # a retry: the same one
    assert [e["outcome"] for e in t.sign_events()] == ["ok"]  # nothing more was signed
    first = vote(team.bob, waiting)
    assert first.status_code == 200 and first.json()["data"]["state"] == "pending"
    again = vote(team.bob, waiting)
    assert again.status_code == 409 and again.json()["code"] == "already_voted"
    done = vote(team.alice, waiting)
    assert done.status_code == 200 and done.json()["data"]["state"] == "signed", done.text
    late = vote(team.alice_again, waiting)  # alice through her other token: closed
    assert late.status_code == 409
    final = t.client.get(f"/approvals/{waiting['id']}").json()["data"]
    assert final["state"] == "signed", final
    assert sorted(v["label"] for v in final["votes"]) == ["alice", "bob"]
    signed_tx = final["result"]["signedTx"]
    check = run_node(
        "cosmos.mjs",
        {
            "action": "verify_tx",
            "signedTx": signed_tx,
            "chainId": "cosmoshub-4",
            "accountNumber": "12345",
            "pubkey": PUBKEY,
        },
    )
    assert check["verdict"]["valid"] is True
    signs = t.sign_events()
    assert [e["outcome"] for e in signs] == ["ok", "ok"]
    assert signs[-1]["details"]["approval"] == waiting["id"]


def test_who_may_vote_and_on_what(team: Team, server: Server) -> None:
    t = team.tenant
    waiting = pending(t, send(5000))
    assert vote(team.bob, waiting, digest="00" * 32).json()["code"] == "digest_mismatch"
    assert vote(team.outsider, waiting).status_code == 404  # another group: not even seen
    assert vote(team.reader, waiting).status_code == 403  # no approve scope
    assert team.reader.get(f"/approvals/{waiting['id']}").status_code == 404
    assert team.outsider.get(f"/approvals/{waiting['id']}").status_code == 404
    assert (
        t.client.post(
            f"/approvals/{waiting['id']}/approve", json={"digest": waiting["digest"]}
        ).status_code
        == 403
    )
    assert vote(team.alice, waiting).status_code == 200
    again = vote(team.alice_again, waiting)  # the same person through another token
    assert again.status_code == 409 and again.json()["code"] == "already_voted"
    # a requester that is also an approver never approves its own request
    assert server.services is not None
    _, both = server.call(
        server.services.tokens.create(
            t.name, "dave", frozenset({"sign", "approve"}), None, None, "treasury"
        )
    )
    with server.client(both) as dave:
        own = dave.post(SEND, json=send(6000, sequence=9)).json()["data"]
        r = vote(dave, own)
        assert r.status_code == 403 and r.json()["code"] == "self_approval"
    # nor does any token with the requester's label (the tenant's token is labelled "test")
    _, namesake = server.call(
        server.services.tokens.create(
            t.name, "test", frozenset({"approve"}), None, None, "treasury"
        )
    )
    with server.client(namesake) as twin:
        r = vote(twin, waiting)
        assert r.status_code == 403 and r.json()["code"] == "self_approval"
    listed = team.bob.get("/approvals", params={"state": "pending"}).json()["data"]["approvals"]
    assert {a["id"] for a in listed} >= {waiting["id"], own["id"]}
    mine = t.client.get("/approvals").json()["data"]["approvals"]
    assert [a["id"] for a in mine] == [waiting["id"]]  # the requester sees its own
    assert team.reader.get("/approvals").json()["data"]["approvals"] == []


def test_reject_cancel_and_expiry(team: Team) -> None:
    t = team.tenant
    rejected = pending(t, send(5000, sequence=3))
    r = team.bob.post(f"/approvals/{rejected['id']}/reject", json={"reason": "unknown payee"})
    assert r.json()["data"]["state"] == "rejected" and r.json()["data"]["reason"] == "unknown payee"
    late = vote(team.alice, rejected)
    assert late.status_code == 409 and late.json()["code"] == "approval_closed"
    cancelled = pending(t, send(5000, sequence=4))
    assert team.bob.post(f"/approvals/{cancelled['id']}/cancel").status_code == 403
    assert t.client.post(f"/approvals/{cancelled['id']}/cancel").json()["data"]["state"] == (
        "cancelled"
    )
    assert vote(team.alice, cancelled).status_code == 409
    t.policy({**RULE, "approval": {**RULE["approval"], "ttl": "1m"}})  # type: ignore[dict-item]
    expiring = pending(t, send(5000, sequence=5))
    with clock.shift(59_000):  # the server runs in this process: move its clock
        assert t.client.get(f"/approvals/{expiring['id']}").json()["data"]["state"] == "pending"
    with clock.shift(60_000):
        assert t.client.get(f"/approvals/{expiring['id']}").json()["data"]["state"] == "expired"
        assert vote(team.alice, expiring).status_code == 409
    states = {e["action"] for e in t.client.get("/audit").json()["data"]["events"]}
    assert {
        "approval.pending",
        "approval.rejected",
        "approval.cancelled",
        "approval.expired",
    } <= states
    assert [e["outcome"] for e in t.sign_events()] == []  # nothing was signed


def test_the_policy_and_caps_are_checked_again_at_the_quorum(team: Team) -> None:
    t = team.tenant
    changed = pending(t, send(5000, sequence=6))
    t.policy({**RULE, "recipients": [ADDRESS]})  # OTHER is no longer allowed
    vote(team.alice, changed)
    final = vote(team.bob, changed).json()["data"]
    assert final["state"] == "failed" and "allow-list" in final["reason"]
    assert [e["outcome"] for e in t.sign_events()] == ["policy_denied"]
    # caps: an approval never overrides one, and an approved spend is counted once
    t.policy({**RULE, "max_per_day": {"uatom": "60000"}})
    refused = t.sign(SEND, send(70_000, sequence=7))
    assert refused.status_code == 403 and "over the per-transaction" not in refused.text
    big = pending(t, send(50_000, sequence=8))
    vote(team.alice, big)
    assert vote(team.bob, big).json()["data"]["state"] == "signed"
    t.denied(SEND, send(20_000, sequence=9), "over the cap")  # 50,000 + 20,000 > 60,000
    t.allowed(SEND, send(1000, sequence=10))


def test_policy_files_validate_approval_rules(team: Team) -> None:
    t = team.tenant
    for bad, words in [
        ({**RULE, "approval": {"quorum": 0, "group": "treasury"}}, "quorum"),
        ({**RULE, "approval": {"quorum": 2, "group": "tre asury"}}, "group"),
        ({**RULE, "approval": {"quorum": 2, "group": "t", "ttl": "soon"}}, "ttl"),
        ({**RULE, "approval": {"quorum": 2, "group": "t", "ttl": "0s"}}, "ttl"),
        ({"family": "cosmos", "above": {"uatom": "1"}}, "above"),
    ]:
        with pytest.raises(Exception, match=words):
            t.policy(bad)


ARTIFACTS = Path(os.environ.get("CHAINKEYS_TEST_ARTIFACTS", "build/test-artifacts"))
INJECTED = '<b class="injected">x</b><img src=x onerror="window.pwned=1">'


def test_the_page_in_a_real_browser_approves_and_sees_it_signed(
    team: Team, server: Server, request: pytest.FixtureRequest
) -> None:
    browser = chromium()
    t = team.tenant
    # a memo is the payer's text: the page must show it as text, never run it
    waiting = pending(t, {**send(50_000, sequence=11), "memo": INJECTED})
    assert vote(team.bob, waiting).json()["data"]["state"] == "pending"
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / f"approvals-page-{request.node.callspec.id}.png"
    assert server.services is not None
    _, token = server.call(
        server.services.tokens.create(
            t.name, "alice", frozenset({"approve"}), None, None, "treasury"
        )
    )
    seen = run_node(
        "ui.mjs",
        {
            "url": server.base_url,
            "token": token,
            "chromium": browser,
            "approval": waiting["id"],
            "screenshot": str(shot.resolve()),
        },
        timeout=120,
    )
    assert seen["errors"] == [] and seen["foreign"] == []
    assert "script-src 'self'" in seen["csp"] and "frame-ancestors 'none'" in seen["csp"]
    assert seen["who"].startswith("alice · tenant") and "the group treasury" in seen["who"]
    assert seen["tokenFieldHidden"] is True
    for shown in (
        OTHER,
        "50000 uatom",
        INJECTED,
        waiting["digest"],
        "bob approved",
        "2 of treasury",
    ):
        assert shown in seen["card"], (shown, seen["card"])
    assert seen["pwned"] is False
    assert "approved by you; now signed" in seen["message"] and seen["stillListed"] == 0
    assert seen["state"] == "signed" and seen["signedHasButtons"] is False
    assert shot.stat().st_size > 10_000  # a real rendering was kept
    assert seen["session"] == ["chainkeys.token"] and seen["local"] == 0 and seen["cookies"] == 0
    assert seen["keptOnReload"] and seen["freshTabBoardHidden"] and seen["afterForget"] == 0
    final = t.client.get(f"/approvals/{waiting['id']}").json()["data"]
    assert final["state"] == "signed" and final["result"]["signedTx"]
    assert sorted(v["label"] for v in final["votes"]) == ["alice", "bob"]


def test_an_approver_sees_what_decides_where_value_goes(team: Team, server: Server) -> None:
    """IBC channel, port, receiver, timeouts and memo; amounts in display units beside
    the base units; a message's text (or hex); a receiver that would read as another
    address to a person is refused."""
    t = team.tenant
    from tests.api.test_sign_cosmos import IBC_TRANSFER

    t.policy(
        {
            **RULE,
            "max_per_day": {"uatom": "10000000000"},
            "ibc_memo": True,
            "messages": [
                "/cosmos.bank.v1beta1.MsgSend",
                "/ibc.applications.transfer.v1.MsgTransfer",
            ],
        }
    )
    ibc = {**IBC_TRANSFER, "amount": "5000000000", "memo": "payout 7", "feeAmount": "0"}
    r = t.sign(f"/cosmos/{ADDRESS}/sign-ibc-transfer", ibc)
    assert r.status_code == 202, r.text
    summary = team.alice.get(f"/approvals/{r.json()['data']['id']}").json()["data"]["summary"]
    [item] = summary["items"]
    assert item["recipient"] == IBC_TRANSFER["toAddress"] and summary["memo"] == "payout 7"
    assert item["ibc"] == {
        "channel": "channel-141",
        "port": "transfer",
        "timeout_height": None,
        # beyond a JavaScript number: decimal text
        "timeout_timestamp": str(IBC_TRANSFER["timeoutTimestamp"]),
    }
    assert item["amounts"] == [
        {"denom": "uatom", "amount": "5000000000", "base_unit": "uatom", "display": "5000 ATOM"}
    ]
    for bad in (
        "osmo1qypqxpq9qcrsszg2pvxq6rs0zqg3yyc5helwsx",  # a checksum that fails
        "osmo1qypqxpq9\u202eqcrsszg2pvxq6rs0zqg3yyc5helwsw",
    ):
        refused = t.sign(f"/cosmos/{ADDRESS}/sign-ibc-transfer", {**ibc, "toAddress": bad})
        assert refused.status_code == 400 and refused.json()["code"] == "invalid_recipient"
    bidi = t.sign(SEND, {**send(50_000, sequence=9), "toAddress": f"{OTHER}\u202e"})
    assert bidi.status_code == 400
    assert "\u202e" not in bidi.text


def test_a_message_to_approve_is_shown_as_text_or_hex() -> None:
    from chainkeys.chains.tx.base import message_record

    assert message_record(b"I agree") == {"length": 7, "hex": b"I agree".hex(), "text": "I agree"}
    assert "text" not in message_record(b"\xff\x00binary")
    assert "text" not in message_record("pay \u202eevil".encode())  # reordered text: hex only
    shown = message_record(b"x" * 10_000)
    assert shown["length"] == 10_000 and len(shown["hex"]) == 2 * 4096
