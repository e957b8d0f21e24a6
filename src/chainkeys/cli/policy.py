"""`chainkeys policy`: a tenant's signing policy (set, show, clear, history).

Setting one needs the master key (its versions are authenticated under it). Every
change is a new version, kept and audited; servers pick it up within
`CHAINKEYS_POLICY_REFRESH_SECONDS`. On a governed tenant (docs/governance.md) `set`
and `clear` file a change for its admins to sign, unless `--break-glass`.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import msgspec
import typer

from chainkeys.bootstrap import Admin
from chainkeys.cli import remote_daily
from chainkeys.cli.common import DataDir, fail, group, run_admin, settings_for, when
from chainkeys.cli.remote import current
from chainkeys.vault.gate import opened

if TYPE_CHECKING:
    from chainkeys.api.policy_schemas import PolicyDecision
    from chainkeys.policies.document import Policy, PolicyError

policy_app = group("Signing policies per tenant.")

Tenant = Annotated[str, typer.Argument(help="tenant name")]
BreakGlass = Annotated[
    bool,
    typer.Option(
        "--break-glass",
        help="on a governed tenant, apply at once instead of filing a change (audited as "
        "break_glass, announced)",
    ),
]


def _pretty(document: str) -> str:
    return msgspec.json.format(document, indent=2)


def _refused(exc: PolicyError) -> NoReturn:
    """Every problem of a refused file, one a line, so the operator fixes it in one go."""
    if len(exc.problems) == 1:
        fail(exc.problems[0])
    listed = "\n".join(f"  {problem}" for problem in exc.problems)
    fail(f"the policy has {len(exc.problems)} problems:\n{listed}")


def _read_policy(file: Path, text: bytes, fmt: str) -> Policy:
    """The policy in `file`, or every problem it has and exit 1 (before any store is
    opened: nothing is changed)."""
    from chainkeys.policies.document import PolicyError, parse

    if fmt == "json" and text.lstrip()[:1] == b"#":
        fail(
            f"{file}: a line starting with # is not JSON (older `chainkeys policy show` "
            "printed its `# version` line there, now on stderr): remove it"
        )
    try:
        return parse(text, fmt)
    except PolicyError as exc:
        _refused(exc)


@policy_app.command("set")
def policy_set(
    tenant: Tenant,
    file: Annotated[Path, typer.Argument(help="policy file: .json or .toml ('-': JSON on stdin)")],
    break_glass: BreakGlass = False,
    data_dir: DataDir = None,
) -> None:
    """Validate FILE and make it the tenant's policy (a new version); on a governed
    tenant, file it as a change for its admins and print the change's id."""
    if str(file) == "-":
        text, fmt = sys.stdin.buffer.read(), "json"
    else:
        try:
            text = file.read_bytes()
        except OSError as exc:
            fail(f"cannot read {file}: {exc.strerror}")
        fmt = _format_of(file, text)
    _through_governance(tenant, _read_policy(file, text, fmt).canonical, break_glass, data_dir)


def _through_governance(
    tenant: str, document: str | None, break_glass: bool, data_dir: Path | None
) -> None:
    """Set (`document` None: clear) the policy, or file it as a change on a governed
    tenant; decided in one transaction (governance/service.py `set_policy`). Under
    --url the server files it (cli/remote_daily.py)."""
    remote = current()
    if remote is not None:
        remote_daily.policy_file(remote, tenant, document, break_glass)
        return
    settings = settings_for(data_dir)
    webhook = settings.webhook_url is not None

    async def work(a: Admin) -> tuple[str, Any]:
        return await a.governance(webhook).set_policy(tenant, document, break_glass)

    # keyed: its version is authenticated under the master key
    how, done = run_admin(settings, work, keyed=True)
    if how == "filed":
        words = "; ".join(msgspec.json.decode(done.diff))
        typer.echo(
            f"tenant {tenant} is governed: change {done.id} filed for its admins "
            f"({'loosens' if done.loosens else 'only tightens'}: {words})"
        )
        typer.echo(done.id)
        return
    what = "cleared" if document is None else "set"
    glass = " (break glass: applied at once, audited)" if how == "break_glass" else ""
    typer.echo(f"policy version {done.version} {what} for tenant {tenant}{glass}")


def _format_of(file: Path, text: bytes) -> str:
    """By extension; any other name: JSON when it starts like JSON, else TOML."""
    suffix = file.suffix.lower()
    if suffix in (".json", ".toml"):
        return suffix[1:]
    return "json" if text.lstrip()[:1] in (b"{", b"[") else "toml"


@policy_app.command("show")
def policy_show(
    tenant: Tenant,
    as_json: Annotated[
        bool, typer.Option("--json", help="one JSON object: version, set, policy (or null)")
    ] = False,
    data_dir: DataDir = None,
) -> None:
    """Print the policy in force as JSON, which `policy set` takes back as it is (its
    version and time go to stderr), or say there is none."""
    remote = current()
    if remote is not None:
        remote_daily.policy_show(remote, tenant, as_json)
        return
    shown = run_admin(settings_for(data_dir), lambda a: a.policies.show(tenant))
    version = shown.version
    if as_json:
        record = {
            "tenant": tenant,
            "version": version.version if version else None,
            "set": when(version.created_ms) if version else None,
            "policy": msgspec.json.decode(version.document)
            if version and version.document
            else None,
        }
        typer.echo(msgspec.json.encode(record).decode())
        return
    if version is None or version.document is None:
        cleared = f" (cleared in version {version.version})" if version else ""
        typer.echo(f"tenant {tenant} has no policy{cleared}: it signs what its scopes allow")
        return
    # stderr: stdout is the document alone, so `show > p.json` then `set T p.json` works
    typer.echo(f"# version {version.version}, set {when(version.created_ms)}", err=True)
    typer.echo(_pretty(version.document))


@policy_app.command("clear")
def policy_clear(tenant: Tenant, break_glass: BreakGlass = False, data_dir: DataDir = None) -> None:
    """Remove the tenant's policy (a new, empty version; history is kept); on a governed
    tenant, file the clearing as a change for its admins."""
    _through_governance(tenant, None, break_glass, data_dir)


@policy_app.command("history")
def policy_history(
    tenant: Tenant,
    version: Annotated[int | None, typer.Option(help="print this version's document")] = None,
    data_dir: DataDir = None,
) -> None:
    """List every version (or print one with --version)."""
    remote = current()
    if remote is not None:
        remote_daily.policy_history(remote, tenant, version)
        return
    versions = run_admin(settings_for(data_dir), lambda a: a.policies.history(tenant))
    if version is not None:
        found = [v for v in versions if v.version == version]
        if not found:
            fail(f"tenant {tenant} has no policy version {version}")
        typer.echo(_pretty(found[0].document) if found[0].document else "(cleared)")
        return
    typer.echo(f"{'VERSION':8}  {'SET':20}  RULES")
    for v in versions:
        rules = len(msgspec.json.decode(v.document)["rules"]) if v.document else None
        typer.echo(
            f"{v.version:<8}  {when(v.created_ms):20}  {'cleared' if rules is None else rules}"
        )


# `policy test`'s exit status, so CI can gate on a policy change (1 and 2 stay the
# errors every command has: a bad file or request, a setting or store that cannot be used).
TEST_EXIT = {"allow": 0, "deny": 3, "approval": 4}


@policy_app.command(
    "test",
    epilog="Exit status: 0 allow, 3 deny, 4 approval needed; 1 a bad "
    "file or request, 2 a setting or store that cannot be used.",
)
def policy_test(
    tenant: Tenant,
    file: Annotated[Path, typer.Argument(help="a candidate policy file (.json or .toml)")],
    request: Annotated[
        Path,
        typer.Argument(
            help='{"family", "account", "kind", "request"} as POST /policy/test '
            'takes it, and optionally "token": {"id", "label", "scopes", "families"}'
        ),
    ],
    data_dir: DataDir = None,
) -> None:
    """Try a candidate policy on a sign request before setting it.

    Prints the decision (allow, deny or approval), the rule that decided, each rule's
    when value and the token the conditions saw, as JSON; without a "token" in
    REQUEST (or with some of its fields missing) it says on stderr which token it
    assumed. Nothing is signed, no key is opened, no cap counted.
    """
    from chainkeys.tokens.service import SCOPES, Principal

    try:
        text, asked = file.read_bytes(), msgspec.json.decode(request.read_bytes())
    except OSError as exc:
        fail(f"cannot read a file: {exc.strerror}")
    except msgspec.DecodeError:
        fail(f"{request} is not JSON")
    candidate = _read_policy(file, text, _format_of(file, text))
    if not isinstance(asked, dict) or not {"family", "account", "kind", "request"} <= set(asked):
        fail(f'{request}: give "family", "account", "kind" and "request"')
    remote = current()
    if remote is not None:  # the server tries it, as the token the command runs with
        decision = remote_daily.policy_test(remote, tenant, candidate.canonical, asked)
        raise typer.Exit(TEST_EXIT[decision])
    token = asked.get("token")
    token = {} if token is None else token
    if not isinstance(token, dict):
        fail(f'{request}: "token" is an object: {{"id", "label", "scopes", "families"}}')
    scopes = token["scopes"] if token.get("scopes") is not None else list(SCOPES)
    families = token.get("families") or []
    if not _strings(scopes) or not _strings(families):
        fail(f'{request}: "token"\'s "scopes" and "families" are lists of strings')
    token_id, label = str(token.get("id") or ""), str(token.get("label") or "")
    seen = {"id": token_id, "label": label, "scopes": sorted(scopes), "families": sorted(families)}
    assumed = [k for k in seen if token.get(k) is None]
    if assumed:
        given = f'no {", ".join(assumed)} in "token"' if token else 'no "token"'
        typer.echo(
            f"chainkeys: {request} gives {given}: assumed the token "
            f"{msgspec.json.encode(seen).decode()} (token conditions see these values; "
            "families [] is every family)",
            err=True,
        )

    async def work(admin: Admin) -> PolicyDecision:
        from chainkeys.api.policy_schemas import decision_of
        from chainkeys.signing.dryrun import dry_run

        tenant_id = await admin.tokens.tenant_id(tenant)
        who = Principal(
            tenant_id,
            tenant,
            token_id,
            frozenset(scopes),
            frozenset(families) if families else None,
            None,
            label,
        )
        run = await dry_run(
            admin.db,
            opened(admin.integrity),
            admin.policies,
            who,
            str(asked["family"]),
            str(asked["account"]),
            str(asked["kind"]),
            asked["request"],
            candidate,
            cosigner=settings.cosigner_url is not None,
        )
        return decision_of(run)

    settings = settings_for(data_dir)
    decided = run_admin(settings, work, keyed=True)  # reads an account
    shown = {**msgspec.to_builtins(decided), "token": seen}
    typer.echo(msgspec.json.format(msgspec.json.encode(shown).decode(), indent=2))
    raise typer.Exit(TEST_EXIT.get(decided.decision, 1))


def _strings(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)
