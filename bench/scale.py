"""Cost as the store grows (issue 65): a filled store against an empty one, in one run.

    python -m bench.scale [--tenth] [--accounts N] [--tenants T] [--audit-rows M]
                          [--engine sqlite|postgresql|both] [-n 300] [--rounds 3] [--out DIR]

The filled store (defaults: 1,000,000 accounts, 1,000 tenants, 10,000,000 audit rows;
`--tenth` a tenth of each): T tenants, each issued a token by chainkeys
(`TokenService.create`, what `chainkeys token create` runs, its audit row included);
N/T Cosmos accounts in each, written straight to `accounts` (bench/preload.py
`generate_spread`: real keys, sealed and MACed as chainkeys writes them, the tenants'
accounts interleaved in runs of 50); and M audit events, the tenants' in turn, appended
by chainkeys' own insert (`Audit.insert` over a `Shared` transaction, the sign-batch
path: each row MACed by the store's gate, 5,000 a transaction) and linked by its own
chaining round (`link_committed`), so `chainkeys audit verify` passes on them. The empty
store: one tenant of `--empty-accounts` accounts (250: a deep page needs a full page
after 90 % of the tenant) and `--empty-audit-rows` events (2,000), made the same way.
On PostgreSQL both get ANALYZE after the fill (what autovacuum would do).

Measured on each store, in process (chainkeys' ASGI app called as bench/asgi_cost.py
calls it, no HTTP, background rounds stopped), `--rounds` rounds taking turns between
the two stores, each request timed alone with time.perf_counter (the median is
reported), on the first tenant:

- get: GET /cosmos/{name}, a random account of the tenant;
- sign: POST /dogecoin/{address}/sign-message (bench/run.py PARITY_KEY, imported first);
- list-first: GET /cosmos; list-deep: GET /cosmos?cursor=…, the cursor the API returned
  90 % of the way into the tenant (or before its last full page);
- create: POST /cosmos {};
- start: the app's start-up (lifespan: open_services and the background tasks).

Then once each: `audit verify` (audit/chain.py `verify`, which the command runs, timed in
process: rows/s), `db copy` (bootstrap `copy_between`, which the command runs: SQLite into
a new SQLite file, PostgreSQL into a new PostgreSQL database), and disk per account and per
audit row (SQLite: dbstat, the pages of each table and its indexes; PostgreSQL:
pg_total_relation_size). Each is reported filled/empty; a request or the start above the
target (1.25 x) is named, and so is anything whose cost (per request, per start, per
row) grew by more than ln(n filled)/ln(n empty): faster than log n.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import platform
import statistics
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import orjson

from bench import preload, procs
from bench.asgi_cost import _lifespan, _scope
from bench.icount import _requests, _serve
from bench.run import PARITY_KEY

TARGET = 1.25  # filled / empty, per request (issue 65)
REQUESTS = ("get", "sign", "list-first", "list-deep", "create")
SIGN = "sign-dogecoin-message"
FULL = {"accounts": 1_000_000, "tenants": 1_000, "audit_rows": 10_000_000}
AUDIT_BATCH = 5_000  # audit rows a transaction
PG_URL = "postgresql://postgres@127.0.0.1:5432/test"


@dataclass
class Store:
    label: str  # "empty" or "filled"
    settings: Any  # chainkeys.config.Settings
    tenants: int
    accounts: int
    audit_rows: int
    copy_to: str  # the URL `db copy` fills
    token: str = ""
    names: list[str] = field(default_factory=list)
    deep_cursor: str = ""
    fill_s: dict[str, float] = field(default_factory=dict)
    samples: dict[str, list[float]] = field(default_factory=dict)  # seconds each
    once: dict[str, float] = field(default_factory=dict)  # verify, copy, disk

    @property
    def per_tenant(self) -> int:
        return self.accounts // self.tenants


async def _fill_accounts(db: Any, ids: list[str], per_tenant: int, data_dir: Path) -> list[str]:
    """preload's MACed rows, inserted through the store's own connection (either engine)."""
    from sqlalchemy import insert, select

    from chainkeys.store.sql import Prepared
    from chainkeys.store.tables import accounts, meta

    async with db.read() as tx:
        key = meta.c.key == "integrity_key"
        sealed = (await tx.execute(select(meta.c.value).where(key))).first()[0]
    integrity = preload.integrity_material(data_dir, bytes(sealed))
    material = preload.master_material(data_dir)
    stmt = Prepared(insert(accounts), preload.COLUMNS)
    names: list[str] = []
    for rows, sampled in preload.generate_spread(ids, per_tenant, material, integrity):
        params = [dict(zip(preload.COLUMNS, row, strict=True)) for row in rows]
        async with db.write() as tx:
            await tx.execute_many(stmt, params)
        names += sampled
    return names


async def _fill_audit(db: Any, ids: list[str], actors: list[str], count: int) -> None:
    """`count` events, the tenants' in turn, appended by chainkeys' insert (MACed by the
    gate), a batch per transaction as a sign batch appends them."""
    from chainkeys.audit.repository import Audit, AuditEvent
    from chainkeys.store.shared import Shared

    base = int(time.time() * 1000) - count
    for start in range(0, count, AUDIT_BATCH):
        async with db.write() as tx:
            shared = Shared(tx)
            for i in range(start, min(count, start + AUDIT_BATCH)):
                t = i % len(ids)
                create = i % 10 == 0
                details = None if create else {"kind": "message", "digest": os.urandom(32).hex()}
                event = AuditEvent(
                    tenant_id=ids[t],
                    action="create" if create else "sign",
                    outcome="ok",
                    created_ms=base + i,
                    family="cosmos" if create else "dogecoin",
                    account_name=f"D{os.urandom(17).hex()[:33]}",
                    request_id=os.urandom(16).hex(),
                    actor_token_id=actors[t],
                    details=None if details is None else json.dumps(details),
                )
                await Audit.insert(shared, event)
            await shared.flush()


async def build(store: Store) -> None:
    """The store, made and filled (see the module docstring); each step's seconds."""
    from sqlalchemy import text

    from chainkeys.audit.chain import link_committed
    from chainkeys.bootstrap import open_services

    started = time.perf_counter()
    svc = await open_services(store.settings, create=True)
    try:
        ids: list[str] = []
        actors: list[str] = []
        for i in range(store.tenants):
            row, token = await svc.tokens.create(f"scale-{i:05d}", label="bench.scale")
            ids.append(row.tenant_id)
            actors.append(row.id)
            store.token = store.token or token
        store.fill_s["tenants"] = _lap(started)
        began = time.perf_counter()
        store.names = await _fill_accounts(svc.db, ids, store.per_tenant, store.settings.data_dir)
        store.fill_s["accounts"] = _lap(began)
        began = time.perf_counter()
        await _fill_audit(svc.db, ids, actors, store.audit_rows)
        store.fill_s["audit insert"] = _lap(began)
        began = time.perf_counter()
        gate = svc.barrier.integrity
        if gate is None:  # never: open_services opens the barrier
            raise RuntimeError("the barrier holds no integrity key")
        await link_committed(svc.db, gate)
        store.fill_s["audit link"] = _lap(began)
        if store.settings.database_url is not None:
            async with svc.db.write() as tx:
                await tx.execute(text("ANALYZE"))
    finally:
        await svc.close()


def _lap(since: float) -> float:
    return time.perf_counter() - since


async def _call(app: Any, method: str, path: str, token: str, body: bytes = b"") -> Any:
    """One request; its JSON answer (an error unless 200)."""
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = _scope(method, path, token)
    scope["headers"] = [(k, v) for k, v in scope["headers"] if k != b"content-length"]
    scope["headers"].append((b"content-length", str(len(body)).encode()))
    await app(scope, receive, send)
    answer = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    if sent[0]["status"] != 200:
        raise RuntimeError(f"{method} {path}: {sent[0]['status']} {answer[:300]!r}")
    return orjson.loads(answer)


def _next_cursor(doc: Any) -> str | None:
    """The page's `next_cursor`, wherever the family's shape puts it."""
    if isinstance(doc, dict):
        if isinstance(doc.get("next_cursor"), str):
            return str(doc["next_cursor"])
        for value in doc.values():
            found = _next_cursor(value)
            if found is not None:
                return found
    return None


class Running:
    """chainkeys' app on a store, started (its start-up timed), background rounds stopped."""

    def __init__(self, store: Store) -> None:
        self.store = store

    async def __aenter__(self) -> Any:
        from chainkeys.api import background
        from chainkeys.api.app import create_app

        self.app = create_app(self.store.settings)
        started = time.perf_counter()
        self.inbox, self.task = await _lifespan(self.app)
        self.store.samples.setdefault("start", []).append(_lap(started))
        await background.stop(background.running())
        return self.app

    async def __aexit__(self, *exc: object) -> None:
        await self.inbox.put({"type": "lifespan.shutdown"})
        await self.task


async def prepare(store: Store) -> None:
    """The signer imported, and the deep page's cursor as the API hands it out."""
    settings = store.settings
    async with Running(store) as app:
        body = json.dumps({"private_key": PARITY_KEY}).encode()
        await _call(app, "POST", "/dogecoin", store.token, body)
        left = max(
            0, min(int(store.per_tenant * 0.9), store.per_tenant - settings.list_default_limit)
        )
        cursor = ""
        while left > 0:
            limit = min(settings.list_max_limit, left)
            after = f"&cursor={quote(cursor)}" if cursor else ""
            page = await _call(app, "GET", f"/cosmos?limit={limit}{after}", store.token)
            cursor = _next_cursor(page) or ""
            left -= limit
        store.deep_cursor = cursor
    store.samples.clear()  # the first start paid for the imports


async def one_round(store: Store, n: int, work: Path, first: int) -> None:
    """n requests of each kind (after a few unmeasured), each timed alone."""
    deep = f"/cosmos?cursor={quote(store.deep_cursor)}" if store.deep_cursor else "/cosmos"
    makers = {
        "get": _requests("get", store.names, work),
        "sign": _requests(SIGN, store.names, work),
        "list-first": lambda i: ("GET", "/cosmos", b""),
        "list-deep": lambda i: ("GET", deep, b""),
        "create": _requests("create-cosmos", store.names, work),
    }
    warm = max(3, n // 10)
    async with Running(store) as app:
        for case in REQUESTS:
            times = store.samples.setdefault(case, [])
            for i in range(first, first + warm + n):
                started = time.perf_counter()
                await _serve(app, 1, makers[case], store.token, first=i)
                if i >= first + warm:
                    times.append(_lap(started))


async def once(store: Store) -> None:
    """audit verify, db copy and the disk, each measured once."""
    from sqlalchemy import text

    from chainkeys.audit.chain import verify
    from chainkeys.bootstrap import copy_between, open_admin

    admin = await open_admin(store.settings, keyed=True)
    try:
        if admin.integrity is None:
            raise RuntimeError("no integrity key")
        started = time.perf_counter()
        verdict = await verify(admin.db, admin.integrity)
        spent = _lap(started)
        if not verdict.ok:
            raise RuntimeError(f"audit verify failed: {verdict.broken}")
        store.once["verify rows"] = verdict.rows
        store.once["verify s"] = spent
        async with admin.db.read() as tx:
            for table in ("accounts", "audit"):
                count = (await tx.execute(text(f"SELECT count(*) FROM {table}"))).first()[0]
                store.once[f"{table} rows"] = count
                store.once[f"{table} bytes"] = await _bytes(tx, table, store)
    finally:
        await admin.close()
    started = time.perf_counter()
    report = await copy_between(store.settings, store.settings.db_url, store.copy_to)
    store.once["copy s"] = _lap(started)
    store.once["copy rows"] = sum(report.counts.values())


async def _bytes(tx: Any, table: str, store: Store) -> int:
    """A table's size on disk with its indexes."""
    from sqlalchemy import text

    if store.settings.database_url is not None:
        sql = f"SELECT pg_total_relation_size('{table}')"
    else:
        sql = (
            "SELECT SUM(s.pgsize) FROM dbstat s JOIN sqlite_master m ON s.name = m.name "
            f"WHERE m.tbl_name = '{table}'"
        )
    return int((await tx.execute(text(sql))).first()[0])


def _median_us(store: Store, case: str) -> float:
    return statistics.median(store.samples[case]) * 1e6


def table(empty: Store, filled: Store) -> tuple[list[list[Any]], list[str]]:
    """[metric, empty, filled, filled/empty cost] rows, and what grew too fast."""
    rows: list[list[Any]] = []
    named: list[str] = []
    by_accounts = math.log(filled.accounts) / math.log(max(empty.accounts, 2))

    def judge(metric: str, ratio: float, limit: float, target: float | None) -> None:
        if target is not None and ratio > target:
            named.append(f"{metric}: {ratio:.2f}x, over the {target}x target")
        if ratio > limit:
            named.append(f"{metric}: {ratio:.2f}x grows faster than log n (limit {limit:.2f}x)")

    for case in REQUESTS:
        e, f = _median_us(empty, case), _median_us(filled, case)
        rows.append([f"{case} (µs, median)", e, f, f / e])
        judge(case, f / e, by_accounts, TARGET)
    e, f = (statistics.median(s.samples["start"]) * 1e3 for s in (empty, filled))
    rows.append(["start (ms, median)", e, f, f / e])
    judge("start", f / e, by_accounts, TARGET)
    for what, rows_key, s_key, unit in (
        ("audit verify", "verify rows", "verify s", "rows/s"),
        ("db copy", "copy rows", "copy s", "rows/s"),
    ):
        e, f = (s.once[rows_key] / s.once[s_key] for s in (empty, filled))
        n_e, n_f = empty.once[rows_key], filled.once[rows_key]
        rows.append([f"{what} ({unit})", e, f, e / f])
        judge(f"{what} per row", e / f, math.log(n_f) / math.log(max(n_e, 2)), None)
    rows.append(["db copy (s)", empty.once["copy s"], filled.once["copy s"], None])
    for table_, unit in (("accounts", "account"), ("audit", "audit row")):
        e, f = (s.once[f"{table_} bytes"] / s.once[f"{table_} rows"] for s in (empty, filled))
        rows.append([f"disk (bytes/{unit})", e, f, f / e])
    return rows, named


def render(engine: str, empty: Store, filled: Store, rows: list[list[Any]]) -> str:
    sizes = (
        f"{filled.accounts:,} accounts, {filled.tenants:,} tenants, "
        f"{filled.audit_rows:,} audit rows (empty: {empty.accounts:,} accounts, "
        f"{empty.audit_rows:,} audit rows)"
    )
    lines = [f"{engine}: {sizes}", "", "| metric | empty | filled | filled/empty cost |"]
    lines.append("|---|---|---|---|")
    for metric, e, f, ratio in rows:
        shown = "" if ratio is None else f"{ratio:.2f}x"
        lines.append(f"| {metric} | {_num(e)} | {_num(f)} | {shown} |")
    fill = ", ".join(f"{k} {v:.1f} s" for k, v in filled.fill_s.items())
    lines += ["", f"filling the filled store: {fill}"]
    return "\n".join(lines)


def _num(value: float) -> str:
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.1f}" if abs(value) >= 10 else f"{value:.2f}"


async def measure(empty: Store, filled: Store, n: int, rounds: int, work: Path) -> None:
    for store in (empty, filled):
        await build(store)
    for store in (empty, filled):
        await prepare(store)
    for r in range(rounds):
        for store in (empty, filled):
            await one_round(store, n, work, first=r * 10 * n + 1)
    for store in (empty, filled):
        await once(store)


def run_engine(engine: str, args: argparse.Namespace, root: Path) -> dict[str, Any]:
    from chainkeys.config import Settings

    pg_admin_url = args.postgres_url
    made: list[str] = []
    if engine == "postgresql":
        why = preload.pg_reachable(pg_admin_url)
        if why is not None:
            print(f"postgresql: skipped ({why})")
            return {"skipped": why}

    def store(label: str, tenants: int, accounts: int, audit_rows: int) -> Store:
        data_dir = root / engine / label
        data_dir.mkdir(parents=True, mode=0o700)
        if engine == "sqlite":
            url, copy_to = None, f"sqlite:///{root / engine / (label + '-copy.db')}"
        else:
            names = [f"ck_scale_{os.getpid()}_{label}", f"ck_scale_{os.getpid()}_{label}_copy"]
            for name in names:
                preload.pg_admin(pg_admin_url, f'CREATE DATABASE "{name}"')
                made.append(name)
            url, copy_to = (preload.pg_url(pg_admin_url, name) for name in names)
        settings = Settings(
            data_dir=data_dir,
            database_url=url,
            sqlite_synchronous=args.sync,
            log_level="WARNING",
        )
        return Store(label, settings, tenants, accounts, audit_rows, copy_to)

    try:
        empty = store("empty", 1, args.empty_accounts, args.empty_audit_rows)
        filled = store("filled", args.tenants, args.accounts, args.audit_rows)
        asyncio.run(measure(empty, filled, args.n, args.rounds, root / engine))
    finally:
        for name in made:
            preload.pg_admin(pg_admin_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    rows, named = table(empty, filled)
    print(render(engine, empty, filled, rows))
    print("grows too fast: " + ("; ".join(named) if named else "nothing"))
    print()
    return {
        "sizes": {
            "filled": {
                "accounts": filled.accounts,
                "tenants": filled.tenants,
                "audit_rows": filled.audit_rows,
            },
            "empty": {"accounts": empty.accounts, "tenants": 1, "audit_rows": empty.audit_rows},
        },
        "rows": rows,
        "grows_too_fast": named,
        "fill_s": filled.fill_s,
        "measured": {
            s.label: {**s.once, **{f"{k} n": len(v) for k, v in s.samples.items()}}
            for s in (empty, filled)
        },
    }


def machine() -> str:
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor(),
    )
    return f"{platform.system()} {platform.release()}, {os.cpu_count()} cores ({cpu}), Python {platform.python_version()}"


def commit() -> str:
    done = subprocess.run(
        ["git", "describe", "--always", "--dirty"],
        cwd=procs.REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout.strip() or "unknown"


def main() -> None:
    from chainkeys import logs

    parser = argparse.ArgumentParser(
        prog="python -m bench.scale", description=__doc__.split("\n", 1)[0]
    )
    parser.add_argument("--tenth", action="store_true", help="a tenth of the default sizes")
    parser.add_argument("--accounts", type=int, help=f"accounts in all ({FULL['accounts']:,})")
    parser.add_argument("--tenants", type=int, help=f"tenants ({FULL['tenants']:,})")
    parser.add_argument("--audit-rows", type=int, help=f"audit rows ({FULL['audit_rows']:,})")
    parser.add_argument("--empty-accounts", type=int, default=250)
    parser.add_argument("--empty-audit-rows", type=int, default=2_000)
    parser.add_argument("--engine", choices=("sqlite", "postgresql", "both"), default="sqlite")
    parser.add_argument("-n", type=int, default=300, help="timed requests of each kind a round")
    parser.add_argument("--rounds", type=int, default=3, help="rounds, the two stores in turn")
    parser.add_argument(
        "--sync", choices=("NORMAL", "FULL"), default="NORMAL", help="SQLite synchronous"
    )
    parser.add_argument("--out", type=Path, default=procs.REPO / "bench" / "results")
    args = parser.parse_args()
    for key, full in FULL.items():
        if getattr(args, key) is None:
            setattr(args, key, full // 10 if args.tenth else full)
    if args.tenants < 1 or args.accounts < args.tenants:
        parser.error("need at least one tenant and one account a tenant")
    args.postgres_url = os.environ.get("CHAINKEYS_TEST_POSTGRES_URL", PG_URL)
    for name in [k for k in os.environ if k.startswith("CHAINKEYS_")]:
        del os.environ[name]  # the stores' settings are the ones given here
    logs.configure("WARNING")
    engines = ["sqlite", "postgresql"] if args.engine == "both" else [args.engine]
    doc: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "commit": commit(),
        "machine": machine(),
        "args": {k: v for k, v in vars(args).items() if k not in ("out", "postgres_url")},
        "target": TARGET,
        "engines": {},
    }
    with tempfile.TemporaryDirectory(
        prefix="chainkeys-scale-", dir=os.environ.get("BENCH_TMPDIR")
    ) as tmp:
        for engine in engines:  # written after each engine: a long run keeps what it got
            started = time.perf_counter()
            doc["engines"][engine] = run_engine(engine, args, Path(tmp))
            doc["engines"][engine]["run_s"] = round(_lap(started), 1)
            args.out.mkdir(parents=True, exist_ok=True)
            (args.out / "scale.json").write_text(json.dumps(doc, indent=2) + "\n")
    print(f"written: {args.out / 'scale.json'}")


if __name__ == "__main__":
    main()
