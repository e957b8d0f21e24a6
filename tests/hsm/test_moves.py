"""Moving the master key between providers (file → HSM key A → HSM key B → file) keeps
every account, also when `chainkeys key move` is killed with SIGKILL mid-way and run
again. Its own file so that, being the slowest, it runs beside the others."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import chainkeys_cli
from tests.hsm.conftest import Hsm, serve_and_check


def run_killed(env: dict[str, str], *args: str, after: float) -> None:
    """Start `chainkeys <args>` and SIGKILL it `after` seconds in (if still running)."""
    proc = subprocess.Popen([sys.executable, "-m", "chainkeys.cli", *args],
                            env={**os.environ, **env}, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)  # fmt: skip
    time.sleep(after)
    if proc.poll() is None:
        proc.send_signal(signal.SIGKILL)
    proc.wait(30)


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
    steps = [
        (file_env, ("key", "move", "--to", "pkcs11"), hsm.env),  # file → HSM key A
        (hsm.env, ("key", "move", "--to", "pkcs11", "--key-label", "chainkeys-next"), b_env),
        (b_env, ("key", "move", "--to", "file"), file_env),  # HSM key B → file
    ]
    for n, (source, args, target) in enumerate(steps):
        for delay in (0.4, 0.8):  # interrupted at various points, then run again
            run_killed(source, *args, after=delay)
        done = chainkeys_cli(*args, env=source)
        assert done.returncode == 0, done.stderr
        again = chainkeys_cli(*args, env=source)  # a re-run finds it done
        assert again.returncode == 0 and "there already" in again.stdout, again.stdout
        serve_and_check(target, hsm.tmp / f"step{n}.log", token)
        if n == 0:
            key_file.rename(hsm.tmp / "master.key.archived")  # the key lives in the HSM only
    assert key_file.read_text() == original  # the same master key all along
    assert key_file.stat().st_mode & 0o777 == 0o600
