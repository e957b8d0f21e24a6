"""`chainkeys changes`: a governed tenant's changes on a running server (`--url`): list,
show, and an admin's signed vote or cancel (docs/governance.md).

A vote is the admin's key's signature of SHA-256("chainkeys change v1" || id || digest
|| decision) (approvals/proofs.py `change_challenge`), made here with the private key
file, over the digest of the change as the server shows it now: the diff is printed
first, so what is signed is what was read.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import msgspec
import typer

from chainkeys.cli.common import fail, group
from chainkeys.cli.remote import Remote, current

if TYPE_CHECKING:  # the key's libraries load with the vote, not with every command
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519

changes_app = group("A governed tenant's changes on a running server (--url): list, vote, cancel.")
ChangeId = Annotated[str, typer.Argument(help="the change's id (chg_…)")]
KeyFile = Annotated[
    Path,
    typer.Option(
        "--key", help="your admin private key, PEM (P-256 or Ed25519; kept on this machine)"
    ),
]
Credential = Annotated[
    str,
    typer.Option(help="your key's credential id (apc_…, as `chainkeys admin add-key` printed)"),
]
Json = Annotated[bool, typer.Option("--json", help="the change(s) as JSON, one a line")]


def _remote() -> Remote:
    remote = current()
    if remote is None:
        fail(
            "changes are voted on through a running server: give --url URL (CHAINKEYS_URL) "
            "and an admin token file (--token-file, CHAINKEYS_TOKEN_FILE)"
        )
    return remote


def _line(change: dict[str, Any]) -> str:
    when = change.get("effective_at") or "-"
    return (
        f"{change['id']:28}  {change['kind']:12}  {change['state']:10}  "
        f"{change['approvals']}/{change['quorum']}  {when:20}  {'; '.join(change['diff'])}"
    )


def describe(change: dict[str, Any]) -> str:
    """A change as a person reads it before signing: what it does, and how it applies."""
    how = "loosens: waits the delay once signed" if change["loosens"] else "only tightens"
    lines = [
        f"change {change['id']} ({change['kind']}), {change['state']}, "
        f"{change['approvals']} of {change['quorum']} approvals, filed by "
        f"{change['created_by']}; {how}",
        *(f"  {line}" for line in change["diff"]),
        f"digest {change['digest']}",
    ]
    if change.get("effective_at"):
        lines.append(f"effective at {change['effective_at']}")
    return "\n".join(lines)


@changes_app.command("list")
def list_changes(
    state: Annotated[
        str | None,
        typer.Option(help="only pending, scheduled, applied, rejected or cancelled ones"),
    ] = None,
    as_json: Json = False,
) -> None:
    """The token's tenant's changes, newest first."""
    params: dict[str, str | int] = {"state": state} if state is not None else {}
    changes = _remote().call("GET", "/changes", params=params)["changes"]
    for change in changes:
        typer.echo(msgspec.json.encode(change).decode() if as_json else _line(change))
    if not changes and not as_json:
        typer.echo("no changes")


@changes_app.command("show")
def show(change_id: ChangeId, as_json: Json = False) -> None:
    """One change: its diff in words, its votes and its digest."""
    change = _remote().call("GET", f"/changes/{change_id}")
    if as_json:
        typer.echo(msgspec.json.encode(change).decode())
        return
    typer.echo(describe(change))
    for vote in change["votes"]:
        typer.echo(f"  {vote['decision']} by {vote['label']} at {vote['at']}")


def _private_key(path: Path) -> ed25519.Ed25519PrivateKey | ec.EllipticCurvePrivateKey:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519

    try:
        key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    except OSError as exc:
        fail(f"cannot read the key file {path}: {exc.strerror}")
    except (ValueError, TypeError):  # never the key's bytes in the message
        fail(f"{path} is not an unencrypted PEM private key (P-256 or Ed25519)")
    if isinstance(key, ed25519.Ed25519PrivateKey):
        return key
    if isinstance(key, ec.EllipticCurvePrivateKey) and isinstance(key.curve, ec.SECP256R1):
        return key
    fail(f"{path}: an admin key is P-256 or Ed25519")


def sign_vote(
    key: ed25519.Ed25519PrivateKey | ec.EllipticCurvePrivateKey,
    change: dict[str, Any],
    decision: str,
) -> str:
    """The vote's signature, base64url, as the server verifies it (proofs.verify_key)."""
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519

    from chainkeys.approvals.proofs import b64url, change_challenge

    message = change_challenge(change["id"], change["digest"], decision)
    if isinstance(key, ed25519.Ed25519PrivateKey):
        return b64url(key.sign(message))
    return b64url(key.sign(message, ec.ECDSA(hashes.SHA256())))


def _vote(change_id: str, decision: str, key_file: Path, credential: str) -> None:
    remote = _remote()
    key = _private_key(key_file)  # before anything is asked of the server
    change = remote.call("GET", f"/changes/{change_id}")
    typer.echo(describe(change))
    body = {
        "digest": change["digest"],
        "signature": {"credential": credential, "value": sign_vote(key, change, decision)},
    }
    done = remote.call("POST", f"/changes/{change['id']}/{decision}", body)
    after = f", effective at {done['effective_at']}" if done["state"] == "scheduled" else ""
    typer.echo(
        f"{decision}d: change {done['id']} is {done['state']} "
        f"({done['approvals']} of {done['quorum']} approvals{after})"
    )


@changes_app.command("approve")
def approve(change_id: ChangeId, key: KeyFile, credential: Credential) -> None:
    """Sign your approval of the change as the server shows it now (its diff is printed
    first). At the quorum a change that only tightens applies; one that loosens is
    scheduled for the tenant's delay."""
    _vote(change_id, "approve", key, credential)


@changes_app.command("reject")
def reject(change_id: ChangeId, key: KeyFile, credential: Credential) -> None:
    """Sign your rejection: one rejection ends the change."""
    _vote(change_id, "reject", key, credential)


@changes_app.command("cancel")
def cancel(change_id: ChangeId) -> None:
    """Cancel a pending or scheduled change (any one admin)."""
    done = _remote().call("POST", f"/changes/{change_id}/cancel")
    typer.echo(f"change {done['id']} cancelled")
