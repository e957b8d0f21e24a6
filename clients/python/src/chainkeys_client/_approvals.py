"""Approvals: `/approvals` and `/approvals/{id}` (docs/approvals.md).

A sign request that needs people raises `ApprovalPending`; `approvals.wait`
polls `GET /approvals/{id}` until the request ends: the signed approval, or
`ApprovalFailed` (rejected, expired, cancelled, failed), or `ApprovalTimeout`.
Votes and cancels are never retried automatically (a repeat is a 409).

On a rule with `"passkey": true` a vote counts only signed by the approver's enrolled
credential: `approvals.challenge(a, "approve")` gives the WebAuthn request options;
pass a WebAuthn assertion (`assertion=`, the authentication response JSON) or a script
key's signature of the challenge's 32 bytes (`signature=KeySignature(...)`, a key
enrolled with `chainkeys approver add-key`) with the vote.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

from chainkeys_client._core import AsyncRunner, Call, SyncRunner, data_as, segment
from chainkeys_client._errors import ApprovalFailed, ApprovalPending, ApprovalTimeout
from chainkeys_client._models import Approval, ApprovalPage, KeySignature

ApprovalRef = str | Approval | ApprovalPending
DEFAULT_WAIT = 300.0
DEFAULT_INTERVAL = 2.0


def _ref(approval: ApprovalRef) -> str:
    value = approval if isinstance(approval, str) else approval.id
    return segment(value, "an approval id")


# ---- the calls ------------------------------------------------------------------------


def list_call(
    state: str | None = None, limit: int | None = None, cursor: str | None = None
) -> Call[ApprovalPage]:
    params: dict[str, Any] = {"state": state, "limit": limit, "cursor": cursor}
    return Call("GET", "/approvals", data_as(ApprovalPage), params=params, retry=True)


def get_call(approval: ApprovalRef) -> Call[Approval]:
    return Call("GET", f"/approvals/{_ref(approval)}", data_as(Approval), retry=True)


Assertion = dict[str, Any]  # a WebAuthn authentication response (PublicKeyCredential.toJSON())


def _proof(body: dict[str, Any], assertion: Assertion | None,
           signature: KeySignature | None) -> dict[str, Any]:  # fmt: skip
    if assertion is not None and signature is not None:
        raise ValueError("a vote carries an assertion or a signature, not both")
    if assertion is not None:
        body["assertion"] = assertion
    if signature is not None:
        body["signature"] = {"credential": signature.credential, "value": signature.value}
    return body


def approve_call(approval: ApprovalRef, digest: str, assertion: Assertion | None = None,
                 signature: KeySignature | None = None) -> Call[Approval]:  # fmt: skip
    if not isinstance(digest, str) or not digest:
        raise ValueError("digest is the approval's digest you looked at (hex)")
    return Call("POST", f"/approvals/{_ref(approval)}/approve", data_as(Approval),
                body=_proof({"digest": digest}, assertion, signature))  # fmt: skip


def reject_call(approval: ApprovalRef, reason: str | None = None,
                assertion: Assertion | None = None,
                signature: KeySignature | None = None) -> Call[Approval]:  # fmt: skip
    body = _proof({} if reason is None else {"reason": reason}, assertion, signature)
    return Call("POST", f"/approvals/{_ref(approval)}/reject", data_as(Approval), body=body)


def challenge_call(approval: ApprovalRef, decision: str) -> Call[dict[str, Any]]:
    if decision not in ("approve", "reject"):
        raise ValueError("decision is approve or reject")
    return Call("GET", f"/approvals/{_ref(approval)}/challenge", data_as(dict[str, Any]),
                params={"decision": decision}, retry=True)  # fmt: skip


def canonical(summary: Any) -> bytes:
    """A summary's canonical JSON: keys sorted, no whitespace, UTF-8."""
    return json.dumps(
        summary, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode()


def vote_challenge(approval_id: str, digest: str, summary: Any, decision: str) -> bytes:
    """SHA-256("chainkeys approval v2" || id || digest || SHA-256(canonical summary
    JSON) || decision), the digest and the summary's SHA-256 in lowercase hex."""
    shown = hashlib.sha256(canonical(summary)).hexdigest()
    text = f"chainkeys approval v2{approval_id}{digest}{shown}{decision}"
    return hashlib.sha256(text.encode()).digest()


def challenge_bytes(
    options: dict[str, Any], approval: Approval | None = None, decision: str | None = None
) -> bytes:
    """The 32 bytes a script key signs: the request options' `challenge` (base64url),
    SHA-256("chainkeys approval v2" || id || digest || SHA-256(canonical summary JSON)
    || decision). Given the `approval` you looked at and the `decision`, the challenge
    is recomputed here and ValueError raised unless the options' summary is that
    approval's and their challenge covers it."""
    text = str(options["challenge"])
    given = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if approval is None:
        return given
    if decision not in ("approve", "reject"):
        raise ValueError("decision is approve or reject")
    summary = options.get("summary")
    if canonical(summary) != canonical(approval.summary):
        raise ValueError("the challenge covers another summary than the approval you looked at")
    if given != vote_challenge(approval.id, approval.digest or "", summary, decision):
        raise ValueError("the challenge is not this approval's, summary's and decision's")
    return given


def cancel_call(approval: ApprovalRef) -> Call[Approval]:
    return Call("POST", f"/approvals/{_ref(approval)}/cancel", data_as(Approval))


# ---- waiting (the decision is shared; only the sleep differs) --------------------------


def settled(
    approval: Approval, deadline: float, timeout: float, ref: ApprovalRef | None = None
) -> Approval | None:
    """The approval once signed (its result checked as the sign method checks an answer,
    when `ref` is the `ApprovalPending` it raised); None while it may still be; else the
    exception."""
    if approval.state == "signed":
        if isinstance(ref, ApprovalPending) and ref.check is not None:
            ref.check(approval.result)  # AnswerMismatch: not the signature asked for
        return approval
    if approval.terminal:
        raise ApprovalFailed(approval)
    if time.monotonic() >= deadline:
        raise ApprovalTimeout(approval, timeout)
    return None


def pause(deadline: float, interval: float) -> float:
    return max(0.0, min(interval, deadline - time.monotonic()))


def _checked(timeout: float, interval: float) -> float:
    if timeout < 0 or interval <= 0:
        raise ValueError("timeout is >= 0 and interval > 0 (seconds)")
    return time.monotonic() + timeout


# ---- sync and async faces --------------------------------------------------------------


class Approvals:
    """`client.approvals`: list, get, approve, reject, cancel, wait.

    An approver (a token with the `approve` scope and a group) sees and votes on its
    group's requests; the requester sees and cancels its own.
    """

    def __init__(self, run: SyncRunner) -> None:
        self._run = run

    def list(
        self, state: str | None = None, limit: int | None = None, cursor: str | None = None
    ) -> ApprovalPage:
        """One page, newest first; `state`: pending, approved, signed, failed, rejected,
        expired, cancelled."""
        return self._run(list_call(state, limit, cursor))

    def iter(self, state: str | None = None, *, page_size: int | None = None) -> Iterator[Approval]:
        cursor: str | None = None
        while True:
            page = self.list(state, page_size, cursor)
            yield from page.approvals
            if not page.next_cursor:
                return
            cursor = page.next_cursor

    def get(self, approval: ApprovalRef) -> Approval:
        """One approval request (an id, an `Approval` or an `ApprovalPending`)."""
        return self._run(get_call(approval))

    def approve(self, approval: ApprovalRef, digest: str, *, assertion: Assertion | None = None,
                signature: KeySignature | None = None) -> Approval:  # fmt: skip
        """Vote for it, naming the `digest` you looked at (another: `digest_mismatch`).
        The vote that reaches the quorum signs: the answer's state is then `signed`. On
        a passkey rule, with the passkey's `assertion` or a script key's `signature`."""
        return self._run(approve_call(approval, digest, assertion, signature))

    def reject(self, approval: ApprovalRef, reason: str | None = None, *,
               assertion: Assertion | None = None,
               signature: KeySignature | None = None) -> Approval:  # fmt: skip
        """One rejection ends the request."""
        return self._run(reject_call(approval, reason, assertion, signature))

    def challenge(self, approval: ApprovalRef, decision: str = "approve") -> dict[str, Any]:
        """WebAuthn request options for a signed vote (`challenge_bytes` of them is what a
        script key signs)."""
        return self._run(challenge_call(approval, decision))

    def cancel(self, approval: ApprovalRef) -> Approval:
        """The requester withdraws its own pending request."""
        return self._run(cancel_call(approval))

    def wait(
        self,
        approval: ApprovalRef,
        *,
        timeout: float = DEFAULT_WAIT,
        interval: float = DEFAULT_INTERVAL,
    ) -> Approval:
        """Poll every `interval` s until it ends: the signed approval (`result_as(...)`
        reads the signature), else `ApprovalFailed`, or `ApprovalTimeout` after `timeout` s.
        Given the `ApprovalPending` a sign method raised, the result is checked as that
        method checks an answer (`AnswerMismatch`); an id alone cannot be checked.
        """
        deadline = _checked(timeout, interval)
        while True:
            done = settled(self.get(approval), deadline, timeout, approval)
            if done is not None:
                return done
            time.sleep(pause(deadline, interval))


class AsyncApprovals:
    """`client.approvals` of the AsyncClient: the same methods, awaited."""

    def __init__(self, run: AsyncRunner) -> None:
        self._run = run

    async def list(
        self, state: str | None = None, limit: int | None = None, cursor: str | None = None
    ) -> ApprovalPage:
        return await self._run(list_call(state, limit, cursor))

    async def iter(
        self, state: str | None = None, *, page_size: int | None = None
    ) -> AsyncIterator[Approval]:
        cursor: str | None = None
        while True:
            page = await self.list(state, page_size, cursor)
            for approval in page.approvals:
                yield approval
            if not page.next_cursor:
                return
            cursor = page.next_cursor

    async def get(self, approval: ApprovalRef) -> Approval:
        return await self._run(get_call(approval))

    async def approve(self, approval: ApprovalRef, digest: str, *,
                      assertion: Assertion | None = None,
                      signature: KeySignature | None = None) -> Approval:  # fmt: skip
        return await self._run(approve_call(approval, digest, assertion, signature))

    async def reject(self, approval: ApprovalRef, reason: str | None = None, *,
                     assertion: Assertion | None = None,
                     signature: KeySignature | None = None) -> Approval:  # fmt: skip
        return await self._run(reject_call(approval, reason, assertion, signature))

    async def challenge(self, approval: ApprovalRef, decision: str = "approve") -> dict[str, Any]:
        return await self._run(challenge_call(approval, decision))

    async def cancel(self, approval: ApprovalRef) -> Approval:
        return await self._run(cancel_call(approval))

    async def wait(
        self,
        approval: ApprovalRef,
        *,
        timeout: float = DEFAULT_WAIT,
        interval: float = DEFAULT_INTERVAL,
    ) -> Approval:
        deadline = _checked(timeout, interval)
        while True:
            done = settled(await self.get(approval), deadline, timeout, approval)
            if done is not None:
                return done
            await asyncio.sleep(pause(deadline, interval))


__all__ = ["ApprovalRef", "Approvals", "AsyncApprovals"]
