"""`chainkeys operator`: the Shamir shares that hold the master key (unseal, rekey),
and how any command asks an operator for them.

Shares are read without echo (getpass on a terminal; a line from a pipe), never
taken as an argument (the process list and the shell history would keep them),
never printed back.
"""

from __future__ import annotations

import getpass
import json
import ssl
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Annotated, Any

import typer

from chainkeys.cli.common import DataDir, fail, finish, group, settings_for
from chainkeys.vault.shamir import AskedShares
from chainkeys.vault.shares import InvalidShare, Share, ShareSet, check_set, parse_share

operator_app = group("Shamir shares: unseal a server, make new shares (rekey).")


def read_share(prompt: str) -> str:
    """One share from the operator, not echoed: getpass on a terminal, else one line
    of standard input (a pipe), the prompt on standard error."""
    if sys.stdin.isatty():
        text = getpass.getpass(prompt, stream=sys.stderr)
    else:
        sys.stderr.write(prompt)
        text = sys.stdin.readline()
        sys.stderr.write("\n")  # as a terminal shows the Enter (the share itself is not shown)
        sys.stderr.flush()
    if not text.strip():
        fail("no share was given")
    return text.strip()


def print_shares(shares: list[str]) -> None:
    """The shares on standard output, each alone on its line (`share N: <share>`)."""
    for n, share in enumerate(shares, start=1):
        typer.echo(f"share {n}: {share}")


class PromptUnsealer(AskedShares):
    """Asks the operator at the terminal for the store's quorum of shares, once per
    command; the vault combines them (vault/shamir.py `AskedShares`)."""

    def __init__(self) -> None:
        super().__init__(prompt_for_quorum)


def prompt_for_quorum(share_set: ShareSet) -> list[Share]:
    """What a command that needs the master key asks for: a quorum, said so first."""
    typer.echo(
        f"chainkeys: the master key is held by Shamir shares: give "
        f"{share_set.threshold} of the {share_set.shares} (set {share_set.set_id})",
        err=True,
    )
    return ask_shares(share_set)


def ask_shares(share_set: ShareSet) -> list[Share]:
    """`threshold` distinct shares of `share_set`, read one by one; a mistyped share or
    one not of the set ends the command in one line (its commitment is checked here,
    before any is combined)."""
    given: dict[int, Share] = {}
    while len(given) < share_set.threshold:
        text = read_share(f"share ({len(given) + 1} of {share_set.threshold}): ")
        try:
            (share,) = check_set([parse_share(text)], share_set)
        except InvalidShare as exc:
            fail(exc.message)
        if share.index in given:
            fail(f"share {share.index} was given twice")
        given[share.index] = share
    return list(given.values())


@operator_app.command("unseal")
def unseal(
    url: Annotated[str, typer.Option(help="the server, e.g. https://chainkeys-1:8000")],
    cacert: Annotated[
        Path | None, typer.Option(help="CA certificate to check the server's TLS with")
    ] = None,
) -> None:
    """Give a sealed server one share (read without echo); each operator runs it once.

    Each replica is unsealed on its own: run it against each one's own address. A
    mistyped share is refused here, before it is sent (its check digits)."""
    text = read_share("share: ")
    try:
        parse_share(text)
    except InvalidShare as exc:
        fail(exc.message)
    body = json.dumps({"share": text}).encode()
    answer = post(url.rstrip("/") + "/sys/unseal", body, cacert)
    if answer.get("sealed") is False:
        typer.echo("unsealed: the server is open")
    else:
        typer.echo(f"sealed: {answer.get('progress')} of {answer.get('threshold')} shares given")


def post(url: str, body: bytes, cacert: Path | None) -> dict[str, Any]:
    """POST JSON; the answer's object, or the server's refusal in one line (exit 1)."""
    if not url.startswith(("http://", "https://")):
        fail(f"--url {url!r}: give http:// or https://")
    context = ssl.create_default_context(cafile=str(cacert) if cacert else None)
    request = urllib.request.Request(  # noqa: S310 - the scheme is checked above
        url, data=body, method="POST", headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=30, context=context) as r:  # noqa: S310
            found: dict[str, Any] = json.loads(r.read())
            return found
    except urllib.error.HTTPError as exc:
        try:
            refusal = json.loads(exc.read())
            fail(f"{exc.code}: {refusal.get('message', '')} ({refusal.get('code', '')})")
        except (ValueError, AttributeError):
            fail(f"{url}: HTTP {exc.code}")
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        fail(f"cannot reach {url}: {reason}")


@operator_app.command("rekey")
def rekey(
    shares: Annotated[int, typer.Option(min=1, max=255, help="how many new shares")],
    threshold: Annotated[int, typer.Option(min=1, max=255, help="how many open the store")],
    data_dir: DataDir = None,
) -> None:
    """New shares from a quorum of the current ones (read without echo).

    The master key stays the same (re-wrapped): running servers go on, and every
    later unseal takes the new shares; the old ones open nothing. The new shares are
    printed once, each on its own line."""
    from chainkeys.unsealing import open_sealed, rekey_shamir

    settings = settings_for(data_dir)

    async def current() -> ShareSet:
        store = await open_sealed(settings)
        try:
            return await store.share_set()
        finally:
            await store.close()

    share_set = finish(current)
    typer.echo(
        f"chainkeys: give {share_set.threshold} of the current {share_set.shares} "
        f"shares (set {share_set.set_id})",
        err=True,
    )
    old = [s.text() for s in ask_shares(share_set)]
    made, texts = finish(lambda: rekey_shamir(settings, old, shares, threshold))
    typer.echo(
        f"chainkeys: new share set {made.set_id}: any {made.threshold} of these "
        f"{made.shares} open the store; they are shown only this once",
        err=True,
    )
    print_shares(texts)
