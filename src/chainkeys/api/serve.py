"""How chainkeys is served: Granian's public API, with every bound of the HTTP layer.

Granian (hyper underneath) bounds what the application never sees: the request
head's size (`MAX_HEAD_BYTES`, 431 above it, pipelined heads included) and
header count (100), and a deadline for the head (`head_timeout_seconds`; an
idle kept-alive connection is closed after it too). The body's size and
deadline are enforced in `api/transport.py`. What belongs to the TLS
terminator in front is listed in docs/deploy.md.
"""

from __future__ import annotations

import ctypes
import errno
import http.client
import logging
import multiprocessing
import os
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from granian.constants import HTTPModes, Interfaces, Loops
from granian.http import HTTP1Settings

from chainkeys import logs
from chainkeys.config import Settings
from chainkeys.errors import StartupError

PR_SET_PDEATHSIG = 1  # linux/prctl.h
SUPERVISOR_PID = "CHAINKEYS_SUPERVISOR_PID"
MAX_HEAD_BYTES = 16 * 1024  # request line + headers, as Node and uvicorn's h11 default


def http1(settings: Settings) -> HTTP1Settings:
    return HTTP1Settings(
        header_read_timeout=int(settings.head_timeout_seconds * 1000),
        keep_alive=True,
        max_buffer_size=MAX_HEAD_BYTES,
    )


def options(settings: Settings) -> dict[str, Any]:
    """Granian settings shared by `chainkeys serve` and the test suite's server."""
    return {
        "interface": Interfaces.ASGI,
        "http": HTTPModes.http1,
        "http1_settings": http1(settings),
        "websockets": False,  # an upgrade request is an ordinary request (and refused)
        "log_access": False,  # chainkeys writes its own access line
    }


def die_with_parent() -> None:
    """In a worker: end when the supervising process ends, however it ends.

    Granian runs the app in worker processes; if the supervisor is killed
    (SIGKILL, OOM) a worker would otherwise go on serving on its own.
    """
    if not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    # The supervisor may have died while this worker was still starting (before prctl):
    # compare with its pid, written before any worker was spawned, not with the parent
    # this worker sees now (by then init, or a subreaper).
    supervisor = os.environ.get(SUPERVISOR_PID)
    if supervisor not in (None, str(os.getpid()), str(os.getppid())):
        os.kill(os.getpid(), signal.SIGKILL)


def claim_port(host: str, port: int) -> socket.socket:
    """Make sure no other server answers on (host, port); return a lock to hold while
    serving (closing it, or the process ending however it ends, releases it).

    Granian binds every worker with SO_REUSEPORT, so a second `chainkeys serve` on
    a port in use would silently share it (each answering a share of the
    requests, with another store behind it). Two checks:
    - a lock per (host, port): a Unix socket bound in Linux's abstract namespace,
      which no other process can bind while this one lives, which leaves no file
      behind and which the kernel releases on any exit, kill -9 included (it is
      per network namespace, as the port is);
    - a bind with SO_REUSEADDR (never SO_REUSEPORT), which fails if anything at
      all listens there but not for the connections a stopped server left in
      TIME_WAIT: a restart right after a stop must work.

    Raises:
        StartupError: the port is in use or cannot be bound, in one line.
    """
    lock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        lock.bind(f"\0chainkeys-port-{host}-{port}")
    except OSError:
        lock.close()
        raise StartupError(
            f"port {port} on {host} is in use by another chainkeys server; "
            "choose another with --port or CHAINKEYS_PORT"
        ) from None
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    probe = socket.socket(family, socket.SOCK_STREAM)
    probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        probe.bind((host, port))
    except OSError as exc:
        lock.close()
        why = {
            errno.EADDRINUSE: "is in use by another program",
            errno.EACCES: "needs privileges to bind",
            errno.EADDRNOTAVAIL: "is not an address of this machine",
        }.get(exc.errno or 0, f"cannot be bound ({exc.strerror})")
        where = (
            f"{host} (port {port})"
            if exc.errno == errno.EADDRNOTAVAIL
            else f"port {port} on {host}"
        )
        raise StartupError(
            f"{where} {why}; choose another with --port/--host or CHAINKEYS_PORT/CHAINKEYS_HOST"
        ) from None
    finally:
        probe.close()
    return lock


class WhenServing:
    """Runs `then` once, when the server first answers `/livez` (its start-up lines
    are out by then), or when serving ends without it: the first token's block is
    the last thing a start prints, never lost among the server's lines."""

    POLL_SECONDS = 0.1
    SETTLE_SECONDS = logs.BufferedStderrHandler.FLUSH_SECONDS + 0.1

    def __init__(self, host: str, port: int, then: Callable[[], None]) -> None:
        wildcard = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}  # noqa: S104 - to reach it
        self.host = wildcard.get(host, host)
        self.port, self.then = port, then
        self._lock, self._done = threading.Lock(), False
        self._stop = threading.Event()
        threading.Thread(target=self._watch, name="when-serving", daemon=True).start()

    def _watch(self) -> None:
        while not self._stop.wait(self.POLL_SECONDS):
            if self._answers():
                self._stop.wait(self.SETTLE_SECONDS)  # the workers' buffered lines
                self.fire()
                return

    def _answers(self) -> bool:
        conn = http.client.HTTPConnection(self.host, self.port, timeout=1)
        try:
            conn.request("GET", "/livez")
            return conn.getresponse().status == 200
        except OSError:
            return False
        finally:
            conn.close()

    def fire(self) -> None:
        with self._lock:
            if self._done:
                return
            self._done = True
        self._stop.set()
        logs.flush()
        self.then()


def serve_metrics(host: str, port: int) -> None:
    """/metrics on its own listener (a thread of the supervising process), merging every
    worker's files: for an internal address the API's clients cannot reach."""
    from prometheus_client import CollectorRegistry, start_http_server
    from prometheus_client import multiprocess as mp

    registry = CollectorRegistry()
    mp.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
    try:
        start_http_server(port, host, registry=registry)
    except OSError as exc:
        raise StartupError(
            f"the metrics listener {host}:{port} cannot be bound ({exc.strerror}); "
            "choose another CHAINKEYS_METRICS_PORT"
        ) from None


METRICS_PREFIX = "chainkeys-metrics-"


def sweep_metrics_dirs() -> None:
    """Remove the metrics directories of servers that ended without running code (kill
    -9, a power cut): each is named after its server's process id."""
    for path in Path(tempfile.gettempdir()).glob(f"{METRICS_PREFIX}*-*"):
        pid = path.name.removeprefix(METRICS_PREFIX).partition("-")[0]
        try:
            if not pid.isdigit() or path.stat().st_uid != os.getuid():
                continue
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(path, ignore_errors=True)
        except OSError:
            continue  # alive under another user, or gone meanwhile


def worker_count(settings: Settings, workers: int) -> int:
    """`serve --workers`: `workers` itself, or for 0 (auto, the default) one per core this
    process may run on (its CPU affinity: a container's cpuset; a CFS quota such as
    `docker --cpus` is not seen, give --workers there).

    Why every core by default: a worker is one Python event loop, and a signature's
    CPU (key, hash, JSON, the audit row) is spent in it; a Go peer uses every core
    (bench/README.md, issue 56). Several workers are safe on both engines: on
    PostgreSQL they are replicas; on SQLite each groups its writes into one COMMIT
    and the database's write lock takes the processes' batches in turn
    (docs/deploy.md). Under shamir each process is unsealed on its own: one.
    """
    if workers > 0:
        return workers
    if settings.key_provider == "shamir":
        return 1
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def serve(settings: Settings, workers: int) -> None:
    """Run the API in `workers` processes (0: auto, `worker_count`) until SIGINT/SIGTERM
    (the caller claimed the port: `claim_port`).

    With several workers, each writes its metrics to a fresh shared directory and
    `/metrics` merges them. The workers are spawned, not forked, so each imports
    prometheus_client afresh with that directory set (it picks its value store
    at import).
    """
    workers = worker_count(settings, workers)
    if workers > 1 and settings.rate_limit_per_second and settings.redis_url is None:
        logging.getLogger("chainkeys").warning(
            "rate limit: %d workers each count on their own (a token gets up to %d times "
            "CHAINKEYS_RATE_LIMIT_PER_SECOND); set CHAINKEYS_REDIS_URL to share one budget",
            workers,
            workers,
        )
    shared: str | None = None
    os.environ[SUPERVISOR_PID] = str(os.getpid())  # the workers' parent (die_with_parent)
    if workers > 1 or settings.metrics_port is not None:
        sweep_metrics_dirs()
        shared = tempfile.mkdtemp(prefix=f"{METRICS_PREFIX}{os.getpid()}-")  # 0700, ours
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = shared
        multiprocessing.set_start_method("spawn", force=True)
    try:
        if settings.metrics_port is not None:
            serve_metrics(settings.metrics_host, settings.metrics_port)
        run_granian(settings, workers)
    finally:
        if shared is not None:  # every exit that runs code: a clean stop, an error
            remove_dir(Path(shared))
            os.environ.pop("PROMETHEUS_MULTIPROC_DIR", None)


def remove_dir(path: Path, tries: int = 50) -> None:
    """Remove a directory that a worker still ending may write one last file into (then
    the removal finds it not empty, and tries again)."""
    for _ in range(tries):
        shutil.rmtree(path, ignore_errors=True)
        if not path.exists():
            return
        time.sleep(0.1)


def run_granian(settings: Settings, workers: int) -> None:
    from granian import Granian

    Granian(
        "chainkeys.api.app:app_factory",
        factory=True,
        address=settings.host,
        port=settings.port,
        workers=workers,
        # explicit: Loops.auto takes whichever loop happens to be installed (rloop
        # first), so what runs would depend on the environment, not the settings
        loop=Loops.uvloop if settings.event_loop == "uvloop" else Loops.asyncio,
        log_dictconfig=logs.dict_config(settings.log_level, settings.log_json),
        workers_kill_timeout=max(1, round(settings.shutdown_timeout)),
        **options(settings),
    ).serve()
