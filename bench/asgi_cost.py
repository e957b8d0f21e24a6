"""CPU per request of chainkeys and the baseline, in-process: no HTTP, no wrk, no other load.

    python -m bench.asgi_cost [--size 1000] [--sync NORMAL] [-n 3000]

Calls each ASGI app directly with a prepared request, many times, and divides
the process CPU time by the count. What this leaves out (uvicorn, httptools,
sockets) is the same for both; what remains is exactly the work each app adds.
A complement to the wrk run: it isolates the apps from the machine's noise.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import preload
from bench.baseline import Baseline


def _scope(method: str, path: str, token: str) -> dict[str, Any]:
    path, _, query = path.partition("?")
    return {
        "type": "http",
        "method": method,
        "path": path,
        "raw_path": path.encode(),
        "query_string": query.encode(),
        "root_path": "",
        "scheme": "http",
        "http_version": "1.1",
        "server": ("127.0.0.1", 8000),
        "client": ("127.0.0.1", 40000),
        "state": {},
        "headers": [
            (b"host", b"127.0.0.1:8000"),
            (b"authorization", f"Bearer {token}".encode()),
            (b"content-type", b"application/json"),
            (b"content-length", b"2"),
        ],
    }


async def _drive(app: Any, n: int, method: str, path: Callable[[], str], token: str) -> float:
    body = b"{}" if method == "POST" else b""

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    statuses: list[int] = []

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            statuses.append(message["status"])

    started = time.process_time()
    for _ in range(n):
        await app(_scope(method, path(), token), receive, send)
    spent = time.process_time() - started
    if set(statuses) != {200}:
        raise RuntimeError(f"unexpected statuses {sorted(set(statuses))}")
    return spent / n * 1e6


async def _lifespan(app: Any) -> tuple[asyncio.Queue[dict[str, Any]], asyncio.Task[None]]:
    inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    outbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    await inbox.put({"type": "lifespan.startup"})
    task = asyncio.create_task(app({"type": "lifespan", "state": {}}, inbox.get, outbox.put))
    started = await outbox.get()
    if started["type"] != "lifespan.startup.complete":
        raise RuntimeError(f"startup failed: {started}")
    return inbox, task


async def measure(
    data_dir: Path, ds: preload.Dataset, sync: str, n: int, log_level: str = "WARNING"
) -> dict[str, dict[str, float]]:
    from chainkeys.api.app import create_app
    from chainkeys.config import Settings

    names = ds.names_file.read_text().split()
    settings = Settings(data_dir=data_dir, sqlite_synchronous=sync, log_level=log_level)
    apps = {"chainkeys": create_app(settings), "baseline": Baseline(data_dir, sync)}
    cases: list[tuple[str, str, Callable[[], str], int]] = [
        ("get", "GET", lambda: "/cosmos/" + random.choice(names), n),
        ("list-first", "GET", lambda: "/cosmos", n // 4),
        ("list-deep", "GET", lambda: f"/cosmos?cursor={ds.deep_cursor}", n // 4),
        *(
            (f"create-{f}", "POST", (lambda f=f: f"/{f}"), n // 3)
            for f in ("cosmos", "dogecoin", "eos", "litecoin")
        ),
    ]
    out: dict[str, dict[str, float]] = {}
    for name, app in apps.items():
        inbox, task = await _lifespan(app)
        for label, method, path, count in cases:
            await _drive(app, max(count // 10, 10), method, path, ds.token)  # warm up
            out.setdefault(label, {})[name] = await _drive(app, count, method, path, ds.token)
        await inbox.put({"type": "lifespan.shutdown"})
        await task
    return out


def main() -> None:
    from chainkeys import logs

    parser = argparse.ArgumentParser(
        prog="python -m bench.asgi_cost", description=__doc__.split("\n", 1)[0]
    )
    parser.add_argument("--size", type=int, default=1000, help="accounts in the tenant")
    parser.add_argument("--sync", choices=("FULL", "NORMAL"), default="NORMAL")
    parser.add_argument(
        "-n", type=int, default=3000, help="requests per case (lists: n/4, creates: n/3)"
    )
    parser.add_argument(
        "--log-level",
        default="INFO",
        help="chainkeys' log level (INFO: an access line per request)",
    )
    args = parser.parse_args()
    logs.configure(args.log_level)
    with tempfile.TemporaryDirectory(
        prefix="chainkeys-asgi-cost-", dir=os.environ.get("BENCH_TMPDIR")
    ) as tmp:
        ds = preload.sqlite_dataset(Path(tmp), args.size)
        costs = asyncio.run(measure(ds.data_dir, ds, args.sync, args.n, args.log_level))
    report(
        f"CPU µs per request, in-process (tenant {args.size}, SQLite {args.sync}, "
        f"log {args.log_level})",
        costs,
        decimals=1,
    )


def report(title: str, costs: dict[str, dict[str, float]], decimals: int) -> None:
    """A case's cost for chainkeys and the baseline, and their ratio, a line each."""
    print(title)
    print(f"{'case':24} {'chainkeys':>11} {'baseline':>11} {'ratio':>7}")
    for label, by in costs.items():
        ck, base = by["chainkeys"], by["baseline"]
        print(f"{label:24} {ck:11.{decimals}f} {base:11.{decimals}f} {base / ck:7.2f}")


if __name__ == "__main__":
    main()
