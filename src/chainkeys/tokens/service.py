"""Tenants and their tokens: random, shown once, stored as a keyed digest with a MAC.

The digest is HMAC(integrity key, sha256(token)) and each row carries a MAC over what
it grants (vault/integrity.py): a token row inserted or widened by someone who can
write the database but does not hold the master key is refused (401, logged,
counted). Issuing and revoking a token therefore need the master key."""

from __future__ import annotations

import math
import re
import secrets
import time
import uuid
from dataclasses import dataclass

from chainkeys.audit.repository import Audit
from chainkeys.audit.service import audit_event
from chainkeys.clock import now_ms
from chainkeys.errors import BadRequest, IntegrityFailure, NotFound, StartupError, Unauthorized
from chainkeys.store import tables
from chainkeys.store.backend import Backend
from chainkeys.store.cache import StoreCache
from chainkeys.store.integrity import TENANTS, TOKENS
from chainkeys.store.sql import Tx
from chainkeys.tokens.repository import LiveToken, Tenants, TokenRow
from chainkeys.vault.gate import Gate
from chainkeys.vault.heads import Loaded, Member

TOKEN_PREFIX = "ck_"  # noqa: S105 - a prefix, not a secret
SCOPES = ("read", "create", "delete", "sign", "export", "approve", "admin")
# Export, approve and admin are given only when asked for: approve and admin tokens
# are people's (a label), admins file and sign the tenant's governed changes.
DEFAULT_SCOPES = frozenset(SCOPES) - {"export", "approve", "admin"}
GROUP = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


@dataclass(frozen=True, slots=True)
class Principal:
    """The caller: its tenant, the token it used (by id) and what that token may do."""

    tenant_id: str
    tenant: str  # the tenant's name
    token_id: str
    scopes: frozenset[str] = DEFAULT_SCOPES
    families: frozenset[str] | None = None  # None: every family
    expires_ms: int | None = None
    label: str = ""  # a person, for `approve` and `admin` tokens (one label: one person)
    group: str | None = None  # the approver group of an `approve` token

    @classmethod
    def of(cls, live: LiveToken) -> Principal:
        families = frozenset(live.families.split(",")) if live.families else None
        scopes = frozenset(s for s in live.scopes.split(",") if s)
        return cls(
            live.tenant_id,
            live.tenant,
            live.token_id,
            scopes,
            families,
            live.expires_ms,
            live.label,
            live.group,
        )

    def may_use(self, family: str) -> bool:
        return self.families is None or family in self.families


def parse_scopes(text: str | None) -> frozenset[str]:
    """`read,sign` → the scopes; None → the default (all but export and approve)."""
    if text is None:
        return DEFAULT_SCOPES
    scopes = frozenset(s.strip() for s in text.split(",") if s.strip())
    unknown = sorted(scopes - set(SCOPES))
    if unknown or not scopes:
        raise BadRequest(f"scopes are a comma list of {', '.join(SCOPES)}", code="invalid_scope")
    return scopes


def parse_families(text: str | None) -> frozenset[str] | None:
    if text is None:
        return None
    # (here, not at import: token and audit commands need no chain code loaded)
    from chainkeys.chains.registry import FAMILIES

    families = frozenset(f.strip() for f in text.split(",") if f.strip())
    unknown = sorted(families - set(FAMILIES))
    if unknown or not families:
        raise BadRequest(
            f"families are a comma list of {', '.join(FAMILIES)}", code="invalid_family"
        )
    return families


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(text: str) -> int:
    """`30d`, `12h`, `90m`, `3600s` (or plain seconds) → milliseconds."""
    text = text.strip().lower()
    unit = _UNITS.get(text[-1:], 0)
    digits = text[:-1] if unit else text
    if not digits.isascii() or not digits.isdigit() or int(digits) == 0 or len(digits) > 9:
        raise BadRequest(
            "an expiry is a positive duration like 30d, 12h or 90m", code="invalid_expiry"
        )
    return int(digits) * (unit or 1) * 1000


def check_scopes(label: str, scopes: frozenset[str], group: str | None) -> None:
    """400 unless the scopes go with the label and group: an `approve` token is a
    person's (a label) of an approver group; an `admin` token's label names the person
    whose enrolled keys sign their votes."""
    if "approve" in scopes:
        if not label.strip() or group is None or not GROUP.fullmatch(group):
            raise BadRequest(
                "an approve token needs --label (the person) and --group (1 to "
                "64 of A-Z a-z 0-9 . _ -)",
                code="invalid_scope",
            )
    elif group is not None:
        raise BadRequest("--group goes with the approve scope", code="invalid_scope")
    if "admin" in scopes and (not label.strip() or len(label) > 128):
        raise BadRequest(
            "an admin token needs --label (the person, 1 to 128 characters): "
            "an admin's votes are signed by the key enrolled for that label",
            code="invalid_scope",
        )


@dataclass(frozen=True, slots=True)
class Grant:
    """What a new token may do (checked by `check_scopes`)."""

    label: str
    scopes: frozenset[str]
    expires_in_ms: int | None = None
    families: frozenset[str] | None = None
    group: str | None = None


async def insert_token(
    tx: Tx, integrity: Gate, owner: Principal, grant: Grant, token_digest: str
) -> TokenRow:
    """Insert a token of `owner`'s tenant (which exists) stored as `token_digest` (the
    keyed digest: the token itself is never given here), its MAC and its head's pin,
    audited as `token.create`, in `tx`: the operator's `token create`, and a governed
    change of kind token as it applies (governance/kinds.py)."""
    token_id, ts = uuid.uuid4().hex, now_ms()
    row = TokenRow(
        token_id,
        owner.tenant_id,
        owner.tenant,
        grant.label,
        ts,
        None,
        scopes=",".join(sorted(grant.scopes)),
        expires_ms=ts + grant.expires_in_ms if grant.expires_in_ms else None,
        families=",".join(sorted(grant.families)) if grant.families else None,
        group=grant.group,
        token_hash=token_digest,
    )
    mac = integrity.mac(TOKENS, row.covered())
    await Tenants.insert_token(tx, row, row.token_hash, mac)
    await integrity.heads.change(tx, owner.tenant_id, "tokens", added=[(token_id, mac)])
    details = {
        "scopes": sorted(grant.scopes),
        "expires_ms": row.expires_ms,
        "families": sorted(grant.families) if grant.families else None,
        "group": grant.group,
    }
    actor = Principal(owner.tenant_id, owner.tenant, token_id, label=owner.label)
    await Audit.insert(
        tx, audit_event(actor, "token.create", "ok", account_name=token_id, details=details)
    )
    return row


class TokenService:
    """Issue, list, revoke and check tokens."""

    SEEN_MAX = 4096  # live tokens remembered while the SQLite file is unchanged

    def __init__(self, db: Backend, integrity: Gate | None = None) -> None:
        self.db = db
        self.integrity = integrity  # None: an administration process without the key
        self._seen: StoreCache[str, Principal] = StoreCache(
            db, self.SEEN_MAX, frozenset({tables.tokens.name, tables.tenants.name}), "tokens"
        )  # hash -> caller
        self._checked = -math.inf  # perf_counter() when the cache was last refreshed

    async def authenticate(self, token: str, arrived: float | None = None) -> Principal | None:
        """The caller of a live token, or None.

        Where the store has a change counter (SQLite: `store/sqlite/counter.py`), a
        live token's caller is remembered until the next commit by any other
        connection or process: a revocation is such a commit. The counter is read
        again for every request that arrived (`arrived`, a `time.perf_counter()`)
        after it was last read, so a revocation counts for every request that
        arrives after it commits; requests that arrived together share one read.
        Unknown tokens are never remembered.
        """
        integrity = self._keyed()
        digest = integrity.token_digest(token)
        if arrived is None or arrived >= self._checked:
            checked = time.perf_counter()
            stamp = self._seen.refresh()
            self._checked = checked
        else:
            stamp = self._seen.stamp
        seen = self._seen.get(digest)
        if seen is not None:
            if seen.expires_ms is not None and seen.expires_ms <= now_ms():
                return None
            return seen
        async with self.db.read() as tx:
            found = await Tenants.by_token_hash(tx, digest)
            if found is None:
                return None
            try:
                integrity.check(TOKENS, found.covered(), f"token {found.token_id}")
                integrity.check(TENANTS, found.tenant_row(), f"tenant {found.tenant_id}")
                await self._current(tx, found.tenant_id, (found.token_id, str(found.mac)))
            except IntegrityFailure:
                return None  # refused as an unknown token would be: 401
        principal = Principal.of(found)
        self._seen.put(digest, principal, stamp)
        if principal.expires_ms is not None and principal.expires_ms <= now_ms():
            return None  # expired: refused like a revoked token
        return principal

    async def create(
        self,
        tenant: str,
        label: str = "",
        scopes: frozenset[str] = DEFAULT_SCOPES,
        expires_in_ms: int | None = None,
        families: frozenset[str] | None = None,
        group: str | None = None,
    ) -> tuple[TokenRow, str]:
        """Issue a token (creating the tenant if new); returns the row and the token. An
        `approve` token is a person's: it needs a label and an approver group; an
        `admin` token's label names the person whose enrolled keys sign their votes."""
        tenant = tenant.strip()
        if not tenant or len(tenant) > 64:
            raise BadRequest("a tenant name is 1 to 64 characters", code="invalid_tenant")
        check_scopes(label, scopes, group)
        integrity = self._keyed()
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        ts = now_ms()
        async with self.db.write() as tx:
            tenant_id = await Tenants.id_by_name(tx, tenant, integrity)
            if tenant_id is None:
                tenant_id = uuid.uuid4().hex
                made: dict[str, object] = {"id": tenant_id, "name": tenant, "created_ms": ts}
                await Tenants.insert(tx, {**made, "mac": integrity.mac(TENANTS, made)})
                await integrity.heads.born(tx, tenant_id)
            grant = Grant(label, scopes, expires_in_ms, families, group)
            owner = Principal(tenant_id, tenant, "")
            row = await insert_token(tx, integrity, owner, grant, integrity.token_digest(token))
        return row, token

    async def describe(self, who: Principal) -> TokenRow:
        """The caller's own token (`GET /tokens/self`): never the token, only its row."""
        async with self.db.read() as tx:
            row = await Tenants.token(tx, who.token_id)
        if row is None or row.revoked_ms is not None:
            raise Unauthorized()
        return row

    async def live(self, token_id: str) -> Principal | None:
        """The caller a token id stands for while the token is live (not revoked, not
        expired); None otherwise. For work done later on a token's behalf (an approved
        request signed at its quorum)."""
        integrity = self._keyed()
        async with self.db.read() as tx:
            row = await Tenants.token(tx, token_id)
            if row is None or row.revoked_ms is not None:
                return None
            try:  # a row a writer made or put back speaks for nobody (and stops no round)
                integrity.check(TOKENS, row.covered(), f"token {row.id}")
                await self._current(tx, row.tenant_id, (row.id, str(row.mac)))
            except IntegrityFailure:
                return None
        if row.expires_ms is not None and row.expires_ms <= now_ms():
            return None
        families = frozenset(row.families.split(",")) if row.families else None
        return Principal(
            row.tenant_id,
            row.tenant,
            row.id,
            frozenset(row.scopes.split(",")),
            families,
            row.expires_ms,
            row.label,
            row.group,
        )

    async def list(self, tenant: str | None = None) -> list[TokenRow]:
        async with self.db.read() as tx:
            return await Tenants.list_tokens(tx, tenant)

    async def revoke(self, token_id: str) -> None:
        integrity = self._keyed()
        async with self.db.write() as tx:
            at = now_ms()
            row = await Tenants.token(tx, token_id)
            mac = None
            if row is not None and integrity.valid(TOKENS, row.covered()):
                revoked = {**row.covered(), "revoked_ms": at}
                mac = integrity.mac(TOKENS, revoked)  # a row edited before stays refused
            tenant_id = await Tenants.revoke_token(tx, token_id, at, mac)
            if tenant_id is None:
                raise NotFound(f"no live token with id {token_id}")
            if mac is not None and row is not None:  # an edited row was never a member
                removed = [(token_id, str(row.mac))]
                await integrity.heads.change(tx, tenant_id, "tokens", removed=removed)
            owner = Principal(tenant_id, "", token_id)
            await Audit.insert(tx, audit_event(owner, "token.revoke", "ok", account_name=token_id))

    async def _current(self, tx: Tx, tenant_id: str, member: Member) -> None:
        """IntegrityFailure unless this token row is the latest copy (vault/heads.py)."""
        integrity = self._keyed()

        async def load() -> list[Loaded]:
            rows = await Tenants.live_members(tx, tenant_id)
            return [((r.id, str(r.mac)), integrity.valid(TOKENS, r.covered())) for r in rows]

        await integrity.heads.current(tx, tenant_id, "tokens", member, load, "a token")

    def _keyed(self) -> Gate:
        if self.integrity is None:
            raise StartupError(
                "issuing, revoking and checking tokens needs the master key "
                "(their rows are authenticated under it)"
            )
        return self.integrity

    async def issue_first(self) -> str | None:
        """On a store with no tokens at all, issue one for tenant `default` (once, ever)."""
        async with self.db.startup_lock():
            async with self.db.read() as tx:
                if await Tenants.count_tokens(tx):
                    return None
            _, token = await self.create("default", "first start")
        return token

    async def tenant_names(self) -> dict[str, str]:
        """Tenant id -> name, to show people names instead of ids."""
        async with self.db.read() as tx:
            return await Tenants.names(tx)

    async def tenant_id(self, name: str) -> str:
        async with self.db.read() as tx:
            found = await Tenants.id_by_name(tx, name, self.integrity)
        if found is None:
            raise NotFound(f"no tenant named {name}")
        return found
