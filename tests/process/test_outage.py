"""PostgreSQL outages: a 503 envelope within a bound, then service again without a restart.

A TCP proxy in the test sits between chainkeys and PostgreSQL and plays the
two kinds of outage: the database goes away (connections reset, new ones
refused) and the network stalls (packets vanish; nothing answers, nothing
fails). Neither may hang a request or leave a partial row.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import socket
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import asyncpg  # type: ignore[import-untyped]
import httpx
import pytest
from tests.conftest import (
    PG_ADMIN_URL,
    TEST_MASTER_KEY,
    TLS,
    drop_pg_database,
    free_port,
    make_pg_database,
    wait_for,
)
from tests.process.bounds import TIMEOUTS
from tests.process.test_process import Proc, first_token, start

from chainkeys.vault.providers import decode_key
from chainkeys.vault.seal import Context, Vault

pytestmark = [pytest.mark.slow, pytest.mark.long(45)]

# pool wait + ping (statement timeout) + connect timeout (tests/process/bounds.py), plus
# slack for a 2-core box
BOUND_S = 12.0


class Proxy:
    """A TCP forwarder that can refuse, reset or silently drop traffic."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.port = free_port()
        self.mode = "up"  # up | down (refuse + reset) | stall (accept, forward nothing)
        self._lock = threading.Lock()
        self._listener: socket.socket | None = None
        self._socks: set[socket.socket] = set()
        self._open_listener()

    def _open_listener(self) -> None:
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", self.port))
        sock.listen(64)
        self._listener = sock
        threading.Thread(target=self._accept, args=(sock,), daemon=True).start()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # listener closed
            if self.mode == "down":
                self._reset(client)
                continue
            with self._lock:
                self._socks.add(client)
                stalled = self.mode == "stall"
            if stalled:
                continue  # hold it open, say nothing: the handshake never completes
            try:
                server = socket.create_connection(self.upstream, timeout=5)
                server.settimeout(None)
            except OSError:
                self._reset(client)
                continue
            with self._lock:
                self._socks.add(server)
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        while True:
            try:
                data = src.recv(65536)
            except OSError:
                data = b""
            if not data:
                self._reset(dst)
                return
            if self.mode == "stall":
                continue  # the network eats it
            try:
                dst.sendall(data)
            except OSError:
                self._reset(src)
                return

    def _reset(self, sock: socket.socket) -> None:
        with contextlib.suppress(OSError):
            # linger 0: close with RST, like a database host that went away
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)  # wakes a pump blocked in recv on it
        with contextlib.suppress(OSError):
            sock.close()
        with self._lock:
            self._socks.discard(sock)

    def down(self) -> None:
        """The database is gone: refuse new connections, reset the open ones."""
        self.mode = "down"
        if self._listener is not None:
            with contextlib.suppress(OSError):
                self._listener.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept()
            self._listener.close()
            self._listener = None
        with self._lock:
            socks = list(self._socks)
        for sock in socks:
            self._reset(sock)

    def stall(self) -> None:
        """A partition: connections stay open but nothing gets through."""
        self.mode = "stall"

    def up(self) -> None:
        """Back: stalled connections are dropped (as after a partition), new ones forward."""
        was = self.mode
        self.mode = "up"
        if was == "stall":
            with self._lock:
                socks = list(self._socks)
            for sock in socks:
                self._reset(sock)
        if self._listener is None:
            self._open_listener()

    def close(self) -> None:
        self.down()


@pytest.fixture
def pg_url() -> Iterator[str]:
    url = make_pg_database()
    yield url
    drop_pg_database(url)


@pytest.fixture
def proxied(pg_url: str, tmp_path: Path) -> Iterator[tuple[Proxy, Proc, str]]:
    """A chainkeys process reaching its PostgreSQL database through the proxy."""
    host_port = PG_ADMIN_URL.rsplit("@", 1)[1].split("/", 1)[0]
    host, port = host_port.rsplit(":", 1)
    proxy = Proxy((host, int(port)))
    via = pg_url.replace(host_port, f"127.0.0.1:{proxy.port}")
    env = {
        "CHAINKEYS_DATABASE_URL": via,
        "CHAINKEYS_DATA_DIR": str(tmp_path / "data"),
        "CHAINKEYS_MASTER_KEY": TEST_MASTER_KEY,
        **TIMEOUTS,
    }
    proc = start(env, tmp_path / "server.log")
    try:
        yield proxy, proc, first_token(proc)
    finally:
        proxy.up()
        proc.stop()
        proxy.close()


_round = iter(range(1, 1_000_000))


def requests_for(i: int, salt: int = 0) -> tuple[str, str, dict[str, Any] | None]:
    """A mixed request: create on every family, imports, gets, lists, a delete."""
    family = ("cosmos", "dogecoin", "eos", "litecoin")[i % 4]
    kind = i % 5
    if kind == 0:
        return "POST", f"/{family}", {}
    if kind == 1:
        return "POST", f"/{family}", {"private_key": f"{salt:032x}{i + 1:032x}"}
    if kind == 2:
        return "GET", f"/{family}", None
    if kind == 3:
        return "GET", "/cosmos/cosmos1qqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqnrql8a", None
    return "DELETE", "/cosmos/cosmos1qqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqnrql8a", None


def fire(proc: Proc, token: str, count: int) -> list[tuple[int, float, dict[str, Any]]]:
    """`count` concurrent mixed requests; (status, seconds, body) each."""

    salt = next(_round)  # imports never repeat a key: a 409 would hide a 503

    def one(i: int) -> tuple[int, float, dict[str, Any]]:
        method, path, body = requests_for(i, salt)
        started = time.monotonic()
        with httpx.Client(
            verify=TLS, base_url=proc.base_url, headers={"Authorization": token}, timeout=60
        ) as c:
            r = c.request(method, path, json=body) if body is not None else c.request(method, path)
        return r.status_code, time.monotonic() - started, r.json()

    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        return list(pool.map(one, range(count)))


def assert_all_unavailable(results: list[tuple[int, float, dict[str, Any]]]) -> None:
    for status, seconds, body in results:
        assert status == 503, body
        assert body == {
            "success": False,
            "message": "storage is unavailable; try again",
            "code": "storage_unavailable",
        }
        assert seconds < BOUND_S, f"a request took {seconds:.1f}s during the outage"


def assert_resumes(proc: Proc, token: str) -> None:
    """Within a few seconds of the database coming back, everything answers again."""
    deadline = time.monotonic() + 10
    with httpx.Client(
        verify=TLS, base_url=proc.base_url, headers={"Authorization": token}, timeout=30
    ) as c:
        while c.get("/healthz").status_code != 200:
            assert time.monotonic() < deadline, "no recovery without a restart"
            time.sleep(0.2)
    for status, _, body in fire(proc, token, 20):
        assert status in (200, 404), body  # 404: the fixed cosmos name does not exist


def stored_accounts(pg_url: str) -> list[tuple[str, str, str]]:
    """Every account, opened with the master key: a partial row would fail here."""

    async def main() -> list[tuple[str, str, str]]:
        conn = await asyncpg.connect(pg_url, timeout=5)
        try:
            rows = await conn.fetch(
                "SELECT tenant_id, family, name, address, public_key, secret, key_id FROM accounts"
            )
        finally:
            await conn.close()
        vault = Vault(decode_key(TEST_MASTER_KEY, "test key"))
        for r in rows:
            assert r["address"] and r["public_key"]
            context = Context(r["tenant_id"], r["family"], r["name"])
            assert len(vault.open(bytes(r["secret"]), r["key_id"], context)) == 32
        return [(r["tenant_id"], r["family"], r["name"]) for r in rows]

    return asyncio.run(main())


def test_database_down_gives_503_then_recovers(
    proxied: tuple[Proxy, Proc, str], pg_url: str
) -> None:
    proxy, proc, token = proxied
    before = fire(proc, token, 20)
    assert {s for s, _, _ in before} <= {200, 404}
    count_before = len(stored_accounts(pg_url))

    proxy.down()
    assert_all_unavailable(fire(proc, token, 40))
    with httpx.Client(verify=TLS, base_url=proc.base_url, timeout=30) as c:
        assert c.get("/healthz").status_code == 503
        assert c.get("/networks").status_code == 200  # what needs no database still works
    assert len(stored_accounts(pg_url)) == count_before  # nothing written while down

    proxy.up()
    assert_resumes(proc, token)
    assert len(stored_accounts(pg_url)) > count_before
    assert proc.popen.poll() is None


def test_network_stall_gives_503_within_the_bound_then_recovers(
    proxied: tuple[Proxy, Proc, str], pg_url: str
) -> None:
    proxy, proc, token = proxied
    fire(proc, token, 20)  # warm the pool: its connections are the ones that will stall
    count_before = len(stored_accounts(pg_url))

    proxy.stall()
    assert_all_unavailable(fire(proc, token, 24))
    assert len(stored_accounts(pg_url)) == count_before

    proxy.up()
    assert_resumes(proc, token)
    assert proc.popen.poll() is None


def test_outage_in_the_middle_of_writes_leaves_no_partial_rows(
    proxied: tuple[Proxy, Proc, str], pg_url: str
) -> None:
    """Imports in flight when the database goes: each is all there or not there at all.
    The database goes once some imports have landed and comes back once one was refused,
    whatever the machine's speed (a fixed 0.3 s let all 120 land first on a fast run)."""
    proxy, proc, token = proxied
    keys = [f"{i + 1000:064x}" for i in range(400)]
    results: dict[str, int] = {}

    def one(key: str) -> None:
        with httpx.Client(
            verify=TLS, base_url=proc.base_url, headers={"Authorization": token}, timeout=60
        ) as c:
            r = c.post("/dogecoin", json={"private_key": key})
            results[key] = r.status_code
            assert r.status_code in (200, 503), r.text

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        futures = [pool.submit(one, k) for k in keys]
        wait_for(lambda: list(results.values()).count(200) >= 20, "20 imports landed")
        proxy.down()
        wait_for(lambda: 503 in list(results.values()), "an import refused while down")
        proxy.up()
        for f in futures:
            f.result()
    assert 200 in results.values() and 503 in results.values(), results
    stored = stored_accounts(pg_url)  # each opens: no half-written row
    assert len(stored) == len(set(stored))
    ok = sum(1 for s in results.values() if s == 200)
    # A 200 is always stored; a 503 may have committed just before its connection
    # was cut (the answer was lost, not the row): never more rows than requests.
    assert ok <= len(stored) <= len(keys)
