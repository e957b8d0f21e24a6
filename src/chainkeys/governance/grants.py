"""Governed changes that grant: a new token, and an approver's or admin's key.

Each of them loosens (someone may do more than before), so each waits the tenant's
delay after the quorum. Revoking a token or a key is never a change: it only
tightens, and stays immediate (`chainkeys token revoke`, `approver revoke`).

A token by change (`TokenKind`) reaches the admin who filed it without the database
ever holding it: the server draws it when the change is filed, puts only its keyed
digest (what `tokens.token_hash` holds, HMAC under the integrity key) in the change's
document, which the votes sign through the change's digest, and answers the token
once, in the filing's 202, to the filer alone. Until the change applies no token row
has that digest, so the token opens nothing; if the change is rejected or cancelled it
never will. Why not deliver it after applying instead: that needs the token kept
somewhere between (in clear, or sealed under a key the server holds, so anyone with the
master key and a backup could read it) or derived again from a server key (then the
operator could derive any admin's tokens, and "once" needs a delivered mark a database
writer could clear); drawing it at filing keeps nothing to read, derive or replay. The
cost: a filing answer lost is a token lost; cancel the change and file it again.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Mapping
from typing import Any, Final

import msgspec

from chainkeys.approvals.enrolment import enrol_key
from chainkeys.approvals.proofs import ADMINS, b64url, script_key, unb64url
from chainkeys.chains.registry import FAMILIES
from chainkeys.errors import BadRequest, IntegrityFailure
from chainkeys.governance.kinds import Plan, canonical, fields_of, span
from chainkeys.governance.repository import ChangeRow
from chainkeys.store.sql import Tx
from chainkeys.text import printable
from chainkeys.tokens.service import (
    GROUP,
    TOKEN_PREFIX,
    Grant,
    Principal,
    check_scopes,
    insert_token,
    parse_duration,
)
from chainkeys.vault.gate import Gate

# What needs governing to be given. `admin` goes alone: an admin files and cancels the
# tenant's changes (one alone cancels any), so a new one joins the body the quorum is
# counted in, and a token that both governs and signs would be two roles in one bearer.
TOKEN_SCOPES: Final = ("sign", "export", "approve", "admin")
MAX_KEY: Final = 4096  # a PEM public key is far shorter


def _gate(tx: Tx) -> Gate:
    gate = tx.signer
    if not isinstance(gate, Gate):
        raise IntegrityFailure("the integrity key is not open here: nothing was done")
    return gate


def _label(value: object) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > 128 or not printable(value):
        raise BadRequest(
            "label is the person: 1 to 128 characters, no control or line-break characters",
            code="invalid_label",
        )
    return value.strip()


def _strings(value: object, name: str, allowed: tuple[str, ...], code: str) -> list[str]:
    if (
        not isinstance(value, list)
        or not value
        or not all(isinstance(v, str) and v in allowed for v in value)
        or len(set(value)) != len(value)
    ):
        raise BadRequest(f"{name} is a list of one or more of {', '.join(allowed)}", code=code)
    return sorted(value)


class TokenKind:
    """`{"kind": "token", "label", "scopes", "families"?, "expires"?, "approver_group"?}`."""

    async def plan(self, tx: Tx, who: Principal, body: Mapping[str, Any]) -> Plan:
        fields_of(body, "token", {"label", "scopes"}, {"families", "expires", "approver_group"})
        label = _label(body["label"])
        scopes = _strings(body["scopes"], "scopes", TOKEN_SCOPES, "invalid_scope")
        families = body.get("families")
        if families is not None:
            families = _strings(families, "families", tuple(sorted(FAMILIES)), "invalid_family")
        expires_ms = None
        if body.get("expires") is not None:
            expires = body["expires"]
            if not isinstance(expires, str) or len(expires) > 16:
                raise BadRequest(
                    "expires is a duration like 30d, 12h or 90m", code="invalid_expiry"
                )
            expires_ms = parse_duration(expires)
        group = body.get("approver_group")
        if group is not None and not (isinstance(group, str) and GROUP.fullmatch(group)):
            raise BadRequest("approver_group: 1 to 64 of A-Z a-z 0-9 . _ -", code="invalid_group")
        if "admin" in scopes and len(scopes) > 1:
            raise BadRequest(
                "an admin token has the admin scope alone: issue its other scopes in a "
                "token of their own",
                code="invalid_scope",
            )
        check_scopes(label, frozenset(scopes), group)
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        document = {
            "label": label,
            "scopes": scopes,
            "families": families,
            "expires_ms": expires_ms,
            "approver_group": group,
            "token_digest": _gate(tx).token_digest(token),
        }
        words = [
            f"a new token for {label!r} that may {', '.join(scopes)}"
            + (f" (approver group {group})" if group else "")
            + f", for {', '.join(families) if families else 'every family'}, "
            + (f"expiring {span(expires_ms)} after it applies" if expires_ms else "never expiring")
        ]
        return Plan(canonical(document), 0, words, True, secret=token)

    async def apply(self, tx: Tx, row: ChangeRow) -> dict[str, object]:
        doc = msgspec.json.decode(row.document or "{}")
        families = doc.get("families")
        grant = Grant(
            doc["label"],
            frozenset(doc["scopes"]),
            doc.get("expires_ms"),
            frozenset(families) if families else None,
            doc.get("approver_group"),
        )
        owner = Principal(row.tenant_id, "", "", label=row.created_by)
        made = await insert_token(tx, _gate(tx), owner, grant, str(doc["token_digest"]))
        return {"token_id": made.id, "label": grant.label, "scopes": sorted(grant.scopes)}


class KeyKind:
    """`{"kind": "approver", "label", "group", "key"}` and `{"kind": "admin", "label",
    "key"}`: enrol a P-256 or Ed25519 public key (PEM or base64 DER) for a person, as
    `chainkeys approver add-key` and `admin add-key` do; an admin's key signs changes."""

    def __init__(self, admins: bool) -> None:
        self.admins = admins
        self.name = "admin" if admins else "approver"

    async def plan(self, tx: Tx, who: Principal, body: Mapping[str, Any]) -> Plan:
        required = {"label", "key"} if self.admins else {"label", "group", "key"}
        fields_of(body, self.name, required, set())
        label = _label(body["label"])
        group = ADMINS
        if not self.admins:
            group = body["group"]
            if not isinstance(group, str) or not GROUP.fullmatch(group):
                raise BadRequest("group: 1 to 64 of A-Z a-z 0-9 . _ -", code="invalid_group")
        key = body["key"]
        if not isinstance(key, str) or len(key) > MAX_KEY:
            raise BadRequest(
                "key is a P-256 or Ed25519 public key, PEM or base64 DER", code="invalid_key"
            )
        kind, der = script_key(key)
        fingerprint = hashlib.sha256(der).hexdigest()[:16]
        document = {"label": label, "group": group, "key_kind": kind, "public_key": b64url(der)}
        where = "as an admin: it signs governance changes" if self.admins else f"in group {group}"
        words = [f"an {kind} key (sha256 {fingerprint}…) enrolled for {label!r} {where}"]
        return Plan(canonical(document), 0, words, True)

    async def apply(self, tx: Tx, row: ChangeRow) -> dict[str, object]:
        doc = msgspec.json.decode(row.document or "{}")
        owner = Principal(row.tenant_id, "", "", label=row.created_by)
        der = unb64url(str(doc["public_key"]))
        made = await enrol_key(
            tx, _gate(tx), owner, str(doc["label"]), str(doc["group"]), str(doc["key_kind"]), der
        )
        return {"credential": made.id, "label": made.label, "group": made.approver_group}
