"""Approver passkeys: a vote that only the person can produce.

A bearer token's vote is as strong as the token. On a request whose rule says
`"passkey": true`, a vote counts only signed by a credential the person enrolled:

- a passkey (WebAuthn): an assertion whose challenge is
  `SHA-256("chainkeys approval v2" || id || digest || SHA-256(canonical summary JSON)
  || decision)` (approvals/proofs.py `challenge`; the summary is the one derived from
  the request, approvals/summaries.py), made for the
  console's origin and RP id (`CHAINKEYS_PUBLIC_URL`), user verified, with a sign
  counter that moves forward (a counter that is not above the stored one is refused
  unless both are 0: authenticators that keep no counter send 0);
- a script key (`chainkeys approver add-key`, P-256 or Ed25519): a signature of the
  same 32-byte challenge, for automation that is a person's delegate.

Verification is py_webauthn's (`webauthn`): no CBOR or COSE is parsed here. The
assertion is stored with the vote and verified again when the quorum signs
(`ApprovalService.verified`, from the signing service's `_complete`), against the
credential row as it is then: a vote row written by hand, a vote whose credential was
revoked since, or an assertion moved onto another person's vote counts for nothing.
The counter is checked when the vote is cast (it has moved on by signing time).

Enrolment, listing and revoking of the credentials are approvals/enrolment.py's
(`Enrolment`, which `Passkeys` extends with the votes). Every refusal is audited.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

import msgspec
from cryptography.exceptions import InvalidSignature
from webauthn import (
    generate_authentication_options,
    options_to_json,
    verify_authentication_response,
)
from webauthn.helpers.exceptions import WebAuthnException
from webauthn.helpers.structs import PublicKeyCredentialDescriptor, UserVerificationRequirement

from chainkeys.approvals.credentials import CredentialRow, Credentials
from chainkeys.approvals.enrolment import TIMEOUT_MS, Enrolment
from chainkeys.approvals.proofs import (
    DECISIONS,
    ED25519,
    P256,
    WEBAUTHN,
    AssertionRefused,
    CounterRefused,
    CredentialRefused,
    PasskeyRequired,
    Proof,
    b64url,
    challenge,
    person,
    plain,
    unb64url,
    verify_key,
)
from chainkeys.approvals.repository import ApprovalRow, Vote
from chainkeys.clock import now_ms
from chainkeys.errors import BadRequest, ChainkeysError
from chainkeys.store.integrity import APPROVER_CREDENTIALS
from chainkeys.store.sql import Tx
from chainkeys.tokens.service import Principal

log = logging.getLogger("chainkeys.approvals")


class Passkeys(Enrolment):
    """The challenges and the verification of signed votes, with the credentials that
    `Enrolment` enrols."""

    # -- votes ------------------------------------------------------------------------------

    async def request_options(
        self, who: Principal, row: ApprovalRow, summary: dict[str, Any] | None, decision: str
    ) -> dict[str, Any]:
        """WebAuthn request options whose challenge is this request's, its summary's and
        decision's (a script key signs the same `challenge`), allowing the caller's
        passkeys, with the `summary` the challenge covers beside them."""
        if decision not in DECISIONS:
            raise BadRequest("decision is approve or reject", code="invalid_decision")
        expected = challenge(row.id, row.digest, summary, decision)
        if self.settings.public_url is None:  # no passkeys here: what a script key signs
            return {
                "challenge": b64url(expected),
                "timeout": TIMEOUT_MS,
                "userVerification": "required",
                "summary": summary,
            }
        rp_id, _ = self._party()
        live = [
            c for c in await self._credentials(who) if c.kind == WEBAUTHN and c.revoked_ms is None
        ]
        options = generate_authentication_options(
            rp_id=rp_id,
            challenge=expected,
            timeout=TIMEOUT_MS,
            allow_credentials=[
                PublicKeyCredentialDescriptor(id=unb64url(c.credential_id)) for c in live
            ],
            user_verification=UserVerificationRequirement.REQUIRED,
        )
        decoded: dict[str, Any] = msgspec.json.decode(options_to_json(options))
        decoded["summary"] = summary
        return decoded

    async def check(
        self,
        who: Principal,
        row: ApprovalRow,
        summary: dict[str, Any] | None,
        decision: str,
        proof: Proof,
    ) -> str:
        """Verify a vote's proof for `row`, its `summary` (derived now) and `decision` as
        `who`; move the counter; the JSON to store with the vote. Refusals are audited
        and raised."""
        expected = challenge(row.id, row.digest, summary, decision)
        details = {"approval": row.id}
        return await self.signed(
            who, expected, row.approver_group, proof, f"approval.{decision}", details
        )

    async def signed(
        self,
        who: Principal,
        expected: bytes,
        group: str,
        proof: Proof,
        action: str,
        details: dict[str, Any],
    ) -> str:
        """Verify that `proof` is `who`'s live credential of `group` signing `expected`
        (an approval's challenge, or a governance change's); move a passkey's counter;
        the JSON to store with the vote. Refusals are audited (as `action`) and raised."""
        try:
            credential, stored, count = await self._verify(
                expected, proof, who.tenant_id, who.label, group
            )
            if (
                credential.kind == WEBAUTHN
                and (count or credential.sign_count)
                and (count <= credential.sign_count)
            ):
                raise CounterRefused()
            if credential.kind == WEBAUTHN:
                await self._moved(credential, count)
        except ChainkeysError as exc:
            await self.audit_refusal(who, action, exc.code, details)
            raise
        return stored

    async def _moved(self, credential: CredentialRow, count: int) -> None:
        at = now_ms()
        moved = replace(credential, sign_count=count, last_used_ms=at)
        gate = self._keyed()
        mac = gate.mac(APPROVER_CREDENTIALS, moved.covered())
        async with self.db.write() as tx:
            if not await Credentials.used(tx, credential, count, mac, at):
                raise CounterRefused()  # another assertion moved it first
            await gate.heads.change(
                tx,
                credential.tenant_id,
                "credentials",
                removed=[(credential.id, str(credential.mac))],
                added=[(credential.id, mac)],
            )

    async def counts(self, row: ApprovalRow, summary: dict[str, Any] | None, vote: Vote) -> bool:
        """Whether a stored vote's proof verifies now, against its credential as it is
        now (at signing) and the summary derived now: false for no proof, a revoked or
        another person's credential, or a signature of anything else (another summary
        too). The counter was checked when it was cast."""
        expected = challenge(row.id, row.digest, summary, vote.decision)
        if await self.still_signed(
            expected, vote.assertion, row.tenant_id, vote.voter_label, row.approver_group
        ):
            return True
        log.warning("a stored vote on approval %s does not verify; it is not counted", row.id)
        return False

    async def still_signed(
        self,
        expected: bytes,
        stored: str | None,
        tenant_id: str,
        label: str,
        group: str,
        tx: Tx | None = None,
    ) -> bool:
        """Whether a proof as `signed` stored it verifies now for `expected`, against its
        credential as it is now (revoked since, or another's: it does not); read in `tx`
        when given (a count made in the transaction that acts on it)."""
        if stored is None:
            return False
        try:
            found = msgspec.json.decode(stored)
            proof = Proof(found.get("assertion"), found.get("credential"), found.get("signature"))
            await self._verify(expected, proof, tenant_id, label, group, tx)
        except (ChainkeysError, msgspec.DecodeError, AttributeError):
            return False
        return True

    async def _verify(
        self,
        expected: bytes,
        proof: Proof,
        tenant_id: str,
        label: str,
        group: str,
        tx: Tx | None = None,
    ) -> tuple[CredentialRow, str, int]:
        """(the credential, the proof as stored, the authenticator's counter) when `proof`
        is `label`'s live credential's (of `group`) signature of `expected`."""
        if proof.assertion is not None:
            rp_id, origin = self._party()
            response = plain(proof.assertion)
            raw = response.get("rawId") or response.get("id")
            credential = await self._credential(tenant_id, label, group, tx, credential_id=raw)
            if credential.kind != WEBAUTHN:
                raise CredentialRefused()
            try:
                verified = verify_authentication_response(
                    credential=response,
                    expected_challenge=expected,
                    expected_rp_id=rp_id,
                    expected_origin=origin,
                    credential_public_key=unb64url(credential.public_key),
                    credential_current_sign_count=0,
                    require_user_verification=True,
                )
            except (WebAuthnException, ValueError, TypeError, KeyError, AttributeError) as exc:
                raise AssertionRefused(f"{AssertionRefused.message}: {str(exc)[:200]}") from None
            stored = {"credential": credential.id, "assertion": response}
            return credential, msgspec.json.encode(stored).decode(), verified.new_sign_count
        if proof.credential is not None and proof.signature is not None:
            credential = await self._credential(tenant_id, label, group, tx, key=proof.credential)
            if credential.kind not in (P256, ED25519):
                raise CredentialRefused()
            try:
                verify_key(credential, unb64url(proof.signature), expected)
            except (InvalidSignature, ValueError, TypeError):
                raise AssertionRefused() from None
            stored = {"credential": credential.id, "signature": proof.signature}
            return credential, msgspec.json.encode(stored).decode(), 0
        raise PasskeyRequired()

    async def _credential(
        self,
        tenant_id: str,
        label: str,
        group: str,
        tx: Tx | None,
        *,
        credential_id: Any = None,
        key: Any = None,
    ) -> CredentialRow:
        """The live, authenticated credential of this person and group, found by the
        authenticator's id or by our key id (read in `tx`, or a read of its own);
        CredentialRefused otherwise."""
        if not isinstance(credential_id or key, str) or len(credential_id or key) > 1400:
            raise CredentialRefused()
        if tx is None:
            async with self.db.read() as own:
                return await self._credential(
                    tenant_id, label, group, own, credential_id=credential_id, key=key
                )
        gate = self._keyed()
        if key is not None:
            row = await Credentials.get(tx, key)
        else:
            row = await Credentials.by_credential_id(tx, tenant_id, credential_id)
        if row is None:
            raise CredentialRefused()
        gate.check(APPROVER_CREDENTIALS, row.covered(), f"credential {row.id}")
        if row.revoked_ms is None:  # put back from before its revocation or last use
            await Credentials.current(tx, gate, row)
        if (
            row.tenant_id != tenant_id
            or person(row.label) != person(label)
            or row.approver_group != group
            or row.revoked_ms is not None
        ):
            raise CredentialRefused()
        return row
