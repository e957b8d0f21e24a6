"""A real chainkeys server for the whole session, and tokens issued by its CLI.

The server is `$CHAINKEYS_BIN serve` (default: the repository's
`.venv/bin/chainkeys`) on a free port with a temporary data directory, export
enabled and a fixed test master key. Tests reach it only over HTTP, through
the client under test.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from ckc_proxy import TamperProxy

from chainkeys_client import Client

REPO = Path(__file__).resolve().parents[3]
CHAINKEYS_BIN = os.environ.get("CHAINKEYS_BIN", str(REPO / ".venv/bin/chainkeys"))
MASTER_KEY = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="  # 32 bytes, tests only
ALL_SCOPES = "read,create,delete,sign,export"
VECTORS_DIR = REPO / "tests/chains/vectors"  # the repository's pinned copy
SIGNING_VECTORS = REPO / "tests/chains/vectors"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Server:
    url: str
    data_dir: Path
    env: dict[str, str]
    process: subprocess.Popen[bytes]
    tokens: dict[tuple[str, str, str, str | None], str] = field(default_factory=dict)

    def token(
        self, tenant: str = "t1", scopes: str = ALL_SCOPES, label: str = "py",
        group: str | None = None,
    ) -> str:  # fmt: skip
        """Issue a token (`chainkeys token create`; the token is the last stdout line),
        once per (tenant, scopes, label, group) in the session. An approve token needs
        a group (the approver group) and a label (the person)."""
        if (tenant, scopes, label, group) in self.tokens:
            return self.tokens[tenant, scopes, label, group]
        out = self.cli("token", "create", "--tenant", tenant, "--label", label,
                       "--scope", scopes, *(("--group", group) if group else ()))  # fmt: skip
        token = out.strip().splitlines()[-1].strip()
        self.tokens[tenant, scopes, label, group] = token
        return token

    def policy(self, tenant: str, *rules: dict[str, Any]) -> None:
        """Make `rules` the tenant's signing policy (`chainkeys policy set`; the tenant
        exists once a token was issued for it), before the tenant's first sign request (a running server re-reads a policy only after
        its refresh interval)."""
        path = self.data_dir / f"policy-{tenant}.json"
        path.write_text(json.dumps({"rules": list(rules)}))
        self.cli("policy", "set", tenant, str(path))

    def cli(self, *args: str) -> str:
        out = subprocess.run(
            [CHAINKEYS_BIN, *args, "--data-dir", str(self.data_dir)],
            env=self.env, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        if out.returncode != 0:
            raise AssertionError(f"chainkeys {args[:2]} failed: {out.stderr[-2000:]}")
        return out.stdout


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    if not Path(CHAINKEYS_BIN).exists():
        pytest.fail(
            f"no chainkeys at {CHAINKEYS_BIN}: run ./scripts/bootstrap or set CHAINKEYS_BIN"
        )
    data_dir = tmp_path_factory.mktemp("chainkeys-data")
    port = free_port()
    env = {  # the caller's own CHAINKEYS_* (e.g. CHAINKEYS_BIN) are not server settings;
        # the worker count is (scripts/test runs the suites' servers with one)
        **{
            k: v
            for k, v in os.environ.items()
            if not k.startswith("CHAINKEYS_") or k == "CHAINKEYS_WORKERS"
        },
        "CHAINKEYS_MASTER_KEY": MASTER_KEY,
        "CHAINKEYS_DATA_DIR": str(data_dir),
        "CHAINKEYS_EXPORT_ENABLED": "true",
        "CHAINKEYS_ACCESS_LOG": "false",
        "CHAINKEYS_PUBLIC_URL": f"http://localhost:{port}",  # approver passkeys' origin
    }
    log = open(data_dir / "server.log", "wb")  # noqa: SIM115 - closed below
    process = subprocess.Popen(
        [CHAINKEYS_BIN, "serve", "--host", "127.0.0.1", "--port", str(port),
         "--data-dir", str(data_dir)],
        env=env, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 180  # a ceiling for a busy machine, not a measurement
    try:
        while True:
            if process.poll() is not None:
                pytest.fail(f"chainkeys exited: {(data_dir / 'server.log').read_text()[-2000:]}")
            try:
                if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                pytest.fail("chainkeys did not become ready in 180 s")
            time.sleep(0.1)
        yield Server(url, data_dir, env, process)
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


@pytest.fixture(scope="session")
def proxy(server: Server) -> Iterator[TamperProxy]:
    """A real HTTP proxy in front of the server that can rewrite answers (ckc_proxy)."""
    made = TamperProxy(server.url)
    yield made
    made.close()


@pytest.fixture(scope="session")
def token(server: Server) -> str:
    return server.token()


@pytest.fixture
def ck(server: Server, token: str) -> Iterator[Client]:
    with Client(server.url, token) as client:
        yield client


@pytest.fixture
def client_for(server: Server) -> Iterator[Callable[..., Client]]:
    """A Client for a token of (tenant, scopes), closed after the test."""
    made: list[Client] = []

    def make(tenant: str = "t1", scopes: str = ALL_SCOPES, **kwargs: Any) -> Client:
        client = Client(server.url, server.token(tenant, scopes), **kwargs)
        made.append(client)
        return client

    yield make
    for client in made:
        client.close()


@pytest.fixture(scope="session")
def vectors() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((VECTORS_DIR / "vectors.json").read_text())
    return data


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
