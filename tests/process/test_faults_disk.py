"""A full disk under a SQLite server: 503 `storage_full`, nothing half-written, reads go
on, and writes come back by themselves once space is freed.

The data directory sits on a tmpfs of its own, a few MB, mounted by the test (root
only; CI sets CHAINKEYS_TEST_REQUIRE_TMPFS=1, where a failed mount fails the test). A
filler file takes the rest of it: the server meets the real ENOSPC in its WAL and its
database file, not an error injected into SQLite.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import errno
import os
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.conftest import TEST_MASTER_KEY, TLS, wait_for
from tests.process.test_process import Proc, first_token, start

pytestmark = [pytest.mark.slow, pytest.mark.long(10)]

DISK_MB = 24  # the schema, a WAL of a few MB and the filler's leftovers fit
FULL = {
    "success": False,
    "message": "the database's disk is full; nothing was written",
    "code": "storage_full",
}


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A tmpfs of DISK_MB at tmp_path/disk, unmounted after."""
    mount = tmp_path / "disk"
    mount.mkdir()
    why = None
    if os.geteuid() != 0:
        why = "mounting a tmpfs needs root"
    else:
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={DISK_MB}m,mode=0700", "tmpfs", str(mount)],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            why = f"mount -t tmpfs failed: {done.stderr.strip()}"
    if why is not None:
        if os.environ.get("CHAINKEYS_TEST_REQUIRE_TMPFS"):
            pytest.fail(why)
        pytest.skip(why)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False, capture_output=True)


def fill(path: Path) -> None:
    """Write `path` until the file system has no room left (the real ENOSPC)."""
    chunk = b"\0" * 65536
    with path.open("wb", buffering=0) as f:
        while True:
            try:
                f.write(chunk)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC, exc
                break
        size = 4096
        while size:  # the last pages of the file system too
            try:
                f.write(b"\0" * size)
            except OSError:
                size //= 2


def import_key(proc: Proc, token: str, n: int) -> tuple[int, dict[str, Any]]:
    with httpx.Client(
        verify=TLS, base_url=proc.base_url, headers={"Authorization": token}, timeout=60
    ) as c:
        r = c.post("/dogecoin", json={"private_key": f"{n + 1:064x}"})
    return r.status_code, r.json()


def stored(db: Path) -> tuple[int, int, str]:
    """Accounts, their import audit rows ("ok"), and integrity_check, read from the
    file by a connection of our own, once a full checkpoint of the WAL went through."""
    conn = sqlite3.connect(db)
    try:
        busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        assert busy == 0
        accounts = conn.execute("SELECT count(*) FROM accounts").fetchone()[0]
        partial = conn.execute(
            "SELECT count(*) FROM accounts WHERE address = '' OR public_key = '' "
            "OR secret IS NULL OR length(secret) = 0"
        ).fetchone()[0]
        assert partial == 0
        audited = conn.execute(
            "SELECT count(*) FROM audit WHERE action = 'import' AND outcome = 'ok'"
        ).fetchone()[0]
        check = conn.execute("PRAGMA integrity_check").fetchone()[0]
    finally:
        conn.close()
    return int(accounts), int(audited), str(check)


def test_a_full_disk_refuses_writes_keeps_reads_and_recovers(
    small_disk: Path, tmp_path: Path
) -> None:
    data = small_disk / "data"
    env = {"CHAINKEYS_DATA_DIR": str(data), "CHAINKEYS_MASTER_KEY": TEST_MASTER_KEY}
    os.environ.pop("CHAINKEYS_DATABASE_URL", None)
    proc = start(env, tmp_path / "server.log")
    told: dict[int, int] = {}  # key number -> the status the client was told
    try:
        token = first_token(proc)
        next_key = iter(range(1_000_000))

        def burst(count: int) -> list[tuple[int, dict[str, Any]]]:
            keys = [next(next_key) for _ in range(count)]
            with concurrent.futures.ThreadPoolExecutor(8) as pool:
                answers = list(pool.map(lambda n: import_key(proc, token, n), keys))
            for n, (status, _) in zip(keys, answers, strict=True):
                told[n] = status
            return answers

        assert {s for s, _ in burst(40)} == {200}
        filler = small_disk / "filler"
        fill(filler)

        # Writes go on while pages that SQLite holds already take them; each answer is
        # a 200 or the storage_full envelope, until the disk refuses every one.
        def refused_in_a_row() -> bool:
            answers = burst(16)
            for status, body in answers:
                assert status in (200, 503), body
                if status == 503:
                    assert body == FULL
            return all(status == 503 for status, _ in answers)

        wait_for(refused_in_a_row, "every write refused on the full disk")
        with httpx.Client(
            verify=TLS, base_url=proc.base_url, headers={"Authorization": token}, timeout=30
        ) as c:
            listed = c.get("/dogecoin", params={"limit": 1})
            assert listed.status_code == 200, listed.text  # reads go on
            assert c.get("/readyz").status_code == 200  # reads answer: still ready
        assert proc.popen.poll() is None

        filler.unlink()  # space returns: no restart
        wait_for(lambda: burst(1)[0][0] == 200, "a write accepted once space returned")
        assert {s for s, _ in burst(40)} == {200}
    finally:
        proc.stop()
        with contextlib.suppress(FileNotFoundError):
            (small_disk / "filler").unlink()

    accounts, audited, check = stored(data / "chainkeys.db")
    assert check == "ok"
    ok = sum(1 for s in told.values() if s == 200)
    # A 503 storage_full rolled its transaction back: exactly the 200s are stored,
    # each with its audit row.
    assert accounts == ok == audited, (accounts, ok, audited)

    proc = start(env, tmp_path / "again.log")  # the WAL and the file open again
    try:
        with httpx.Client(
            verify=TLS, base_url=proc.base_url, headers={"Authorization": token}, timeout=30
        ) as c:
            assert c.post("/dogecoin", json={}).status_code == 200
    finally:
        proc.stop()
    accounts, audited, check = stored(data / "chainkeys.db")
    assert check == "ok"
    assert accounts == ok + 1
