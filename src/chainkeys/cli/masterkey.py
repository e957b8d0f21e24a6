"""`chainkeys key` (rotate, retire, move between providers) and `chainkeys hsm init`."""

from __future__ import annotations

from typing import Annotated

import typer

from chainkeys.cli.common import DataDir, fail, group, run, run_admin, settings_for, when
from chainkeys.cli.operator import print_shares
from chainkeys.errors import ChainkeysError
from chainkeys.vault.providers import PROVIDERS
from chainkeys.vault.shamir import UNSEALER, init_shares

key_app = group("Master-key rotation and where the key lives.")
# A heartbeat the operator knows has ended (retire and destroy wait for the others).
Gone = Annotated[
    list[str] | None,
    typer.Option(help="a process (id from `chainkeys key list`) known to have ended"),
]
hsm_app = group("The HSM (PKCS#11) key that wraps the master key.")


@key_app.command("rotate")
def key_rotate(
    wait: Annotated[
        float, typer.Option(min=0, help="seconds to wait for running servers to switch keys")
    ] = 60.0,
    data_dir: DataDir = None,
) -> None:
    """Re-seal every secret under a new master key, with the service running (safe to
    interrupt and run again).

    The new key reaches every running server and replica through the database
    within CHAINKEYS_KEY_REFRESH_SECONDS; secrets are re-sealed once they all seal
    with it. Key file: the new key is made beside the current one and then replaces
    master.key; the old key stays as master.key.retired-<id> until `chainkeys key
    retire`. Replicas on other hosts keep working; copy the new master.key to them
    before retiring. CHAINKEYS_MASTER_KEY: set it to the new key and
    CHAINKEYS_PREVIOUS_MASTER_KEYS to the old one(s), then run this.
    """
    say = lambda text: typer.echo(text, err=True)  # noqa: E731
    report = run(settings_for(data_dir), lambda svc: svc.keys.rotate(wait, say))
    done = ", ".join(f"{n} in {col}" for col, n in report.resealed.items() if n) or "nothing"
    typer.echo(f"re-sealed {done} under master key {report.new_key_id}")
    if report.retired_key_file:
        typer.echo(
            f"old key kept at {report.retired_key_file} until `chainkeys key retire` "
            "(the store's key ring holds it too)"
        )


@key_app.command("retire")
def key_retire(
    gone: Gone = None,
    data_dir: DataDir = None,
) -> None:
    """Stop older master keys from sealing, once no secret and no running server uses
    one.

    They stay in the store's key ring under the current key (whatever a late
    process sealed with one still opens) and unwrap nothing; retired key files are
    removed. Refused, saying what it waits for, while something still needs an older
    key: a secret sealed with one, or a process that seals with one, however long ago
    its heartbeat was (a stalled process could never learn the current key after a
    retire); restart those, or name one you know has ended with --gone.
    `chainkeys key destroy` forgets a retired key for good.
    """
    names = frozenset(gone or ())
    report = run(settings_for(data_dir), lambda svc: svc.keys.retire(names))
    for path in report.removed:
        typer.echo(f"removed {path}")
    retired = ", ".join(report.retired) or "none"
    typer.echo(f"the current master key is {report.current_key_id}; retired now: {retired}")
    for user in report.rooted:
        typer.echo(
            f"note: {user.host} pid {user.pid} started from retired key {user.root_key_id}: it "
            "keeps running, but needs the current key (file or variable) to start again",
            err=True,
        )


@key_app.command("destroy")
def key_destroy(
    key_id: Annotated[str, typer.Argument(help="a retired master key id (`chainkeys key list`)")],
    gone: Gone = None,
    data_dir: DataDir = None,
) -> None:
    """Forget a retired master key for good.

    Refused while any secret is sealed with it, and while any process that used it
    has a heartbeat, however old (a stopped process may resume holding a value sealed
    with it); restart those, or name one you know has ended with --gone.
    """
    names = frozenset(gone or ())
    removed = run(settings_for(data_dir), lambda svc: svc.keys.destroy(key_id, names))
    typer.echo(f"destroyed master key {key_id} ({removed} key ring entries removed)")


@key_app.command("list")
def key_list(data_dir: DataDir = None) -> None:
    """The store's master keys (ids and dates, never a key) and the server processes
    that seal, with the keys they use."""
    state = run_admin(settings_for(data_dir), lambda admin: admin.keys.state())
    typer.echo(f"{'KEY ID':16}  {'STATE':8}  {'CREATED':20}  {'RETIRED':20}  DESTROYED")
    for t in state.terms:
        label = (
            "destroyed"
            if t.destroyed_ms
            else "retired"
            if t.retired_ms
            else "current"
            if t.key_id == state.current
            else "older"
        )
        typer.echo(
            f"{t.key_id:16}  {label:8}  {when(t.created_ms):20}  {when(t.retired_ms):20}  "
            f"{when(t.destroyed_ms)}"
        )
    typer.echo("")
    typer.echo(
        f"{'PROCESS':32}  {'HOST':20}  {'PID':>7}  {'SEALS WITH':16}  {'LAST SEEN':20}  USED KEYS"
    )
    for u in state.processes:
        seen = when(u.seen_ms) + ("" if u.seen_ms >= state.live_since_ms else " (stale)")
        typer.echo(
            f"{u.process:32}  {u.host[:20]:20}  {u.pid:>7}  {u.sealing_key_id:16}  "
            f"{seen:20}  {u.used_key_ids}"
        )


def _targets() -> list[str]:
    return [name for name, row in PROVIDERS.items() if row.target]


@key_app.command("move")
def key_move(
    to: Annotated[str, typer.Option("--to", help=f"one of: {', '.join(_targets())}")],
    key: Annotated[
        str | None,
        typer.Option(
            help="the target's wrapping key, in place of its setting: an HSM key "
            "label, a KMS key id, a transit key name, a KMIP key id"
        ),
    ] = None,
    key_label: Annotated[
        str | None, typer.Option(help="pkcs11: the HSM key to wrap under (as --key)")
    ] = None,
    token_label: Annotated[
        str | None, typer.Option(help="pkcs11: the token (default: CHAINKEYS_PKCS11_TOKEN_LABEL)")
    ] = None,
    shares: Annotated[
        int | None, typer.Option(min=1, max=255, help="shamir: how many unseal shares to print")
    ] = None,
    threshold: Annotated[
        int | None, typer.Option(min=1, max=255, help="shamir: how many shares open the store")
    ] = None,
    data_dir: DataDir = None,
) -> None:
    """Move the master key from the configured provider to another (or to another key of
    the same one); no account is re-encrypted (the key stays the same). Safe to run
    again if interrupted.

    Then set CHAINKEYS_MASTER_KEY_PROVIDER (and the target's settings) to the new
    place and restart every replica. --to shamir --shares N --threshold K prints N new
    shares, any K of which open the store, before the move writes anything: they are
    shown only this once.
    """
    if to not in _targets():
        fail(f"--to {to!r}: use one of {', '.join(_targets())}")
    settings = settings_for(data_dir)
    if to == "shamir":
        if settings.key_provider == "shamir":
            fail(
                "the master key is held by Shamir shares already: `chainkeys operator "
                "rekey` makes new shares from a quorum of the current ones"
            )
        new_shares(shares, threshold)
    elif shares is not None or threshold is not None:
        fail("--shares and --threshold are for --to shamir")
    overrides: dict[str, str] = {}
    named = key or key_label
    setting = PROVIDERS[to].key_setting
    if named is not None:
        if setting is None:
            fail(f"--key: the {to} provider has no key to name")
        overrides[setting] = named
    if token_label is not None:
        if to != "pkcs11":
            fail("--token-label is for --to pkcs11")
        overrides["pkcs11_token_label"] = token_label

    try:
        moved = run_admin(settings, lambda a: a.keys.move(to, overrides))
    except typer.Exit:
        if to == "shamir":
            typer.echo(
                "chainkeys: the move did not finish: the shares printed above open "
                "nothing unless a shamir start asks for their set",
                err=True,
            )
        raise
    note = " (it was there already)" if moved.already else ""
    typer.echo(f"master key {moved.key_id} is now kept by {moved.to}{note}")
    hint = f" and CHAINKEYS_{setting.upper()}={named}" if named and setting else ""
    typer.echo(f"next: start every replica with CHAINKEYS_MASTER_KEY_PROVIDER={to}{hint}")
    if to == "shamir":
        typer.echo(
            "each replica then starts sealed until operators give it the shares "
            "(`chainkeys operator unseal --url URL`)"
        )
    if settings.key_provider == "file" and settings.key_file.exists():
        typer.echo(
            f"then delete {settings.key_file} (and its copies on other hosts): "
            "while it exists, the master key is on this disk too"
        )


def new_shares(shares: int | None, threshold: int | None) -> None:
    """Have the vault make an unseal key and print its shares before anything is
    written, so a move that lands has shares that were already shown; this command's
    unsealer then holds the new key (it opens only its own share set)."""
    if shares is None or threshold is None:
        fail("--to shamir: give --shares N --threshold K")
    try:
        unsealer, share_set, texts = init_shares(shares, threshold)
    except ChainkeysError as exc:
        fail(exc.message)
    typer.echo(
        f"share set {share_set.set_id}: {shares} shares, any {threshold} of which open "
        "the store once the move below finishes. They are shown only this once: give "
        "one to each operator."
    )
    print_shares(texts)
    UNSEALER.set(unsealer)


@hsm_app.command("init")
def hsm_init(data_dir: DataDir = None) -> None:
    """Create the HSM key (AES-256, non-extractable, sensitive) when the token has none
    labelled CHAINKEYS_PKCS11_KEY_LABEL; it never leaves the token."""
    from chainkeys.vault.pkcs11 import hsm_from_settings, init_key

    try:
        hsm = hsm_from_settings(settings_for(data_dir))
        key_id, created = init_key(hsm)
    except ChainkeysError as exc:
        fail(exc.message)
    verb = "created" if created else "already present:"
    typer.echo(f"{verb} {hsm.description} (id {key_id})")
