"""A highly available PostgreSQL of the test's own: pg_auto_failover (Debian's
`postgresql-15-auto-failover`), its monitor and two nodes, a primary and its
synchronous standby, each a `pg_autoctl` process running its PostgreSQL, on free ports
in one temporary directory. The test starts and stops it; no system service is
touched, and nothing is left: the processes are stopped (or killed, with the log
semaphore each `pg_autoctl` holds), the directory removed. docs/deploy.md
("PostgreSQL failover") is the recipe this follows.

PostgreSQL refuses to run as root: when the tests do, the cluster belongs to the
`postgres` user (`setpriv`, which executes the command itself, so a signal sent to
the process reaches `pg_autoctl`).

A node dies by `kill`: every process of it (its `pg_autoctl`, its PostgreSQL, every
backend) stopped at once, then killed, as if the machine were gone.

Without pg_auto_failover these tests skip, naming the package; CI sets
CHAINKEYS_TEST_REQUIRE_FAILOVER=1 (and .ci/run installs it), so they fail instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import glob
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg  # type: ignore[import-untyped]
import pytest
from tests.conftest import free_port, wait_for

REQUIRE = bool(os.environ.get("CHAINKEYS_TEST_REQUIRE_FAILOVER"))
INSTALL = "apt-get install postgresql-15-auto-failover"
DATABASE = "chainkeys"
USER = "postgres"

# The monitor decides a failover from its health checks (by default every 5 s, a node
# unhealthy after 20 s without a report, 30 s for a primary to drain): shortened, a
# failover takes about 5 s on one machine instead of 51 s (bench/failover.py measured
# both; docs/deploy.md discusses them).
MONITOR_SETTINGS = {
    "pgautofailover.health_check_period": "1000",
    "pgautofailover.health_check_timeout": "1000",
    "pgautofailover.health_check_max_retries": "1",
    "pgautofailover.health_check_retry_delay": "500",
    "pgautofailover.node_considered_unhealthy_timeout": "2000",
    "pgautofailover.primary_demote_timeout": "2000",
    "pgautofailover.startup_grace_period": "1",
}
# Every node: small (pg_autoctl sizes shared_buffers from the machine's memory), quick
# to promote (a standby retries its WAL source every 5 s by default, and a promotion
# waits for that retry). fsync off: the tests kill processes, never the machine, so
# what PostgreSQL wrote is in the page cache whatever fsync does; a commit still waits
# for the standby to have written it.
NODE_SETTINGS = {
    "shared_buffers": "16MB",
    "max_connections": "60",
    "fsync": "off",
    "wal_retrieve_retry_interval": "200ms",
}
PRIMARY_STATES = ("primary", "wait_primary", "single")


def installed() -> Path:
    """PostgreSQL's directory of programs, where pg_auto_failover's extension is
    installed (skips, or fails where CI requires it, when it is not)."""
    libs = sorted(glob.glob("/usr/lib/postgresql/*/lib/pgautofailover.so"))
    why = None
    if shutil.which("pg_autoctl") is None or not libs:
        why = f"pg_auto_failover is not installed: {INSTALL} (Debian)"
    elif os.geteuid() == 0 and shutil.which("setpriv") is None:
        why = "setpriv (util-linux) is needed to run PostgreSQL as the postgres user"
    if why is not None:
        if REQUIRE:
            pytest.fail(why)
        pytest.skip(why)
    return Path(libs[-1]).parent.parent / "bin"


def descendants(root: int) -> list[int]:
    """`root` and every process below it (by parent id, as /proc tells now)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(parent, []).append(int(entry))
    found, i = [root], 0
    while i < len(found):
        found.extend(children.get(found[i], []))
        i += 1
    return found


@dataclass
class Node:
    name: str
    port: int
    pgdata: Path
    log: Path
    popen: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"


@dataclass
class AutoFailover:
    """The monitor and the nodes; `start` makes them, `stop` ends them all."""

    bindir: Path
    base: Path
    as_user: list[str]
    node_settings: dict[str, str] = field(default_factory=lambda: dict(NODE_SETTINGS))
    monitor_settings: dict[str, str] = field(default_factory=lambda: dict(MONITOR_SETTINGS))
    monitor: Node = field(init=False)
    nodes: list[Node] = field(init=False)
    semaphores: set[int] = field(default_factory=set)
    _loop: asyncio.AbstractEventLoop | None = None
    _thread: threading.Thread | None = None
    _conn: Any = None
    _asking: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        def node(name: str) -> Node:
            return Node(name, free_port(), self.base / name, self.base / f"{name}.log")

        self.monitor = node("monitor")
        self.nodes = [node("node1"), node("node2")]

    @property
    def env(self) -> dict[str, str]:
        """pg_autoctl keeps its configuration, state and pid files under the XDG
        directories, and PostgreSQL its socket where PG_REGRESS_SOCK_DIR says: all here."""
        return {
            **os.environ,
            "XDG_CONFIG_HOME": str(self.base / "config"),
            "XDG_DATA_HOME": str(self.base / "share"),
            "XDG_RUNTIME_DIR": str(self.base / "run"),
            "PG_REGRESS_SOCK_DIR": str(self.base),
            "PGHOST": "127.0.0.1",  # pg_autoctl's own connections to its PostgreSQL
            "PATH": f"{self.bindir}:/usr/sbin:/usr/bin:/sbin:/bin",  # this PostgreSQL's
        }

    @property
    def monitor_uri(self) -> str:
        return f"postgres://autoctl_node@{self.monitor.address}/pg_auto_failover?sslmode=disable"

    def url(self) -> str:
        """chainkeys' URL: every node, the one that takes writes chosen per connection
        (what `pg_autoctl show uri --formation default` prints, with the user)."""
        hosts = ",".join(n.address for n in self.nodes)
        return f"postgresql://{USER}@{hosts}/{DATABASE}?target_session_attrs=read-write"

    def _run(self, *args: str) -> str:
        done = subprocess.run(
            [*self.as_user, *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        if done.returncode != 0:
            raise AssertionError(f"{' '.join(args)} failed: {done.stdout}{done.stderr}")
        return done.stdout

    def _initdb(self, node: Node, settings: dict[str, str]) -> None:
        self._run(
            str(self.bindir / "initdb"),
            "-D",
            str(node.pgdata),
            "-U",
            USER,
            "--auth=trust",
            "-E",
            "UTF8",
            "--no-sync",
        )
        # postgresql.auto.conf is read last: these win over pg_autoctl's own file
        lines = "".join(f"{k} = '{v}'\n" for k, v in settings.items())
        auto = node.pgdata / "postgresql.auto.conf"
        auto.write_text(lines)
        if self.as_user:
            shutil.chown(auto, USER, USER)

    def _spawn(self, node: Node, *args: str) -> None:
        with node.log.open("ab") as out:
            node.popen = subprocess.Popen(
                [*self.as_user, "pg_autoctl", *args, "--pgdata", str(node.pgdata)],
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )

    def start(self) -> None:
        self._initdb(self.monitor, {**self.node_settings, **self.monitor_settings})
        self._spawn(
            self.monitor,
            "create",
            "monitor",
            "--pgport",
            str(self.monitor.port),
            "--hostname",
            "127.0.0.1",
            "--auth",
            "trust",
            "--no-ssl",
            "--run",
        )
        self._connect_monitor()
        first = self.nodes[0]
        self._initdb(first, self.node_settings)  # the standby is a copy of it (pg_basebackup)
        for node in self.nodes:
            self._spawn(
                node,
                "create",
                "postgres",
                "--pgport",
                str(node.port),
                "--listen",
                "127.0.0.1",
                "--hostname",
                "127.0.0.1",
                "--name",
                node.name,
                "--dbname",
                DATABASE,
                "--monitor",
                self.monitor_uri,
                "--auth",
                "trust",
                "--no-ssl",
                "--run",
            )
            if node is first:
                wait_for(
                    lambda: self.states().get(first.name) == ("single", "single"),
                    "the first node running alone",
                )
                # the standby's base backup starts with a checkpoint, spread over minutes
                # by default: what initdb and pg_autoctl wrote is flushed now instead
                self.execute(first, "CHECKPOINT")
        self.wait_replicating(first)

    def _connect_monitor(self) -> None:
        """One connection to the monitor, held by a loop of its own (state is asked of
        it every few milliseconds while a test waits)."""
        loop = self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=loop.run_forever, daemon=True)
        self._thread.start()

        async def connect() -> Any:
            return await asyncpg.connect(
                f"postgresql://{USER}@{self.monitor.address}/pg_auto_failover", timeout=5
            )

        def ready() -> bool:
            if self.monitor.popen is not None and self.monitor.popen.poll() is not None:
                raise AssertionError(f"the monitor exited: {self.monitor.log.read_text()}")
            try:
                if self._conn is None:
                    self._conn = self._call(connect())
                return bool(
                    self._call(
                        self._conn.fetchval(
                            "SELECT count(*) FROM pg_extension WHERE extname = 'pgautofailover'"
                        )
                    )
                )
            except (OSError, asyncpg.PostgresError):
                return False

        wait_for(ready, "the pg_auto_failover monitor")

    def _call(self, coro: Any) -> Any:
        assert self._loop is not None
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(30)

    def states(self) -> dict[str, tuple[str, str]]:
        """Each node's reported and assigned state, as the monitor has them."""
        with self._asking:  # one statement at a time on the connection (threads ask too)
            rows = self._call(
                self._conn.fetch(
                    "SELECT nodename, reportedstate::text, goalstate::text FROM pgautofailover.node"
                )
            )
        return {str(r[0]): (str(r[1]), str(r[2])) for r in rows}

    def node(self, name: str) -> Node:
        return next(n for n in self.nodes if n.name == name)

    def primary(self) -> Node | None:
        """The node that takes writes (reported so, and assigned so), if one does."""
        for name, (reported, goal) in self.states().items():
            if reported == goal and reported in PRIMARY_STATES:
                return self.node(name)
        return None

    def other(self, node: Node) -> Node:
        return next(n for n in self.nodes if n is not node)

    def wait_replicating(self, primary: Node) -> None:
        """Until `primary` is primary with the other node its synchronous standby."""
        want = {
            primary.name: ("primary", "primary"),
            self.other(primary).name: ("secondary", "secondary"),
        }
        wait_for(lambda: self.states() == want, f"{primary.name} primary, with its standby")

    def synchronous(self, node: Node) -> str:
        """`node`'s synchronous_standby_names (empty: commits wait for no standby)."""
        return str(self.sql(node, "SHOW synchronous_standby_names"))

    def sql(self, node: Node, query: str, *args: Any) -> Any:
        """One value, asked of `node` on a connection of its own."""
        return self.fetch(node, query, *args)[0][0]

    def execute(self, node: Node, query: str) -> None:
        self.fetch(node, query)

    def fetch(self, node: Node, query: str, *args: Any) -> list[Any]:
        """The rows of `query` on `node` (on a connection of its own)."""

        async def ask() -> list[Any]:
            conn = await asyncpg.connect(
                f"postgresql://{USER}@{node.address}/{DATABASE}", timeout=5
            )
            try:
                return list(await conn.fetch(query, *args))
            finally:
                await conn.close()

        return list(self._call(ask()))

    def kill(self, node: Node, lag: float = 0.0) -> None:
        """The machine gone: every process of `node` stopped at once (so none commits
        or starts another meanwhile), then killed. `lag` (bench/failover.py): seconds
        for which the standby hears nothing before, as if the network between them were
        that far behind (its WAL senders stopped first)."""
        assert node.popen is not None
        for pid in descendants(node.popen.pid):
            self._note_semaphore(pid)
        stopped: list[int] = []
        if lag:
            for pid in descendants(node.popen.pid):
                with contextlib.suppress(OSError):
                    if b"walsender" in Path(f"/proc/{pid}/cmdline").read_bytes():
                        os.kill(pid, signal.SIGSTOP)
                        stopped.append(pid)
            time.sleep(lag)
        while True:
            new = [pid for pid in descendants(node.popen.pid) if pid not in stopped]
            if not new:
                break
            for pid in new:  # nothing else in this loop: microseconds for them all
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGSTOP)
            stopped.extend(new)
        for pid in stopped:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        node.popen.wait(30)
        node.popen = None

    def _note_semaphore(self, pid: int) -> None:
        """pg_autoctl's log semaphore (System V: it outlives a killed process), as its
        processes have it in their environment."""
        with contextlib.suppress(OSError):
            for item in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0"):
                if item.startswith(b"PG_AUTOCTL_LOG_SEMAPHORE="):
                    self.semaphores.add(int(item.split(b"=", 1)[1]))

    def run(self, node: Node) -> None:
        """`pg_autoctl run` on a node again (it rejoins as the monitor says)."""
        self._spawn(node, "run")

    def stop(self) -> None:
        """Every node, then the monitor: asked to stop (PostgreSQL's fast shutdown),
        killed if one has not within 30 s; the semaphores of killed ones removed."""
        if self._conn is not None:
            with contextlib.suppress(Exception):
                self._call(self._conn.close(timeout=5))
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(30)
            self._loop.close()
        for node in [*self.nodes, self.monitor]:
            if node.popen is None:
                continue
            node.popen.terminate()
            try:
                node.popen.wait(30)
                node.popen = None
            except subprocess.TimeoutExpired:
                self.kill(node)
        uid = str(self.base.stat().st_uid)
        for line in Path("/proc/sysvipc/sem").read_text().splitlines()[1:]:
            semid, cuid = line.split()[1], line.split()[6]
            if int(semid) in self.semaphores and cuid == uid:  # still there, and ours
                subprocess.run(["ipcrm", "-s", semid], capture_output=True, check=False)


@contextlib.contextmanager
def auto_failover(
    node_settings: dict[str, str] | None = None, monitor_settings: dict[str, str] | None = None
) -> Iterator[AutoFailover]:
    """A started cluster (node1 primary, node2 its synchronous standby), stopped and
    removed after the block. `node_settings`, `monitor_settings`: instead of the
    tests' (bench/failover.py measures with fsync on, and with the monitor's defaults)."""
    bindir = installed()
    base = Path(tempfile.mkdtemp(prefix="chainkeys-ha-"))
    as_user: list[str] = []
    if os.geteuid() == 0:
        shutil.chown(base, USER)
        as_user = ["setpriv", f"--reuid={USER}", f"--regid={USER}", "--init-groups", "--"]
    nodes = dict(NODE_SETTINGS) if node_settings is None else node_settings
    monitor = dict(MONITOR_SETTINGS) if monitor_settings is None else monitor_settings
    cluster = AutoFailover(bindir, base, as_user, nodes, monitor)
    try:
        cluster.start()
        yield cluster
    finally:
        try:
            cluster.stop()
        finally:
            shutil.rmtree(base, ignore_errors=True)
