"""Shared fixtures: a real chainkeys server per backend, reached over real HTTP.

`server` is parametrised over SQLite and PostgreSQL, so every test that uses it
runs on both. PostgreSQL tests skip when no server is reachable, unless
CHAINKEYS_TEST_REQUIRE_POSTGRES is set (CI), where they fail instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import socket
import ssl
import threading
import time
import uuid
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
from granian.server.embed import Server as Granian

from chainkeys.api import serve
from chainkeys.api.app import create_app
from chainkeys.bootstrap import Services, open_services
from chainkeys.config import Settings
from tests.cli import chainkeys_cli as chainkeys_cli  # where the tests import it from

# Every httpx client gets this one TLS context: httpx builds a new one per client by
# default and loads the CA bundle into it (~50 ms each); the tests talk plain HTTP to
# their own servers, so the context is never used, only paid for.
TLS = ssl.create_default_context()

T = TypeVar("T")
ROOT = Path(__file__).resolve().parent.parent
PG_ADMIN_URL = os.environ.get(
    "CHAINKEYS_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)
REQUIRE_PG = bool(os.environ.get("CHAINKEYS_TEST_REQUIRE_POSTGRES"))
TEST_MASTER_KEY = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="  # 32 bytes, tests only
# A `chainkeys serve` a test starts runs one worker unless the test asks for more
# (`--workers N`, tests/process/test_process.py; the default, one per core, in
# test_serve_starts_one_worker_per_core): the tests count connections, kill and restart
# processes and time key rotations against one process, and 4 suites share 2 cores.
os.environ.setdefault("CHAINKEYS_WORKERS", "1")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The longest files first. `--dist loadfile` hands whole files to the workers in
    collection order (alphabetical), so a long file collected last is a tail the other
    workers wait out (minutes of CI). A file says how long it runs with
    `pytest.mark.long(seconds)`, measured with `scripts/test` (it prints the slowest);
    items of one file stay together and in order."""

    def seconds(item: pytest.Item) -> float:
        mark = item.get_closest_marker("long")
        return float(mark.args[0]) if mark is not None and mark.args else 0.0

    order = {id(item): n for n, item in enumerate(items)}
    items.sort(key=lambda item: (-seconds(item), order[id(item)]))
    kept = [item for item in items if _on_its_engine(item)]
    if len(kept) < len(items):
        config.hook.pytest_deselected(items=[item for item in items if not _on_its_engine(item)])
        items[:] = kept


def _on_its_engine(item: pytest.Item) -> bool:
    """False for the one of a pair `pytest.mark.one_engine` leaves out.

    Such a test's subject is the same on both engines: what the API answers to
    generated input (decoding, shapes, never a 5xx), or what a process does (a restart
    on a port in TIME_WAIT, its event loop); what is stored is checked on both by the
    other tests. Each case (the test's id without its engine) runs on one engine, the
    same every run, chosen by a stable digest of the id, so both engines get about
    half of the cases and every case runs once instead of twice. The engine is the
    parameter of the `server` fixture or of a file's own (`env`, `backend`)."""
    callspec = getattr(item, "callspec", None)
    if item.get_closest_marker("one_engine") is None or callspec is None:
        return True
    engine = next(
        (callspec.params[name] for name in ENGINE_FIXTURES if name in callspec.params), None
    )
    if engine not in BACKENDS:
        return True
    case = item.nodeid.replace(f"[{engine}-", "[").replace(f"-{engine}]", "]")
    case = case.replace(f"[{engine}]", "")
    pick = hashlib.sha256(case.encode()).digest()[0] % len(BACKENDS)
    return bool(engine == BACKENDS[pick])


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def _pg_admin(sql: str) -> None:
    import asyncpg  # type: ignore[import-untyped]

    conn = await asyncpg.connect(PG_ADMIN_URL.replace("+asyncpg", ""), timeout=3)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


def pg_available() -> str | None:
    """None when PostgreSQL answers, else why not."""
    try:
        asyncio.run(_pg_admin("SELECT 1"))
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


# One name prefix per run (the controller sets it before xdist starts its workers, which
# inherit it), so the end of the run can find what any of its processes left behind.
RUN_ID = os.environ.setdefault("CHAINKEYS_TEST_RUN", uuid.uuid4().hex[:8])
PG_PREFIX = f"chainkeys_test_{RUN_ID}_"
_made_databases: set[str] = set()


def make_pg_database() -> str:
    """A fresh, empty database; returns its URL. Dropped by `drop_pg_database`, and at
    the latest when this test process ends (a failed test's too)."""
    why = pg_available()
    if why is not None:
        msg = (
            f"PostgreSQL not reachable at {PG_ADMIN_URL} ({why}); set "
            "CHAINKEYS_TEST_POSTGRES_URL=postgresql://user@host:port/db to run these tests"
        )
        if REQUIRE_PG:
            pytest.fail(msg)
        pytest.skip(msg)
    name = f"{PG_PREFIX}{uuid.uuid4().hex[:12]}"
    _made_databases.add(name)
    asyncio.run(_pg_admin(f'CREATE DATABASE "{name}"'))
    base = PG_ADMIN_URL.rsplit("/", 1)[0]
    return f"{base}/{name}"


def drop_pg_database(url: str) -> None:
    name = url.rsplit("/", 1)[1]
    asyncio.run(_pg_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    _made_databases.discard(name)


async def _run_databases() -> list[str]:
    import asyncpg

    conn = await asyncpg.connect(PG_ADMIN_URL.replace("+asyncpg", ""), timeout=3)
    try:
        rows = await conn.fetch(
            "SELECT datname FROM pg_database WHERE starts_with(datname, $1)", PG_PREFIX
        )
    finally:
        await conn.close()
    return sorted(str(r["datname"]) for r in rows)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Nothing left behind: each process drops the databases it made and a failed test
    left; then the controller (the only process when xdist is off) checks that no
    database of this run remains, and fails the run if one does."""
    for name in sorted(_made_databases):
        drop_pg_database(f"{PG_ADMIN_URL.rsplit('/', 1)[0]}/{name}")
    if hasattr(session.config, "workerinput") or pg_available() is not None:
        return
    left = asyncio.run(_run_databases())
    if left:
        for name in left:
            drop_pg_database(f"{PG_ADMIN_URL.rsplit('/', 1)[0]}/{name}")
        session.config.get_terminal_writer().line(
            f"tests left PostgreSQL databases behind: {', '.join(left)}", red=True
        )
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@dataclass
class Server:
    """A chainkeys app served by Granian (embedded, as `chainkeys serve` configures
    it) in a background thread."""

    settings: Settings
    backend: str
    base_url: str = ""
    services: Services | None = None
    loop: asyncio.AbstractEventLoop | None = None
    _server: Granian | None = None
    _thread: threading.Thread | None = None
    tokens: dict[str, str] = field(default_factory=dict)

    def start(self) -> None:
        ready = threading.Event()
        port = free_port()

        def run() -> None:
            loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            self.loop = loop
            self.services = loop.run_until_complete(open_services(self.settings))
            app = create_app(self.settings, self.services)
            self._server = Granian(
                app,
                address="127.0.0.1",
                port=port,
                log_enabled=False,
                **serve.options(self.settings),
            )
            loop.call_soon(ready.set)
            loop.run_until_complete(self._server.serve())
            loop.run_until_complete(self.services.close())
            loop.close()

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()
        ready.wait(30)
        self.base_url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.base_url}/healthz", verify=TLS, timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        raise RuntimeError("test server did not start")

    def stop(self) -> None:
        if self._server is not None and self.loop is not None:
            self.loop.call_soon_threadsafe(self._server.stop)
        if self._thread is not None:
            self._thread.join(30)

    def call(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run a service coroutine on the server's own loop (where its connections live)."""
        assert self.loop is not None
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(30)

    def new_token(self, tenant: str | None = None) -> str:
        assert self.services is not None
        tenant = tenant or f"t-{uuid.uuid4().hex[:10]}"
        _, token = self.call(self.services.tokens.create(tenant, "test"))
        return token

    def client(self, token: str | None = None, bearer: bool = False) -> httpx.Client:
        headers = {}
        if token is not None:
            headers["Authorization"] = f"Bearer {token}" if bearer else token
        return httpx.Client(verify=TLS, base_url=self.base_url, headers=headers, timeout=30)


def backend_settings(backend: str, data_dir: Path, **overrides: Any) -> tuple[Settings, str | None]:
    pg_url = make_pg_database() if backend == "postgresql" else None
    env: dict[str, Any] = {"data_dir": data_dir, "master_key": TEST_MASTER_KEY}
    if pg_url:
        env["database_url"] = pg_url
    env.update(overrides)
    return Settings(**env), pg_url


BACKENDS = ["sqlite", "postgresql"]
ENGINE_FIXTURES = ("server", "env", "backend")  # the fixtures parametrised with BACKENDS


@pytest.fixture(scope="session", params=BACKENDS)
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    backend = request.param
    data_dir = tmp_path_factory.mktemp(f"data-{backend}")
    settings, pg_url = backend_settings(backend, data_dir)
    srv = Server(settings, backend)
    srv.start()
    yield srv
    srv.stop()
    if pg_url:
        drop_pg_database(pg_url)


@pytest.fixture(scope="module", params=BACKENDS)
def export_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    """A server of its own per module with export enabled (what tokens of every scope,
    export included, may then reach), on each engine."""
    with own_server(request.param, tmp_path_factory.mktemp("export"), export_enabled=True) as srv:
        yield srv


@contextlib.contextmanager
def own_server(backend: str, data_dir: Path, **overrides: Any) -> Iterator[Server]:
    """A started server of its own with these settings (its PostgreSQL database dropped
    after)."""
    settings, pg_url = backend_settings(backend, data_dir, **overrides)
    srv = Server(settings, backend)
    srv.start()
    try:
        yield srv
    finally:
        srv.stop()
        if pg_url:
            drop_pg_database(pg_url)


@pytest.fixture
def backend(request: pytest.FixtureRequest) -> str:
    """For tests that build their own servers/processes: parametrise with BACKENDS."""
    return str(request.param)


@pytest.fixture
def client(server: Server) -> Iterator[httpx.Client]:
    """A client with a token of its own fresh tenant."""
    with server.client(server.new_token()) as c:
        yield c


def wait_for(check: Callable[[], bool], what: str = "the change") -> float:
    """Seconds until `check()` holds: for a state another process or thread reaches in
    its own time (30 s ends a failing run; the seconds are not a measurement)."""
    started = time.monotonic()
    while not check():
        assert time.monotonic() - started < 30, f"never saw {what}"
        time.sleep(0.01)
    return time.monotonic() - started
