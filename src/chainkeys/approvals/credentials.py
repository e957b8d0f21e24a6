"""Approvers' credentials (passkeys and script keys) and their one-time enrolment
codes: their SQL (approvals/enrolment.py enrols, approvals/passkeys.py verifies votes
with them). Both are authenticated rows whose live sets the tenant's head pins
(vault/heads.py): a revoked credential, a counter moved back or a spent code put back
by a database writer fails."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from sqlalchemy import insert, select, update

from chainkeys.store.integrity import APPROVER_CREDENTIALS, APPROVER_INVITES
from chainkeys.store.sql import Prepared, Tx, insert_new
from chainkeys.store.tables import approver_credentials, approver_invites, tenants
from chainkeys.vault.gate import Gate
from chainkeys.vault.heads import Loaded


@dataclass(frozen=True, slots=True)
class CredentialRow:
    """An approver's passkey or script key (approvals/passkeys.py)."""

    id: str
    tenant_id: str
    label: str
    approver_group: str
    kind: str  # webauthn, p256, ed25519
    credential_id: str  # base64url
    public_key: str  # base64url
    sign_count: int
    created_ms: int
    revoked_ms: int | None = None
    last_used_ms: int | None = None
    mac: str | None = None

    def covered(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True, slots=True)
class InviteRow:
    """A one-time enrolment code, by its keyed digest."""

    code_digest: str
    tenant_id: str
    label: str
    approver_group: str
    created_ms: int
    expires_ms: int
    used_ms: int | None = None
    mac: str | None = None

    def covered(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


_c, _i = approver_credentials.c, approver_invites.c
_CRED_COLUMNS = [f.name for f in fields(CredentialRow)]
_CRED_SELECT = select(*(_c[n] for n in _CRED_COLUMNS))
_INVITE_COLUMNS = [f.name for f in fields(InviteRow)]
_CRED_INSERT = Prepared(insert(approver_credentials), _CRED_COLUMNS)


class Credentials:
    @staticmethod
    async def insert(tx: Tx, row: CredentialRow) -> bool:
        """False when the tenant has this credential id already."""
        return await insert_new(tx, _CRED_INSERT, {n: getattr(row, n) for n in _CRED_COLUMNS})

    @staticmethod
    async def get(tx: Tx, credential: str) -> CredentialRow | None:
        found = (await tx.execute(_CRED_SELECT.where(_c.id == credential))).first()
        return None if found is None else CredentialRow(*found)

    @staticmethod
    async def by_credential_id(tx: Tx, tenant_id: str, credential_id: str) -> CredentialRow | None:
        stmt = _CRED_SELECT.where(_c.tenant_id == tenant_id, _c.credential_id == credential_id)
        found = (await tx.execute(stmt)).first()
        return None if found is None else CredentialRow(*found)

    @staticmethod
    async def of(tx: Tx, tenant_id: str) -> list[CredentialRow]:
        """A tenant's credentials, oldest first (the caller picks a person's: labels
        compare as people, approvals/service.py `person`)."""
        stmt = _CRED_SELECT.where(_c.tenant_id == tenant_id)
        rows = (await tx.execute(stmt.order_by(_c.created_ms, _c.id))).all()
        return [CredentialRow(*r) for r in rows]

    @staticmethod
    async def listed(tx: Tx, tenant: str | None) -> list[tuple[str, CredentialRow]]:
        """(tenant name, credential) of every credential, or one tenant's, oldest first."""
        stmt = select(tenants.c.name, *(_c[n] for n in _CRED_COLUMNS)).join(
            tenants, tenants.c.id == _c.tenant_id
        )
        if tenant is not None:
            stmt = stmt.where(tenants.c.name == tenant)
        rows = (await tx.execute(stmt.order_by(_c.created_ms, _c.id))).all()
        return [(r[0], CredentialRow(*r[1:])) for r in rows]

    @staticmethod
    async def current(tx: Tx, gate: Gate, row: CredentialRow) -> None:
        """IntegrityFailure unless `row` (its MAC checked) is the latest copy of a live
        credential: one put back from before its revocation or its counter's last move
        fails (the tenant's `credentials` set, vault/heads.py)."""

        async def load() -> list[Loaded]:
            found = await Credentials.of(tx, row.tenant_id)
            return [
                ((r.id, str(r.mac)), gate.valid(APPROVER_CREDENTIALS, r.covered()))
                for r in found
                if r.revoked_ms is None
            ]

        member = (row.id, str(row.mac))
        what = f"credential {row.id}"
        await gate.heads.current(tx, row.tenant_id, "credentials", member, load, what)

    @staticmethod
    async def used(tx: Tx, row: CredentialRow, sign_count: int, mac: str, at: int) -> bool:
        """Move the counter from the row's value (compare-and-set: of two assertions
        racing with one counter, one wins)."""
        stmt = (
            update(approver_credentials)
            .where(_c.id == row.id, _c.sign_count == row.sign_count, _c.revoked_ms.is_(None))
            .values(sign_count=sign_count, mac=mac, last_used_ms=at)
        )
        return bool((await tx.execute(stmt)).rowcount)

    @staticmethod
    async def revoke(tx: Tx, row: CredentialRow, at: int, mac: str) -> bool:
        stmt = (
            update(approver_credentials)
            .where(_c.id == row.id, _c.revoked_ms.is_(None))
            .values(revoked_ms=at, mac=mac)
        )
        return bool((await tx.execute(stmt)).rowcount)


class Invites:
    @staticmethod
    async def insert(tx: Tx, row: InviteRow) -> None:
        await tx.execute(insert(approver_invites), {n: getattr(row, n) for n in _INVITE_COLUMNS})

    @staticmethod
    async def get(tx: Tx, code_digest: str) -> InviteRow | None:
        stmt = select(*(_i[n] for n in _INVITE_COLUMNS)).where(_i.code_digest == code_digest)
        found = (await tx.execute(stmt)).first()
        return None if found is None else InviteRow(*found)

    @staticmethod
    async def current(tx: Tx, gate: Gate, row: InviteRow) -> None:
        """IntegrityFailure unless `row` (its MAC checked) is an unused code as the
        tenant's head pins it: a spent code put back fails."""

        async def load() -> list[Loaded]:
            stmt = select(*(_i[n] for n in _INVITE_COLUMNS)).where(
                _i.tenant_id == row.tenant_id, _i.used_ms.is_(None)
            )
            found = [InviteRow(*r) for r in (await tx.execute(stmt)).all()]
            return [
                ((r.code_digest, str(r.mac)), gate.valid(APPROVER_INVITES, r.covered()))
                for r in found
            ]

        member = (row.code_digest, str(row.mac))
        await gate.heads.current(tx, row.tenant_id, "invites", member, load, "an enrolment code")

    @staticmethod
    async def use(tx: Tx, row: InviteRow, at: int, mac: str) -> bool:
        """Spend the code once (compare-and-set: two registrations with one code, one wins)."""
        stmt = (
            update(approver_invites)
            .where(_i.code_digest == row.code_digest, _i.used_ms.is_(None))
            .values(used_ms=at, mac=mac)
        )
        return bool((await tx.execute(stmt)).rowcount)
