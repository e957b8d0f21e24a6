"""Server processes under test: start, wait until healthy, measure RSS, stop."""

from __future__ import annotations

import os
import resource
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        tree.setdefault(ppid, []).append(int(entry))
    return tree


def process_tree(pid: int) -> list[int]:
    tree, out, todo = _children(), [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(tree.get(p, []))
    return out


def rss_kb(pid: int) -> int:
    """Resident set of a process, in KiB (0 if it is gone)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


@dataclass
class Server:
    """A running server (chainkeys or the baseline), one or several worker processes."""

    name: str
    popen: subprocess.Popen[bytes]
    port: int
    log: Path
    pids: list[int] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def tree_rss_kb(self) -> int:
        """RSS summed over the server's processes (supervisor and workers)."""
        return sum(rss_kb(p) for p in self.pids)

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(30)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(10)


def start(
    name: str,
    args: list[str],
    env: dict[str, str],
    log: Path,
    workers: int,
    python: str = sys.executable,
) -> Server:
    """Start `python <args>`, wait for GET /healthz = 200 and for all workers to be up.
    `python`: another interpreter (a git ref's own venv, bench/refs.py)."""
    port = free_port()
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("CHAINKEYS_", "BENCH_"))}
    full_env = {**clean, "PYTHONPATH": str(REPO), **env}
    with log.open("ab") as out:
        popen = subprocess.Popen(
            [python, *args, "--port", str(port)],
            env=full_env,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=REPO,
        )
    server = Server(name, popen, port, log)
    deadline = time.monotonic() + 120
    healthy = 0
    while time.monotonic() < deadline:
        if popen.poll() is not None:
            raise RuntimeError(f"{name} exited with {popen.returncode}; see {log}")
        try:
            with urllib.request.urlopen(f"{server.url}/healthz", timeout=2) as resp:
                healthy += resp.status == 200
        except (urllib.error.URLError, OSError):
            time.sleep(0.1)
            continue
        pids = process_tree(popen.pid)
        # uvicorn's supervisor plus N workers (multiprocessing may add a resource tracker).
        if healthy >= 3 and (workers == 1 or len(pids) >= workers + 1):
            server.pids = pids
            return server
        time.sleep(0.2)
    server.stop()
    raise RuntimeError(f"{name} did not become healthy; see {log}")


class RssSampler:
    """Peak RSS of a server's process tree, sampled every 50 ms in a thread."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.peak_kb = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak_kb = max(self.peak_kb, self.server.tree_rss_kb())
            self._stop.wait(0.05)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak_kb = max(self.peak_kb, self.server.tree_rss_kb())


def _busy_jiffies() -> int:
    """CPU time spent by the whole machine (all cores), in clock ticks."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields[:8]
    return user + nice + system + irq + softirq + steal


def _tree_jiffies(pids: list[int]) -> int:
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total


def _own_seconds() -> float:
    """CPU of this process and its waited-for children (wrk)."""
    me, kids = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


class CpuMeter:
    """Cores used by the server, and by everything else but the server and wrk (noise)."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.server_cores = 0.0
        self.other_cores = 0.0

    def __enter__(self) -> CpuMeter:
        self._t = time.monotonic()
        self._busy = _busy_jiffies()
        self._srv = _tree_jiffies(self.server.pids)
        self._own = _own_seconds()
        return self

    def __exit__(self, *exc: object) -> None:
        hz = os.sysconf("SC_CLK_TCK")
        seconds = max(time.monotonic() - self._t, 1e-6)
        server = (_tree_jiffies(self.server.pids) - self._srv) / hz
        total = (_busy_jiffies() - self._busy) / hz
        own = _own_seconds() - self._own
        self.server_cores = server / seconds
        self.other_cores = max(0.0, total - server - own) / seconds


def wait_quiet(max_seconds: float, threshold: float = 0.3, window: float = 0.5) -> float:
    """Wait (at most `max_seconds`) until the machine's load is below `threshold` cores.

    Called while the servers are idle, so the load measured is other work on
    the machine. Returns the last load seen.
    """
    hz = os.sysconf("SC_CLK_TCK")
    deadline = time.monotonic() + max_seconds
    while True:
        before = _busy_jiffies()
        time.sleep(window)
        load = (_busy_jiffies() - before) / hz / window
        if load < threshold or time.monotonic() >= deadline:
            return load
