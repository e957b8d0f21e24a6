"""Approvers' credentials, from enrolment to revocation: what may sign a vote.

Its own module because who holds which credential is managed apart from how a vote
is verified (approvals/passkeys.py, whose `Passkeys` adds the votes to this class):
an operator's one-time code (`chainkeys approver invite`, 15 minutes, stored as a
keyed digest under the integrity key, spent by the registration that uses it) names
the tenant, the person (label) and the group; the approver signs in with their
approve token and registers a passkey (resident key, user verification required).
An admin is enrolled the same way (`chainkeys admin invite`: the reserved group
`*admins`), signing in with their admin token, so they vote on governance changes
with a passkey. An
operator may instead enrol a script key (`chainkeys approver add-key`), list every
credential and revoke any; an approver lists and removes their own. Credentials and
codes are authenticated rows (store/integrity.py); the sign counter is covered and
the MAC made again at each use. Every step and every refusal is audited.
"""

from __future__ import annotations

import hashlib
import logging
import secrets
from dataclasses import replace
from typing import Any, Final
from urllib.parse import urlsplit

import msgspec
from webauthn import generate_registration_options, options_to_json, verify_registration_response
from webauthn.helpers.cose import COSEAlgorithmIdentifier
from webauthn.helpers.exceptions import WebAuthnException
from webauthn.helpers.structs import (
    AuthenticatorSelectionCriteria,
    PublicKeyCredentialDescriptor,
    ResidentKeyRequirement,
    UserVerificationRequirement,
)

from chainkeys.approvals.credentials import CredentialRow, Credentials, InviteRow, Invites
from chainkeys.approvals.proofs import (
    ADMINS,
    WEBAUTHN,
    CredentialNotFound,
    InviteRefused,
    PasskeysOff,
    b64url,
    person,
    plain,
    script_key,
    unb64url,
)
from chainkeys.audit.repository import Audit
from chainkeys.audit.service import audit_event
from chainkeys.clock import now_ms
from chainkeys.config import Settings
from chainkeys.errors import (
    BadRequest,
    ChainkeysError,
    Forbidden,
    IntegrityFailure,
    NotFound,
    StartupError,
)
from chainkeys.store.backend import Backend
from chainkeys.store.integrity import APPROVER_CREDENTIALS, APPROVER_INVITES
from chainkeys.store.sql import Tx
from chainkeys.tokens.repository import Tenants
from chainkeys.tokens.service import GROUP, Principal
from chainkeys.vault.gate import Gate
from chainkeys.vault.integrity import failed

log = logging.getLogger("chainkeys.approvals")
ENROL_PREFIX: Final = b"chainkeys enrol v1"
INVITE_MS: Final = 15 * 60_000
CREDENTIAL_PREFIX: Final = "apc_"
TIMEOUT_MS: Final = 120_000
_ALGS: Final = [COSEAlgorithmIdentifier.ECDSA_SHA_256, COSEAlgorithmIdentifier.EDDSA]


async def enrol_key(
    tx: Tx, gate: Gate, owner: Principal, label: str, group: str, kind: str, der: bytes
) -> CredentialRow:
    """Enrol a script key (`kind`, DER SubjectPublicKeyInfo, checked by `script_key`) for
    `label` of `group` in `owner`'s tenant, in `tx`: its row, MAC and head's pin,
    audited. The operator's `add-key`, and a governed change of kind approver or admin
    as it applies (governance/kinds.py)."""
    key_id = CREDENTIAL_PREFIX + secrets.token_hex(12)
    row = CredentialRow(
        key_id, owner.tenant_id, label, group, kind, key_id, b64url(der), 0, now_ms()
    )
    row = replace(row, mac=gate.mac(APPROVER_CREDENTIALS, row.covered()))
    await Credentials.insert(tx, row)
    await gate.heads.change(tx, owner.tenant_id, "credentials", added=[(row.id, str(row.mac))])
    details = {"credential": key_id, "label": row.label, "group": group, "kind": kind}
    action = "admin.key.add" if group == ADMINS else "approver.key.add"
    await Audit.insert(tx, audit_event(owner, action, "ok", details=details))
    return row


class Enrolment:
    """Enrolment (invites, script keys, passkey registration), listing and revoking of
    approvers' credentials."""

    def __init__(self, db: Backend, settings: Settings, integrity: Gate | None) -> None:
        self.db = db
        self.settings = settings
        self.integrity = integrity

    # -- where passkeys live ------------------------------------------------------------

    def _party(self) -> tuple[str, str]:
        """(RP id, origin) from CHAINKEYS_PUBLIC_URL."""
        url = self.settings.public_url
        if url is None:
            raise PasskeysOff()
        return urlsplit(url).hostname or "", url

    def _keyed(self) -> Gate:
        if self.integrity is None:
            raise StartupError(
                "approver credentials need the master key (their rows are authenticated under it)"
            )
        return self.integrity

    def _code_digest(self, code: str) -> str:
        """The keyed digest a code is stored as (a reader learns no code from it; a
        writer cannot make one that matches a code of their choosing)."""
        return self._keyed().token_digest("approver-invite:" + code.strip())

    # -- operators ------------------------------------------------------------------------

    async def invite(self, tenant: str, label: str, group: str) -> tuple[str, InviteRow]:
        """A one-time enrolment code for `label` of `group` in `tenant` (15 minutes);
        `group` ADMINS makes it an admin's (`chainkeys admin invite`)."""
        if not label.strip() or len(label) > 128:
            raise BadRequest("--label is the person: 1 to 128 characters", code="invalid_label")
        if group != ADMINS and not GROUP.fullmatch(group):
            raise BadRequest("--group: 1 to 64 of A-Z a-z 0-9 . _ -", code="invalid_group")
        code = "cki_" + secrets.token_urlsafe(18)
        at = now_ms()
        async with self.db.write() as tx:
            tenant_id = await Tenants.id_by_name(tx, tenant.strip(), self._keyed())
            if tenant_id is None:
                raise NotFound(f"no tenant named {tenant[:64]!r}", code="tenant_not_found")
            row = InviteRow(
                self._code_digest(code), tenant_id, label.strip(), group, at, at + INVITE_MS
            )
            row = replace(row, mac=self._keyed().mac(APPROVER_INVITES, row.covered()))
            await Invites.insert(tx, row)
            member = (row.code_digest, str(row.mac))
            await self._keyed().heads.change(tx, tenant_id, "invites", added=[member])
            details = {"label": row.label, "group": group, "expires_ms": row.expires_ms}
            actor = Principal(tenant_id, tenant, "")
            action = "admin.invite" if group == ADMINS else "approver.invite"
            await Audit.insert(tx, audit_event(actor, action, "ok", details=details))
        return code, row

    async def add_key(self, tenant: str, label: str, group: str, public_key: str) -> CredentialRow:
        """Enrol a script key (PEM, or base64 DER SubjectPublicKeyInfo; P-256 or Ed25519)
        for `label` of `group`: its signatures of the challenge are that person's votes.
        `group` ADMINS makes it an admin's key (`chainkeys admin add-key`): it signs
        governance changes, never approvals."""
        if not label.strip() or len(label) > 128 or not (group == ADMINS or GROUP.fullmatch(group)):
            raise BadRequest(
                "--label (the person) and --group (1 to 64 of A-Z a-z 0-9 . _ -) "
                "name whose key it is",
                code="invalid_group",
            )
        kind, der = script_key(public_key)
        async with self.db.write() as tx:
            tenant_id = await Tenants.id_by_name(tx, tenant.strip(), self._keyed())
            if tenant_id is None:
                raise NotFound(f"no tenant named {tenant[:64]!r}", code="tenant_not_found")
            owner = Principal(tenant_id, tenant, "")
            return await enrol_key(tx, self._keyed(), owner, label.strip(), group, kind, der)

    async def revoke(self, credential: str) -> CredentialRow:
        """An operator revokes any credential: its signatures count no more, votes
        already cast with it included (they are verified again at signing)."""
        async with self.db.read() as tx:
            row = await Credentials.get(tx, credential[:40])
        if row is None:
            raise CredentialNotFound()
        return await self._revoke(row, None)

    async def listed(self, tenant: str | None) -> list[tuple[str, CredentialRow]]:
        """Every credential (of one tenant), with its tenant's name: `approver list`."""
        async with self.db.read() as tx:
            return await Credentials.listed(tx, tenant)

    # -- approvers: enrolment -------------------------------------------------------------

    async def _invite(self, who: Principal, code: str) -> InviteRow:
        """The caller's live invite for `code`, or InviteRefused (audited)."""
        if not isinstance(code, str) or not 1 <= len(code) <= 100:
            await self.audit_refusal(who, "approver.credential.add", InviteRefused.code, {})
            raise InviteRefused()
        gate = self._keyed()
        async with self.db.read() as tx:
            row = await Invites.get(tx, self._code_digest(code))
            try:  # a code a writer made, edited or put back after it was spent
                if row is not None:
                    if not gate.valid(APPROVER_INVITES, row.covered()):
                        raise failed(APPROVER_INVITES, "an enrolment code")
                    if row.used_ms is None:
                        await Invites.current(tx, gate, row)
            except IntegrityFailure as exc:
                await self.audit_refusal(who, "approver.credential.add", exc.code, {})
                raise
        if (
            row is None
            or row.used_ms is not None
            or row.expires_ms <= now_ms()
            or row.tenant_id != who.tenant_id
            or person(row.label) != person(who.label)
            or not self._may_enrol(who, row.approver_group)
        ):
            await self.audit_refusal(who, "approver.credential.add", InviteRefused.code, {})
            raise InviteRefused()
        return row

    @staticmethod
    def _may_enrol(who: Principal, group: str) -> bool:
        """An admin's code is spent by an admin token; an approver's by an approve token
        of the code's group."""
        if group == ADMINS:
            return "admin" in who.scopes
        return group == who.group and "approve" in who.scopes

    @staticmethod
    def _enrol_challenge(invite: InviteRow) -> bytes:
        """The registration's challenge: bound to the code, which is spent by it."""
        return hashlib.sha256(ENROL_PREFIX + invite.code_digest.encode()).digest()

    async def creation_options(self, who: Principal, code: str) -> dict[str, Any]:
        """WebAuthn creation options for the caller's code (resident key and user
        verification required), as `PublicKeyCredentialCreationOptionsJSON`."""
        rp_id, _ = self._party()
        invite = await self._invite(who, code)
        mine = [c for c in await self._credentials(who) if c.kind == WEBAUTHN]
        options = generate_registration_options(
            rp_id=rp_id,
            rp_name="chainkeys",
            user_name=who.label,
            user_id=hashlib.sha256(f"{who.tenant_id}\x00{person(who.label)}".encode()).digest(),
            user_display_name=f"{who.label} ({who.tenant})",
            challenge=self._enrol_challenge(invite),
            timeout=TIMEOUT_MS,
            authenticator_selection=AuthenticatorSelectionCriteria(
                resident_key=ResidentKeyRequirement.REQUIRED,
                user_verification=UserVerificationRequirement.REQUIRED,
            ),
            exclude_credentials=[
                PublicKeyCredentialDescriptor(id=unb64url(c.credential_id)) for c in mine
            ],
            supported_pub_key_algs=_ALGS,
        )
        decoded: dict[str, Any] = msgspec.json.decode(options_to_json(options))
        return decoded

    async def register(self, who: Principal, code: str, credential: Any) -> CredentialRow:
        """Verify a registration response for the caller's code and keep the passkey;
        the code is spent."""
        rp_id, origin = self._party()
        invite = await self._invite(who, code)
        try:
            verified = verify_registration_response(
                credential=plain(credential),
                expected_challenge=self._enrol_challenge(invite),
                expected_rp_id=rp_id,
                expected_origin=origin,
                require_user_verification=True,
                supported_pub_key_algs=_ALGS,
            )
        except (WebAuthnException, ValueError, TypeError, KeyError, AttributeError) as exc:
            await self.audit_refusal(
                who, "approver.credential.add", "registration_invalid", {"why": str(exc)[:200]}
            )
            raise Forbidden(
                f"the passkey registration does not verify: {str(exc)[:200]}",
                code="registration_invalid",
            ) from None
        at = now_ms()
        row = CredentialRow(
            CREDENTIAL_PREFIX + secrets.token_hex(12),
            who.tenant_id,
            invite.label,
            invite.approver_group,
            WEBAUTHN,
            b64url(verified.credential_id),
            b64url(verified.credential_public_key),
            verified.sign_count,
            at,
        )
        integrity = self._keyed()
        row = replace(row, mac=integrity.mac(APPROVER_CREDENTIALS, row.covered()))
        used = replace(invite, used_ms=at)
        async with self.db.write() as tx:
            if not await Invites.use(
                tx, invite, at, integrity.mac(APPROVER_INVITES, used.covered())
            ):
                raise InviteRefused()  # spent meanwhile by another registration
            if not await Credentials.insert(tx, row):
                raise Forbidden("this passkey is enrolled already", code="credential_exists")
            spent = [(invite.code_digest, str(invite.mac))]
            await integrity.heads.change(tx, who.tenant_id, "invites", removed=spent)
            added = [(row.id, str(row.mac))]
            await integrity.heads.change(tx, who.tenant_id, "credentials", added=added)
            await Audit.insert(
                tx,
                audit_event(
                    who,
                    "approver.credential.add",
                    "ok",
                    details={"credential": row.id, "group": row.approver_group},
                ),
            )
        return row

    async def _credentials(self, who: Principal) -> list[CredentialRow]:
        """The caller's person's credentials (revoked ones too), each authenticated."""
        async with self.db.read() as tx:
            rows = await Credentials.of(tx, who.tenant_id)
        integrity = self._keyed()
        mine = []
        for r in rows:
            if person(r.label) != person(who.label):
                continue
            if not integrity.valid(APPROVER_CREDENTIALS, r.covered()):
                failed(APPROVER_CREDENTIALS, f"credential {r.id}")  # logged, counted, not shown
                continue
            mine.append(r)
        return mine

    async def mine(self, who: Principal) -> list[CredentialRow]:
        return await self._credentials(who)

    async def remove(self, who: Principal, credential: str) -> CredentialRow:
        """The approver removes (revokes) one of their own credentials."""
        found = [c for c in await self._credentials(who) if c.id == credential]
        if not found:
            raise CredentialNotFound()
        return await self._revoke(found[0], who)

    async def _revoke(self, row: CredentialRow, who: Principal | None) -> CredentialRow:
        self._keyed().check(APPROVER_CREDENTIALS, row.covered(), f"credential {row.id}")
        at = now_ms()
        done = replace(row, revoked_ms=row.revoked_ms or at)
        done = replace(done, mac=self._keyed().mac(APPROVER_CREDENTIALS, done.covered()))
        actor = who or Principal(row.tenant_id, "", "")
        async with self.db.write() as tx:
            if row.revoked_ms is None:
                if not await Credentials.revoke(tx, row, at, done.mac or ""):
                    raise CredentialNotFound()  # revoked meanwhile
                removed = [(row.id, str(row.mac))]
                await self._keyed().heads.change(tx, row.tenant_id, "credentials", removed=removed)
            await Audit.insert(
                tx,
                audit_event(
                    actor,
                    "approver.credential.revoke",
                    "ok",
                    details={"credential": row.id, "label": row.label},
                ),
            )
        return done

    async def audit_refusal(
        self, who: Principal, action: str, code: str, details: dict[str, Any]
    ) -> None:
        try:
            await Audit.record(self.db, audit_event(who, action, code, details=details))
        except ChainkeysError:
            log.error("the audit row of a refused %s could not be written", action)
