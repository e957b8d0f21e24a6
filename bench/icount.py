"""Instructions per request, in process, counted by valgrind: a CPU yardstick without noise.

    python -m bench.icount [--cases create-cosmos,sign-dogecoin-message,get] [-n 100]

Why: on a shared 2-core machine wrk's req/s moves ±10 % from one round to the next
(bench/README.md), and so does the CPU time a request costs; a cut of 2 % cannot be
seen, and nor can a regression of that size. valgrind's callgrind counts the
instructions a process executes: the same count for the same code, inputs and
libraries, whatever else the machine is doing. So a count taken at one commit can be
compared with a count taken at another, on the same machine and interpreter.

How: each app (chainkeys' ASGI app and the lean baseline, `bench/baseline.py`) serves
`n` requests of a case in one process and `3n` in another, both under callgrind, called
directly as `bench/asgi_cost.py` does (no HTTP); the difference over `2n` is one
request's instructions, what both processes share (switching the count on and off)
cancelling out. Both
first serve `WARM` requests of the case (imports done lazily, caches filled, the
allocator settled) with callgrind's instrumentation off (`--instr-atstart=no`: start-up,
four billion instructions for chainkeys, runs about five times faster so), then stop
until the parent has switched it on (`callgrind_control -i on`; off again once the
requests are served, before the shutdown), with the survivors of a full collection
frozen (a collection of the oldest generation, millions of instructions, falls by chance
in one count or the other), and run with one hash seed (`PYTHONHASHSEED`: a dict's layout, so its instructions, move with the seed).

What it leaves out: the kernel's instructions (system calls, fsync), cache misses and
stalls, and everything between threads (Granian hands each request from its I/O thread to
the event loop; that hand-off and the GIL's are measured by wrk only). One request at a
time by default: then each create is its own group-commit batch (BEGIN and COMMIT of its
own, which under load a batch shares; `--together 20` serves twenty at once, about the
batches of 64 connections of creates under wrk).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench import preload, procs
from bench.asgi_cost import _lifespan, _scope, report
from bench.run import PARITY_KEY, sign_requests

CASES = (
    "get",
    "import",
    "create-cosmos",
    "create-litecoin",
    "sign-cosmos-transfer",
    "sign-dogecoin-message",
    "sign-eos-message",
)
SYNC = "NORMAL"
WARM = 20  # requests served first, in both processes
READY = "chainkeys-icount: warm"  # the child's line once warm, instrumentation still off
DONE = "chainkeys-icount: served"  # the child's line once the counted requests are served
_COLLECTED = re.compile(r"Collected\s*:\s*(\d+)")
_IMPORT_KEY = "5f2b5d8a3c1e4f6a7b9c0d1e2f3a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9e0f1a"


def collected(stderr: str) -> int:
    """The instruction count callgrind printed ("Collected : N"); an error if none."""
    found = _COLLECTED.findall(stderr)
    if not found:
        raise RuntimeError(f"callgrind printed no count:\n{stderr[-2000:]}")
    return int(found[-1])


def _requests(case: str, names: list[str], work: Path) -> Any:
    """A function of the request's number giving (method, path, body) for `case`."""
    if case == "get":
        pick = random.Random(1)
        return lambda i: ("GET", "/cosmos/" + pick.choice(names), b"")
    if case == "import":  # a distinct key each time (the range order keeps it valid)
        return lambda i: (
            "POST",
            "/" + preload.FAMILY,
            json.dumps({"private_key": _IMPORT_KEY[:-8] + f"{i:08x}"}).encode(),
        )
    if case.startswith("create-"):
        return lambda i: ("POST", "/" + case.removeprefix("create-"), b"{}")
    path, template = sign_requests(work)[case]
    text = template.read_text()
    return lambda i: ("POST", path, text.replace("SEQ", str(i + 1)).encode())


async def _serve(
    app: Any, n: int, make: Any, token: str, together: int = 1, first: int = 0
) -> None:
    """`n` requests numbered from `first`, `together` at a time (chainkeys' writes then
    share a batch)."""
    statuses: list[int] = []

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            statuses.append(message["status"])

    async def one(i: int) -> None:
        method, path, body = make(i)

        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": body, "more_body": False}

        scope = _scope(method, path, token)
        scope["headers"] = [(k, v) for k, v in scope["headers"] if k != b"content-length"]
        scope["headers"].append((b"content-length", str(len(body)).encode()))
        await app(scope, receive, send)

    for start in range(first, first + n, together):
        await asyncio.gather(*(one(i) for i in range(start, min(start + together, first + n))))
    if set(statuses) != {200}:
        raise RuntimeError(f"unexpected statuses {sorted(set(statuses))}")


def import_signers(ds: preload.Dataset) -> None:
    """PARITY_KEY in every family, through chainkeys' app, before the store is copied."""
    from chainkeys.api.app import create_app
    from chainkeys.config import Settings

    body = json.dumps({"private_key": PARITY_KEY}).encode()

    async def run() -> None:
        app = create_app(Settings(data_dir=ds.data_dir, log_level="WARNING"))
        inbox, task = await _lifespan(app)
        families = ("cosmos", "dogecoin", "eos", "litecoin")
        await _serve(app, len(families), lambda i: ("POST", "/" + families[i], body), ds.token)
        await inbox.put({"type": "lifespan.shutdown"})
        await task

    asyncio.run(run())


def child(impl: str, case: str, n: int, work: Path, together: int) -> None:
    """Under callgrind: open a copy of the store and serve `n` requests of `case`."""
    from chainkeys import logs

    logs.configure("WARNING")
    meta = json.loads((work / "meta.json").read_text())
    names = meta["names"]
    make = _requests(case, names, work)

    async def run() -> None:
        if impl == "chainkeys":
            from chainkeys.api.app import create_app
            from chainkeys.config import Settings

            app: Any = create_app(
                Settings(data_dir=work / "data", sqlite_synchronous=SYNC, log_level="WARNING")
            )
        else:
            from bench.baseline import Baseline

            app = Baseline(work / "data", SYNC)
        inbox, task = await _lifespan(app)
        if impl == "chainkeys":  # rounds on a clock (callgrind slows it 50x) are no request's
            from chainkeys.api import background

            await background.stop(background.running())
        await _serve(app, WARM, make, meta["token"], together)
        # A full collection now and the survivors frozen: a collection of the oldest
        # generation costs millions of instructions, and whether it falls inside the
        # `n` requests or the `3n` is chance (seen: a negative difference at n=4).
        gc.collect()
        gc.freeze()
        print(READY, flush=True)  # the parent switches callgrind's instrumentation on
        sys.stdin.readline()
        await _serve(app, n, make, meta["token"], together, first=WARM)
        print(DONE, flush=True)  # ... and off: the shutdown is no request's work
        sys.stdin.readline()
        await inbox.put({"type": "lifespan.shutdown"})
        await task

    asyncio.run(run())


def _until(child: subprocess.Popen[str], line: str) -> bool:
    """Read the child's stdout up to `line` (False at EOF: the child failed)."""
    while child.stdout:
        got = child.stdout.readline()
        if not got:
            return False
        if got.strip() == line:
            return True
    return False


def _instrument(pid: int, state: str) -> None:
    """Switch callgrind's instrumentation of `pid` on or off."""
    control = shutil.which("callgrind_control") or "callgrind_control"
    done = subprocess.run(
        [control, "-i", state, str(pid)], capture_output=True, text=True, timeout=120, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"callgrind_control failed: {done.stdout[-500:]}{done.stderr[-500:]}")


def count(impl: str, case: str, n: int, ds: preload.Dataset, tmp: Path, together: int = 1) -> int:
    """Instructions of one process serving `n` requests (a fresh copy of the store)."""
    work = tmp / f"{impl}-{case}-{n}"
    shutil.copytree(ds.data_dir, work / "data")
    names = ds.names_file.read_text().split()[:2000]
    (work / "meta.json").write_text(json.dumps({"token": ds.token, "names": names}))
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        raise SystemExit("bench.icount needs valgrind (Debian: apt-get install valgrind)")
    child = subprocess.Popen(
        [
            valgrind,
            "--tool=callgrind",
            "--callgrind-out-file=/dev/null",
            "--instr-atstart=no",
            sys.executable,
            "-m",
            "bench.icount",
            "--child",
            impl,
            case,
            str(n),
            str(work),
            str(together),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=procs.REPO,
        env={**os.environ, "PYTHONMALLOC": "malloc", "PYTHONHASHSEED": "0"},
    )
    try:
        ready = _until(child, READY)
        if ready:  # (else the child failed: its stderr says why, below)
            _instrument(child.pid, "on")
            if child.stdin is not None:
                child.stdin.write("\n")
                child.stdin.flush()
            if _until(child, DONE):
                _instrument(child.pid, "off")
        _, stderr = child.communicate("\n")
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    if child.returncode != 0 or not ready:
        raise RuntimeError(f"{impl} {case} failed:\n{stderr[-3000:]}")
    shutil.rmtree(work, ignore_errors=True)
    return collected(stderr)


def measure(cases: list[str], n: int, size: int, together: int = 1) -> dict[str, dict[str, float]]:
    """case -> impl -> instructions per request."""
    out: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(
        prefix="chainkeys-icount-", dir=os.environ.get("BENCH_TMPDIR")
    ) as name:
        tmp = Path(name)
        ds = preload.sqlite_dataset(tmp / "dataset", size)
        if any(c.startswith("sign-") for c in cases):
            import_signers(ds)
        for case in cases:
            for impl in ("chainkeys", "baseline"):
                one = count(impl, case, n, ds, tmp, together)
                three = count(impl, case, 3 * n, ds, tmp, together)
                out.setdefault(case, {})[impl] = (three - one) / (2 * n)
    return out


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        impl, case, n, work, together = sys.argv[2:7]
        child(impl, case, int(n), Path(work), int(together))
        return
    parser = argparse.ArgumentParser(
        prog="python -m bench.icount", description=__doc__.split("\n", 1)[0]
    )
    parser.add_argument("--cases", default=",".join(CASES), help=f"comma list of {CASES}")
    parser.add_argument("-n", type=int, default=100, help="requests (and 3n) per process")
    parser.add_argument("--size", type=int, default=1000, help="accounts in the tenant")
    parser.add_argument(
        "--together",
        type=int,
        default=1,
        help="requests in flight at once (16: chainkeys' writes share a batch, as under load)",
    )
    args = parser.parse_args()
    cases = [c for c in args.cases.split(",") if c]
    unknown = set(cases) - set(CASES)
    if unknown:
        parser.error(f"unknown cases: {', '.join(sorted(unknown))}")
    if args.n % args.together or WARM % args.together:
        parser.error(f"-n and {WARM} (the warm-up) must be multiples of --together")
    costs = measure(cases, args.n, args.size, args.together)
    report(
        f"instructions per request, in process (tenant {args.size}, SQLite {SYNC}, "
        f"n={args.n}, {args.together} at a time)",
        costs,
        decimals=0,
    )


if __name__ == "__main__":
    main()
