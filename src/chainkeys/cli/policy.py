"""`chainkeys policy`: a tenant's signing policy (set, show, clear, history).

No master key needed: policies hold no secret. Every change is a new version,
kept and audited; servers pick it up within `CHAINKEYS_POLICY_REFRESH_SECONDS`.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import msgspec
import typer

from chainkeys.cli.common import DataDir, fail, group, run_admin, settings_for, when

policy_app = group("Signing policies per tenant.")

Tenant = Annotated[str, typer.Argument(help="tenant name")]


def _pretty(document: str) -> str:
    return msgspec.json.format(document, indent=2)


@policy_app.command("set")
def policy_set(
    tenant: Tenant,
    file: Annotated[Path, typer.Argument(help="policy file: .json or .toml ('-': JSON on stdin)")],
    data_dir: DataDir = None,
) -> None:
    """Validate FILE and make it the tenant's policy (a new version)."""
    if str(file) == "-":
        text, fmt = sys.stdin.buffer.read(), "json"
    else:
        try:
            text = file.read_bytes()
        except OSError as exc:
            fail(f"cannot read {file}: {exc.strerror}")
        fmt = _format_of(file, text)
    version = run_admin(settings_for(data_dir), lambda a: a.policies.set(tenant, text, fmt))
    typer.echo(f"policy version {version.version} set for tenant {tenant}")


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
    """Print the policy in force (JSON), or say there is none."""
    shown = run_admin(settings_for(data_dir), lambda a: a.policies.show(tenant))
    version = shown.version
    if as_json:
        record = {
            "tenant": tenant,
            "version": version.version if version else None,
            "set": when(version.created_ms) if version else None,
            "policy": msgspec.json.decode(version.document)
            if version and version.document else None,
        }  # fmt: skip
        typer.echo(msgspec.json.encode(record).decode())
        return
    if version is None or version.document is None:
        cleared = f" (cleared in version {version.version})" if version else ""
        typer.echo(f"tenant {tenant} has no policy{cleared}: it signs what its scopes allow")
        return
    typer.echo(f"# version {version.version}, set {when(version.created_ms)}")
    typer.echo(_pretty(version.document))


@policy_app.command("clear")
def policy_clear(tenant: Tenant, data_dir: DataDir = None) -> None:
    """Remove the tenant's policy (a new, empty version; history is kept)."""
    version = run_admin(settings_for(data_dir), lambda a: a.policies.clear(tenant))
    typer.echo(f"policy cleared for tenant {tenant} (version {version.version})")


@policy_app.command("history")
def policy_history(
    tenant: Tenant,
    version: Annotated[int | None, typer.Option(help="print this version's document")] = None,
    data_dir: DataDir = None,
) -> None:
    """List every version (or print one with --version)."""
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
        typer.echo(f"{v.version:<8}  {when(v.created_ms):20}  "
                   f"{'cleared' if rules is None else rules}")  # fmt: skip
