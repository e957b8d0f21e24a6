"""`chainkeys approval verify FILE`: check offline that an approval (as
`GET /approvals/{id}` gives it) says what its raw request does (approvals/verify.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from chainkeys.cli.common import fail, group

approval_app = group("Approvals: verify one offline.")


@approval_app.command("verify")
def verify(
    file: Annotated[Path, typer.Argument(help="the approval's JSON (- for standard input)")],
) -> None:
    """Decode the approval's raw request here and name every difference from the digest
    and summary it shows; exit 1 when there is any."""
    from chainkeys.approvals.verify import approval_of, differences

    try:
        text = typer.get_text_stream("stdin").read() if str(file) == "-" else file.read_text()
        approval = approval_of(json.loads(text))
    except (OSError, ValueError) as exc:
        fail(f"{file}: {exc}")
    found = differences(approval)
    name = approval.get("id", str(file))
    if found:
        for line in found:
            typer.echo(f"{name}: {line}")
        fail(f"{name}: {len(found)} difference(s): the approval does not say what is signed")
    typer.echo(f"{name}: ok: the digest and summary are its request's ({approval['kind']})")
