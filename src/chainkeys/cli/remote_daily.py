"""What `policy`, `freeze` and `audit` do under `--url`: the same commands, over the
server's HTTP API instead of the store (cli/remote.py says why). Each prints what its
local form prints where the API gives the same facts."""

from __future__ import annotations

from typing import Any

import msgspec
import typer

from chainkeys.cli.common import fail
from chainkeys.cli.remote import Remote, check_tenant

UNGOVERNED = (
    "the API sets no policy on a tenant without governance: the operator sets it with "
    "the master key (`chainkeys policy set` without --url, where the store is)"
)


def policy_show(remote: Remote, tenant: str, as_json: bool) -> None:
    check_tenant(remote, tenant)
    shown = remote.call("GET", "/policy")
    if as_json:
        record = {"tenant": tenant, **{k: shown.get(k) for k in ("version", "set", "policy")}}
        typer.echo(msgspec.json.encode(record).decode())
        return
    if shown.get("policy") is None:
        version = shown.get("version")
        cleared = f" (cleared in version {version})" if version else ""
        typer.echo(f"tenant {tenant} has no policy{cleared}: it signs what its scopes allow")
        return
    typer.echo(f"# version {shown['version']}, set {shown['set']}", err=True)
    typer.echo(msgspec.json.format(msgspec.json.encode(shown["policy"]).decode(), indent=2))


def policy_history(remote: Remote, tenant: str, version: int | None) -> None:
    check_tenant(remote, tenant)
    versions = remote.call("GET", "/policy/history")["versions"]
    if version is not None:
        found = [v for v in versions if v["version"] == version]
        if not found:
            fail(f"tenant {tenant} has no policy version {version}")
        document = found[0]["policy"]
        shown = msgspec.json.encode(document).decode() if document is not None else None
        typer.echo(msgspec.json.format(shown, indent=2) if shown else "(cleared)")
        return
    typer.echo(f"{'VERSION':8}  {'SET':20}  RULES")
    for v in versions:
        rules = len(v["policy"]["rules"]) if v["policy"] is not None else "cleared"
        typer.echo(f"{v['version']:<8}  {v['set']:20}  {rules}")


def policy_file(remote: Remote, tenant: str, canonical: str | None, break_glass: bool) -> None:
    """Set (`canonical` None: clear) through the server: on a governed tenant it files a
    change for its admins. The API sets no policy otherwise: the operator does, with
    the master key, so an ungoverned tenant is refused with what to do instead."""
    if break_glass:
        fail(
            "--break-glass applies at once with the master key (and, on a shamir store, "
            "the shares): run it without --url where the store is"
        )
    check_tenant(remote, tenant)
    document = msgspec.json.decode(canonical) if canonical is not None else None
    body = {"kind": "policy", "document": document}
    done = remote.call("POST", "/changes", body, hints={"not_governed": UNGOVERNED})
    words = "; ".join(done["diff"])
    typer.echo(
        f"tenant {tenant} is governed: change {done['id']} filed for its admins "
        f"({'loosens' if done['loosens'] else 'only tightens'}: {words})"
    )
    typer.echo(done["id"])


# what a token change may grant (governance/grants.py TOKEN_SCOPES; admin alone)
CHANGE_SCOPES = frozenset({"sign", "export", "approve", "admin"})
ISSUED_BY_THE_OPERATOR = (
    "the API issues tokens only as changes of a governed tenant: on this one the "
    "operator issues them with the master key (`chainkeys token create` without --url)"
)


def token_create(remote: Remote, tenant: str, body: dict[str, Any], break_glass: bool) -> None:
    """`token create` through the server: filed as a token change for the tenant's
    admins; the token the server drew is printed once, last, and opens nothing until
    the change applies (the server keeps only its keyed digest)."""
    if break_glass:
        fail(
            "--break-glass applies at once with the master key (and, on a shamir store, "
            "the shares): run it without --url where the store is"
        )
    if not set(body["scopes"]) <= CHANGE_SCOPES:
        fail(
            "through the server a token is a change for the tenant's admins, and such a "
            "token may only sign, export, approve or administer (--scope sign, say): read, "
            "create or delete tokens are given at once, by the operator, without --url"
        )
    check_tenant(remote, tenant)
    done = remote.call("POST", "/changes", body, hints={"not_governed": ISSUED_BY_THE_OPERATOR})
    typer.echo(
        f"tenant {tenant} is governed: change {done['id']} filed for its admins "
        f"({'loosens' if done['loosens'] else 'only tightens'}: {'; '.join(done['diff'])})"
    )
    typer.echo(f"digest {done['digest']}")
    typer.echo(done["id"])
    typer.echo("the token (shown once, keep it; it works once the change applies):")
    typer.echo(done["token"])


def policy_test(remote: Remote, tenant: str, candidate: str, asked: dict[str, Any]) -> str:
    """`policy test` through the server: its POST /policy/test tries the candidate on
    the request as the token the command runs with (its scopes, families and label are
    what token conditions see; a "token" in the request file is not used, and stderr
    says so). Prints the decision as JSON; returns it (allow, deny or approval)."""
    seen = check_tenant(remote, tenant)
    if asked.get("token") is not None:
        typer.echo(
            'chainkeys: with --url the server tries the request as your token: the "token" '
            "in the request file is not used",
            err=True,
        )
    body = {k: asked[k] for k in ("family", "account", "kind", "request")}
    decided = remote.call(
        "POST", "/policy/test", {**body, "policy": msgspec.json.decode(candidate)}
    )
    token = {k: seen.get(k) for k in ("id", "label", "scopes", "families")}
    shown = {**decided, "token": token}
    typer.echo(msgspec.json.format(msgspec.json.encode(shown).decode(), indent=2))
    return str(decided["decision"])


def freeze_list(remote: Remote, tenant: str, as_json: bool) -> None:
    check_tenant(remote, tenant)
    rows = remote.call("GET", "/freezes")["freezes"]
    for r in rows:
        if as_json:
            typer.echo(msgspec.json.encode(r).decode())
        else:
            until = r.get("until") or "until lifted"
            scope = r.get("account") or "(the tenant)"
            typer.echo(f"{r['id']:28}  {scope:60}  {until:20}  {r['created_by']}: {r['reason']}")
    if not rows and not as_json:
        typer.echo(f"no freeze holds in {tenant}")


def freeze_create(
    remote: Remote, tenant: str, account: str | None, until: str | None, reason: str
) -> None:
    check_tenant(remote, tenant)
    body: dict[str, Any] = {"reason": reason}
    if account is not None:
        body["account"] = account
    if until is not None:
        body["until"] = until
    row = remote.call("POST", "/freezes", body)
    scope = row.get("account") or f"the tenant {tenant}"
    typer.echo(f"froze {scope} until {row.get('until') or 'lifted'}: {row['id']}")


def audit_list(
    remote: Remote, tenant: str | None, filters: dict[str, str | int], limit: int | None
) -> None:
    """The token's tenant's events, newest first as GET /audit gives them."""
    if tenant is not None:
        check_tenant(remote, tenant)
    shown, cursor = 0, None
    while limit is None or shown < limit:
        params = {**filters, **({"cursor": cursor} if cursor else {})}
        page = remote.call("GET", "/audit", params=params)
        for event in page["events"][: None if limit is None else limit - shown]:
            typer.echo(msgspec.json.encode(event).decode())
            shown += 1
        cursor = page.get("next_cursor")
        if not cursor:
            break
