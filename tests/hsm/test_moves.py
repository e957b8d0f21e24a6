"""Moving the master key between providers (file → HSM key A → HSM key B → file) keeps
every account, also when `chainkeys key move` is killed with SIGKILL mid-way and run
again. Its own file so that, being the slowest, it runs beside the others.

A move's database step is one statement, over in well under a millisecond: a kill
after a fixed sleep lands before the move began or after it ended, and proves
nothing. So each kill lands at a named point inside `chainkeys.masterkey.moves.move`: the
real `chainkeys key move` runs with one of its functions wrapped so that, once that
function has returned, the process says so and sleeps (nothing else changes). The
test then reads the store and the key file from outside, asserts the state there is
the intermediate one that point implies, and only then sends SIGKILL.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import chainkeys_cli
from tests.hsm.conftest import Hsm, serve_and_check, store_rows

pytestmark = pytest.mark.long(25)  # seconds (busy run): scheduled first

# The crash points of a move, in order:
#   "wrapped"   (to pkcs11): the target HSM key has wrapped the master key; the blob is
#               not stored yet.
#   "key file"  (to file): the key file is written (0600, fsynced); the blob is not
#               deleted yet. The one state in which the key is in both places.
#   "stored"    the move's database step is committed; `key move` has neither audited
#               nor reported it.
PAUSED_MOVE = """
import runpy, sys, time
from chainkeys.masterkey import moves
from chainkeys.vault import pkcs11
from chainkeys.vault.providers import FileKeyProvider

point, marker = sys.argv[1], sys.argv[2]


def pause():
    with open(marker, "w") as out:
        out.write(point)
    time.sleep(3600)  # the test kills it here


def after(function):
    def wrapper(*args, **kwargs):
        result = function(*args, **kwargs)
        pause()
        return result
    return wrapper


def after_async(function):
    async def wrapper(*args, **kwargs):
        result = await function(*args, **kwargs)
        pause()
        return result
    return wrapper


if point == "wrapped":
    pkcs11.wrap = after(pkcs11.wrap)
elif point == "key file":
    FileKeyProvider.adopt = after_async(FileKeyProvider.adopt)
elif point == "stored":
    moves.move = after_async(moves.move)
else:
    sys.exit(f"no such point {point!r}")
sys.argv = ["chainkeys", *sys.argv[3:]]
runpy.run_module("chainkeys.cli", run_name="__main__")
"""


@dataclass(frozen=True)
class State:
    """What a move leaves behind: the wrapped blob's HSM key (None: no blob), the key
    file's text (None: no file), and how many moves the audit log records."""

    blob_key: tuple[str, str] | None  # (token label, key label)
    key_file: str | None
    moves_audited: int


def state(hsm: Hsm) -> State:
    """Read from this process while `key move` is paused (or dead)."""
    meta: dict[str, Any] = dict(
        store_rows(hsm, "SELECT key, value FROM meta WHERE key LIKE 'master_key_w%'")
    )
    assert "master_key_wrapped_next" not in meta, "a move never starts a rotation"
    blob = meta.get("master_key_wrapped")
    blob_key = None
    if blob is not None:
        fields = json.loads(bytes(blob))
        blob_key = (fields["token_label"], fields["key_label"])
    key_file = Path(hsm.env["CHAINKEYS_DATA_DIR"]) / "master.key"
    text = key_file.read_text() if key_file.exists() else None
    if text is not None:
        assert key_file.stat().st_mode & 0o777 == 0o600
    ((audited,),) = store_rows(hsm, "SELECT count(*) FROM audit WHERE action = 'key.move'")
    return State(blob_key, text, int(audited))


def kill_at(hsm: Hsm, env: dict[str, str], args: tuple[str, ...], point: str) -> State:
    """Run `chainkeys <args>` until it reaches `point`, SIGKILL it there; the state the
    kill left (asserted to be the state seen while it was stopped at `point`)."""
    marker = hsm.tmp / "paused"
    marker.unlink(missing_ok=True)
    log = hsm.tmp / f"killed-{'-'.join(args)}-{point.replace(' ', '-')}.log"
    with log.open("w") as err:
        proc = subprocess.Popen(
            [sys.executable, "-c", PAUSED_MOVE, point, str(marker), *args],
            env={**os.environ, **env},
            stdout=err,
            stderr=err,
        )
    try:
        deadline = time.monotonic() + 60
        while not marker.exists():
            if proc.poll() is not None:
                raise AssertionError(
                    f"`{' '.join(args)}` ended (exit {proc.returncode}) "
                    f"before {point!r}: {log.read_text()}"
                )
            assert time.monotonic() < deadline, f"`{' '.join(args)}` never reached {point!r}"
            time.sleep(0.02)
        seen = state(hsm)
        assert proc.poll() is None, "it must still be running (paused mid-move) at the kill"
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(30) == -signal.SIGKILL, "killed, not finished"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
    assert state(hsm) == seen  # nothing of the move was lost or finished by the kill
    return seen


# SQLite only: a move rewrites the store's meta rows alone, and a move on PostgreSQL is
# tested in test_provider.py (test_a_file_key_store_refuses_the_hsm_until_moved).
@pytest.mark.parametrize("hsm", ["sqlite"], indirect=True)
def test_moves_both_ways_survive_sigkill_and_keep_every_account(hsm: Hsm) -> None:
    file_env = {**hsm.env, "CHAINKEYS_MASTER_KEY_PROVIDER": "file"}
    token = serve_and_check(file_env, hsm.tmp / "file.log")
    key_file = Path(hsm.env["CHAINKEYS_DATA_DIR"]) / "master.key"
    original = key_file.read_text()
    assert hsm.cli("hsm", "init").returncode == 0
    b_env = {**hsm.env, "CHAINKEYS_PKCS11_KEY_LABEL": "chainkeys-next"}
    assert chainkeys_cli("hsm", "init", env=b_env).returncode == 0
    key_a, key_b = ("chainkeys-a", "chainkeys-master"), ("chainkeys-a", "chainkeys-next")
    steps = [
        # source settings, the move, the settings after it, the blob's key before → after
        (file_env, ("key", "move", "--to", "pkcs11"), hsm.env, None, key_a),
        (
            hsm.env,
            ("key", "move", "--to", "pkcs11", "--key-label", "chainkeys-next"),
            b_env,
            key_a,
            key_b,
        ),
        (b_env, ("key", "move", "--to", "file"), file_env, key_b, None),
    ]
    for n, (source, args, target, blob_before, blob_after) in enumerate(steps):
        before = state(hsm)
        assert before.blob_key == blob_before
        assert before.key_file == (original if n == 0 else None)  # then in the HSM only
        # Killed before the database step: the store is as it was, the move under way.
        if blob_after is not None:
            at = kill_at(hsm, source, args, "wrapped")
            assert at == before
        else:  # the key file is written, and the blob still there: both copies at once
            at = kill_at(hsm, source, args, "key file")
            assert at == State(blob_before, original, before.moves_audited)
        # Run again, killed after the database step: moved, neither audited nor reported.
        at = kill_at(hsm, source, args, "stored")
        assert at == State(blob_after, original if n in (0, 2) else None, before.moves_audited)
        # Run again: it finds the move done, and says so.
        done = chainkeys_cli(*args, env=source)
        assert done.returncode == 0 and "there already" in done.stdout, done.stderr
        again = chainkeys_cli(*args, env=source)
        assert again.returncode == 0 and "there already" in again.stdout, again.stdout
        assert state(hsm).moves_audited == before.moves_audited + 2
        serve_and_check(target, hsm.tmp / f"step{n}.log", token)
        if n == 0:
            key_file.rename(hsm.tmp / "master.key.archived")  # the key lives in the HSM only
    assert key_file.read_text() == original  # the same master key all along
    assert key_file.stat().st_mode & 0o777 == 0o600
