"""Approvals through the client against a real server: a policy makes a large Cosmos
transfer wait for two people; they vote on the digest, and `wait` returns the signed
transaction, byte for byte the cosmjs reference; reject, cancel and expiry end a wait
with `ApprovalFailed`; `tokens.self` shows who is who. Sync and async."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pytest
from conftest import SIGNING_VECTORS, Server

from chainkeys_client import (
    ApprovalFailed,
    ApprovalPending,
    ApprovalTimeout,
    AsyncClient,
    ChainkeysError,
    Client,
    Conflict,
    CosmosTx,
    Forbidden,
    NotFound,
    TokenInfo,
)

COSMOS = json.loads((SIGNING_VECTORS / "cosmos_signing.json").read_text())
ONE = "0000000000000000000000000000000000000000000000000000000000000001"
ADDRESS: str = COSMOS["address"]
LARGE: dict[str, Any] = COSMOS["sign-transfer"]["request"]  # 1500000 uatom + 5000 fee
SIGNED_TX: str = COSMOS["sign-transfer"]["signedTx"]  # what cosmjs signs for it


def rule(ttl: str = "1h") -> dict[str, Any]:
    return {"family": "cosmos", "network": "cosmoshub", "above": {"uatom": "1000"},
            "approval": {"quorum": 2, "group": "treasury", "ttl": ttl}}  # fmt: skip


def transfer(amount: int = 1_500_000, sequence: int = 3, fee: int = 5000) -> dict[str, Any]:
    return {**LARGE, "amount": str(amount), "sequence": sequence, "feeAmount": str(fee)}


@dataclass
class Team:
    requester: Client  # a service token: read, create, sign
    alice: Client  # approvers of the group treasury
    bob: Client
    carol: Client  # an approver of another group


def tokens(server: Server, tenant: str, ttl: str = "1h", people: bool = True) -> dict[str, str]:
    """The tenant's tokens (the first one makes the tenant) and its policy (set before
    its first sign request)."""
    made = {"requester": server.token(tenant, "read,create,sign", label="payouts")}
    if people:
        made["alice"] = server.token(tenant, "approve", label="alice", group="treasury")
        made["bob"] = server.token(tenant, "approve", label="bob", group="treasury")
        made["carol"] = server.token(tenant, "approve", label="carol", group="audit")
    server.policy(tenant, rule(ttl))
    return made


@pytest.fixture(scope="module")
def given(server: Server) -> dict[str, str]:
    """One tenant for the module (each CLI call costs a process start)."""
    return tokens(server, "apr-team")


@pytest.fixture
def team(server: Server, given: dict[str, str]) -> Iterator[Team]:
    made = {k: Client(server.url, t) for k, t in given.items()}
    try:
        made["requester"].accounts.create("cosmos", private_key=ONE)
    except Conflict:  # imported by an earlier test
        pass
    yield Team(**made)
    for c in made.values():
        c.close()


def pending(ck: Client, body: dict[str, Any]) -> ApprovalPending:
    with pytest.raises(ApprovalPending) as caught:
        ck.signing.sign_transfer(ADDRESS, body)
    return caught.value


def test_two_people_approve_and_wait_returns_the_signed_tx(team: Team) -> None:
    small = team.requester.signing.sign_transfer(ADDRESS, transfer(100, fee=100))
    assert isinstance(small, CosmosTx)  # within `above`: signed at once

    waiting = pending(team.requester, LARGE)
    a = waiting.approval
    assert (a.state, a.required, a.group, a.kind) == ("pending", 2, "treasury", "sign-transfer")
    assert a.digest and a.votes == [] and a.result is None and not a.terminal
    assert a.summary is not None and a.summary["items"][0]["recipient"] == LARGE["toAddress"]
    assert pending(team.requester, LARGE).id == waiting.id  # the same request: the same one

    with pytest.raises(ApprovalTimeout) as slow:  # nobody voted yet
        team.requester.approvals.wait(waiting, timeout=0.3, interval=0.1)
    assert slow.value.approval.state == "pending" and isinstance(slow.value, ChainkeysError)

    # approvers see their group's requests; another group's approver sees nothing
    assert waiting.id in [x.id for x in team.alice.approvals.list(state="pending").approvals]
    assert waiting.id in [x.id for x in team.bob.approvals.iter("pending", page_size=1)]
    with pytest.raises(NotFound):
        team.carol.approvals.get(waiting.id)
    with pytest.raises(Forbidden):  # the requester has no approve scope
        team.requester.approvals.approve(waiting, a.digest)

    with pytest.raises(ChainkeysError) as wrong:  # a vote names what it looked at
        team.bob.approvals.approve(waiting.id, "00" * 32)
    assert wrong.value.code == "digest_mismatch"

    with ThreadPoolExecutor(1) as pool:  # the requester waits while people vote
        waited = pool.submit(team.requester.approvals.wait, waiting, timeout=30, interval=0.05)
        time.sleep(0.2)
        assert not waited.done()
        first = team.bob.approvals.approve(waiting.id, a.digest)
        assert first.state == "pending" and [v.label for v in first.votes] == ["bob"]
        with pytest.raises(Conflict) as twice:
            team.bob.approvals.approve(waiting.id, a.digest)
        assert twice.value.code == "already_voted"
        last = team.alice.approvals.approve(waiting.id, a.digest)
        assert last.state == "signed"
        signed = waited.result(timeout=30)

    assert signed.state == "signed" and signed.terminal
    assert sorted(v.label for v in signed.votes) == ["alice", "bob"]
    tx = signed.result_as(CosmosTx)
    assert tx.signedTx == SIGNED_TX  # exactly what cosmjs signs for this transfer
    assert tx.txHash == hashlib.sha256(base64.b64decode(tx.signedTx)).hexdigest().upper()
    assert team.requester.approvals.wait(waiting.id).state == "signed"  # ended: at once
    assert team.requester.approvals.get(waiting).result == signed.result
    with pytest.raises(Conflict):  # closed
        team.bob.approvals.reject(waiting.id)


def test_reject_and_cancel_end_the_wait(team: Team) -> None:
    rejected = pending(team.requester, transfer(sequence=4))
    answer = team.bob.approvals.reject(rejected, reason="unknown payee")
    assert answer.state == "rejected" and answer.reason == "unknown payee"
    with pytest.raises(ApprovalFailed) as failed:
        team.requester.approvals.wait(rejected.id, timeout=5, interval=0.05)
    err = failed.value
    assert err.code == "approval_rejected" and err.approval.state == "rejected"
    assert err.approval.reason == "unknown payee" and "unknown payee" in str(err)
    assert [(v.label, v.decision) for v in err.approval.votes] == [("bob", "reject")]
    with pytest.raises(Conflict):  # a vote after the end
        team.alice.approvals.approve(rejected.id, rejected.approval.digest or "")

    cancelled = pending(team.requester, transfer(sequence=5))
    with pytest.raises(ChainkeysError):  # only the requester cancels
        team.alice.approvals.cancel(cancelled)
    assert team.requester.approvals.cancel(cancelled).state == "cancelled"
    with pytest.raises(ApprovalFailed) as withdrawn:
        team.requester.approvals.wait(cancelled, timeout=5, interval=0.05)
    assert withdrawn.value.code == "approval_cancelled"

    mine = team.requester.approvals.list()
    assert {x.id for x in mine.approvals} >= {rejected.id, cancelled.id}
    by_state = team.bob.approvals.list(state="rejected").approvals
    assert rejected.id in [x.id for x in by_state] and {x.state for x in by_state} == {"rejected"}


def test_an_expired_request_ends_the_wait(server: Server) -> None:
    given = tokens(server, "apr-expiry", ttl="1s", people=False)
    with Client(server.url, given["requester"]) as ck:
        ck.accounts.create("cosmos", private_key=ONE)
        waiting = pending(ck, LARGE)
        with pytest.raises(ApprovalFailed) as late:
            ck.approvals.wait(waiting, timeout=15, interval=0.2)
        assert late.value.code == "approval_expired" and late.value.approval.state == "expired"


def test_tokens_self(server: Server, given: dict[str, str]) -> None:
    with Client(server.url, given["alice"]) as alice, Client(server.url, given["requester"]) as me:
        who = alice.tokens.self()
        assert isinstance(who, TokenInfo)
        assert (who.tenant, who.label, who.scopes, who.group) == (
            "apr-team", "alice", ["approve"], "treasury")  # fmt: skip
        assert who.families is None and who.expires_ms is None
        assert abs(who.created_ms - time.time() * 1000) < 600_000
        mine = me.tokens.self()
        assert mine.label == "payouts" and sorted(mine.scopes) == ["create", "read", "sign"]
        assert mine.group is None and mine.id != who.id
        assert given["alice"] not in repr(who)


# ---- async ---------------------------------------------------------------------------


@pytest.mark.anyio
async def test_async_approval_flow(server: Server, given: dict[str, str]) -> None:
    async with (
        AsyncClient(server.url, given["requester"]) as me,
        AsyncClient(server.url, given["alice"]) as alice,
        AsyncClient(server.url, given["bob"]) as bob,
    ):
        try:
            await me.accounts.create("cosmos", private_key=ONE)
        except Conflict:  # imported by an earlier test
            pass
        assert (await bob.tokens.self()).group == "treasury"
        with pytest.raises(ApprovalPending) as caught:
            await me.signing.sign_transfer(ADDRESS, LARGE)
        waiting = caught.value
        digest = waiting.approval.digest or ""
        with pytest.raises(ChainkeysError) as wrong:
            await alice.approvals.approve(waiting.id, "ab" * 32)
        assert wrong.value.code == "digest_mismatch"
        listed = [x.id async for x in alice.approvals.iter("pending")]
        assert waiting.id in listed

        async def people() -> None:
            await asyncio.sleep(0.1)
            await alice.approvals.approve(waiting, digest)
            await bob.approvals.approve(waiting, digest)

        signed, _ = await asyncio.gather(
            me.approvals.wait(waiting, timeout=30, interval=0.05), people()
        )
        assert signed.state == "signed" and signed.result_as(CosmosTx).signedTx == SIGNED_TX

        with pytest.raises(ApprovalPending) as caught:
            await me.signing.sign_transfer(ADDRESS, transfer(sequence=8))
        other = caught.value
        with pytest.raises(ApprovalTimeout):
            await me.approvals.wait(other, timeout=0.2, interval=0.05)
        rejected = await bob.approvals.reject(other.id, reason="no")
        assert rejected.state == "rejected"
        with pytest.raises(ApprovalFailed) as failed:
            await me.approvals.wait(other.id, interval=0.05)
        assert failed.value.approval.reason == "no"

        with pytest.raises(ApprovalPending) as caught:
            await me.signing.sign_transfer(ADDRESS, transfer(sequence=9))
        assert (await me.approvals.cancel(caught.value)).state == "cancelled"
        assert (await me.approvals.get(caught.value.id)).terminal
