"""The operator's grants on a governed tenant: filed as a change, or break glass.

`token create` (a token that may sign, export or approve), `approver add-key` and
`admin add-key` each give someone more power over a tenant's money. On a governed
tenant (docs/governance.md) the operator alone must not do that, or the quorum guards
nothing: the command files a governed change of kind token, approver or admin (as an
admin's `POST /changes` would, governance/grants.py) and applies nothing until the
admins' quorum and delay; `--break-glass` applies it at once, audited as `break_glass`
and announced, as `policy set` does. Whether the tenant is governed is read in the
same write transaction that files or applies, under the tenant's `changes/` scope, so
a `governance set` racing the command is never missed. Revocation stays immediate:
it only takes power away.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import msgspec
import typer

from chainkeys.cli.common import run_admin, settings_for, when

if TYPE_CHECKING:
    from chainkeys.approvals.credentials import CredentialRow
    from chainkeys.bootstrap import Admin
    from chainkeys.governance.views import ChangeView
    from chainkeys.store.sql import Tx
    from chainkeys.tokens.repository import TokenRow
    from chainkeys.tokens.service import Grant, Principal

T = TypeVar("T")
Apply = Callable[["Tx", "Principal"], Awaitable[T]]


async def file_or_apply(
    admin: Admin,
    webhook: bool,
    tenant: str,
    body: Mapping[str, Any],
    apply: Apply[T],
    break_glass: bool,
) -> tuple[str, T | ChangeView]:
    """("applied", what `apply` made) on a tenant that is not governed; ("filed", the
    change) on one that is; ("break_glass", what `apply` made) when the operator applies
    it at once anyway. One write transaction decides and acts; a refused filing (a body
    the kind refuses) is audited with its code, nothing written."""
    from chainkeys.audit.repository import Audit
    from chainkeys.audit.service import audit_event
    from chainkeys.errors import ChainkeysError
    from chainkeys.governance.repository import Governance
    from chainkeys.governance.views import ChangeView, tenant_id_of
    from chainkeys.tokens.service import Principal

    service = admin.governance(webhook)
    kind = str(body["kind"])
    filing: Principal | None = None  # set while filing: a refusal then is the filing's
    try:
        async with admin.db.write() as tx:
            tenant_id = await tenant_id_of(tx, tenant, admin.integrity)
            await tx.serialize("changes/" + tenant_id)
            governed = await Governance.get(tx, tenant_id)
            operator = Principal(tenant_id, tenant, "", label="operator")
            if governed is not None and not break_glass:
                filing = operator
                plan = await service.kinds[kind].plan(tx, operator, body)
                row = await service.file_planned(tx, operator, governed, kind, plan)
                return "filed", ChangeView(row, [], plan.secret)
            done = await apply(tx, Principal(tenant_id, tenant, ""))
            if governed is None:
                return "applied", done
            details = {"what": kind}
            await Audit.insert(tx, audit_event(operator, "break_glass", "ok", details=details))
            await service.announce(tx, "governance.break_glass", {"tenant": tenant, **details})
    except ChainkeysError as exc:
        if filing is not None:
            await service.refused(filing, kind, exc)
        raise
    return "break_glass", done


def enrol_key(
    data_dir: Path | None, tenant: str, label: str, group: str, key: str, break_glass: bool
) -> tuple[str, Any]:
    """`approver add-key` and `admin add-key` (`group` ADMINS): the key enrolled, or
    filed as a change of kind approver or admin on a governed tenant. Either way the
    body is read as the change kind reads it (governance/grants.py), so a key the admins
    would be asked to sign is one the operator could enrol, and the other way round."""
    from chainkeys.approvals.enrolment import enrol_key as enrol
    from chainkeys.approvals.proofs import ADMINS, unb64url

    admins = group == ADMINS
    body = {"kind": "admin" if admins else "approver", "label": label, "key": key}
    if not admins:
        body["group"] = group
    settings = settings_for(data_dir)
    webhook = settings.webhook_url is not None

    async def work(admin: Admin) -> tuple[str, Any]:
        service = admin.governance(webhook)

        async def apply(tx: Tx, owner: Principal) -> CredentialRow:
            plan = await service.kinds[body["kind"]].plan(tx, owner, body)
            doc = msgspec.json.decode(plan.document or "{}")
            der = unb64url(str(doc["public_key"]))
            gate = admin.integrity
            if gate is None:  # never: run keyed
                raise RuntimeError("add-key runs with the master key")
            return await enrol(tx, gate, owner, doc["label"], doc["group"], doc["key_kind"], der)

        return await file_or_apply(admin, webhook, tenant, body, apply, break_glass)

    return run_admin(settings, work, keyed=True)


def echo_filed(tenant: str, view: ChangeView) -> None:
    """What the operator hands the admins: the change's id (alone on its line, last
    unless a token follows), its digest (what their votes sign) and its diff."""
    row = view.row
    words = "; ".join(msgspec.json.decode(row.diff))
    typer.echo(
        f"tenant {tenant} is governed: change {row.id} filed for its admins "
        f"({'loosens' if row.loosens else 'only tightens'}: {words})"
    )
    typer.echo(f"digest {row.digest}")
    typer.echo(row.id)


# What needs governing in a token. `read`, `create` and `delete` move no money and
# widen nothing that signs: such a token is issued at once. `admin` is governed too: an
# admin files and cancels the tenant's changes (one admin alone cancels any), so adding
# one adds to the body the quorum is counted in; it is filed as a change, alone.
GOVERNED_SCOPES = frozenset({"sign", "export", "approve", "admin"})
_MIXED = (
    "on a governed tenant a token that may sign, export, approve or administer is filed "
    "as a change for its admins, and such a token has only those scopes (an admin token "
    "the admin scope alone): issue read, create or delete in a token of its own (given "
    "at once), or apply it at once with --break-glass (audited)"
)


def token_change(grant: Grant, expires: str | None) -> dict[str, Any]:
    """The token change's body (`POST /changes`), as the CLI files it here or through
    the server (`--url`)."""
    body: dict[str, Any] = {"kind": "token", "label": grant.label, "scopes": sorted(grant.scopes)}
    if grant.families is not None:
        body["families"] = sorted(grant.families)
    if expires is not None:
        body["expires"] = expires
    if grant.group is not None:
        body["approver_group"] = grant.group
    return body


def create_token(
    data_dir: Path | None,
    tenant: str,
    grant: Grant,
    expires: str | None,
    break_glass: bool,
) -> tuple[str, Any, str]:
    """`token create` of a token with a governed scope: (how, the token's row or the
    change, the token). Filed as a token change on a governed tenant (the token, drawn
    here, opens nothing until the change applies), else issued at once. A tenant that
    does not exist yet is not governed: it is created with its token, as before."""
    import secrets

    from chainkeys.errors import BadRequest, NotFound
    from chainkeys.governance.views import ChangeView
    from chainkeys.tokens.service import TOKEN_PREFIX, check_scopes, insert_token

    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    body = token_change(grant, expires)
    settings = settings_for(data_dir)
    webhook = settings.webhook_url is not None

    async def work(admin: Admin) -> tuple[str, Any, str]:
        check_scopes(grant.label, grant.scopes, grant.group)
        gate = admin.integrity
        if gate is None:  # never: run keyed
            raise RuntimeError("token create runs with the master key")

        async def apply(tx: Tx, owner: Principal) -> TokenRow:
            return await insert_token(tx, gate, owner, grant, gate.token_digest(token))

        try:
            how, done = await file_or_apply(admin, webhook, tenant, body, apply, break_glass)
        except NotFound as exc:
            if exc.code != "tenant_not_found":
                raise
            row, fresh = await admin.tokens.create(
                tenant, grant.label, grant.scopes, grant.expires_in_ms, grant.families, grant.group
            )
            return "applied", row, fresh
        except BadRequest as exc:
            if exc.code == "invalid_scope":  # audited by the filing as refused
                raise BadRequest(_MIXED, code="invalid_scope") from None
            raise
        if isinstance(done, ChangeView) and done.secret is not None:
            return how, done, done.secret  # the kind drew it (governance/grants.py)
        return how, done, token

    return run_admin(settings, work, keyed=True)


def echo_token(tenant: str, how: str, done: Any, token: str) -> None:
    """`token create`'s answer: the change filed, or the token's row; the token itself
    alone on the last line, once."""
    if how == "filed":
        echo_filed(tenant, done)
        typer.echo("the token (shown once, keep it; it works once the change applies):")
    else:
        typer.echo(
            f"token id {done.id} for tenant {done.tenant}, scopes {done.scopes}"
            + (f", families {done.families}" if done.families else "")
            + (f", approver group {done.group}" if done.group else "")
            + (f", expires {when(done.expires_ms)}" if done.expires_ms else "")
            + (BREAK_GLASS_NOTE if how == "break_glass" else "")
            + " (shown once, keep it):"
        )
    typer.echo(token)


BREAK_GLASS_HELP = (
    "on a governed tenant, apply at once instead of filing a change (audited as "
    "break_glass, announced)"
)
BreakGlass = Annotated[bool, typer.Option("--break-glass", help=BREAK_GLASS_HELP)]
BREAK_GLASS_NOTE = " (break glass: applied at once, audited)"
