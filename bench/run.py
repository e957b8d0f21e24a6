"""The chainkeys benchmark: chainkeys against a lean baseline, under wrk, one command.

    python -m bench            # full run (~35 min): 1k and 1M tenants, 1 and 2 workers, SQLite + PostgreSQL
    python -m bench --quick    # seconds, small data: keeps the benchmark from rotting (the test suite runs it)

For each server configuration (backend, tenant size, workers, SQLite synchronous
mode) it prepares a fresh copy of a preloaded store, starts `chainkeys serve`
and then the baseline (bench/baseline.py) on the same copy of the data, drives
both with the same wrk scenarios and reports requests/s, p50, p99 and the
server's peak RSS, each chainkeys figure also as a ratio to the baseline's, then
checks the targets. Results: a table on stdout, results.md and results.json in
--out (default bench/results/).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime as dt
import json
import os
import platform
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path
from statistics import median
from typing import Any

from bench import baseline_pg, preload, procs, refs, wrk
from bench.preload import Dataset

DEFAULT_PG = "postgresql://postgres@127.0.0.1:5432/test"
# Issue 25's targets, against the lean baseline in the same run (req/s ratios; p99 ratio).
CREATE_TARGET, GET_TARGET, SIGN_TARGET, P99_TARGET = 0.8, 0.9, 0.7, 1.5
READS = ("get", "list-first", "list-deep")
CREATES = ("create-cosmos", "create-dogecoin", "create-eos", "create-litecoin")
# Sign scenarios: the account of PARITY_KEY in each family; "SEQ" becomes a number unique
# to each request (bench/lua/sign.lua), so every request signs different bytes.
SIGNS = (
    "sign-cosmos-transfer",
    "sign-cosmos-message",
    "sign-dogecoin-message",
    "sign-eos-message",
    "sign-litecoin-message",
)
ALL = (*READS, "mixed", "import", *CREATES, *SIGNS)
# scenario -> (lua script, request path; None: the family path)
SCRIPTS = {
    "get": "get",
    "list-first": "list",
    "list-deep": "list",
    "mixed": "mixed",
    "import": "import",
    **{c: "create" for c in CREATES},
    **{c: "sign" for c in SIGNS},
}


@dataclass(frozen=True)
class Config:
    """One server set-up; the baseline runs the same scenarios on SQLite configs."""

    backend: str  # sqlite | postgresql
    size: int
    workers: int
    sync: str  # SQLite synchronous (FULL | NORMAL); PostgreSQL: "-"
    scenarios: tuple[str, ...]

    @property
    def key(self) -> str:
        return f"{self.backend}-{size_label(self.size)}-w{self.workers}-{self.sync}"

    def baseline_key(self) -> str:
        """The baseline config chainkeys is compared with: its own (on PostgreSQL, the
        asyncpg baseline of bench/baseline_pg.py, for the reads it serves)."""
        return self.key


@dataclass
class Result:
    config: str
    impl: str  # chainkeys | baseline
    backend: str
    size: int
    workers: int
    sync: str
    scenario: str
    connections: int
    rps: float
    p50_ms: float
    p90_ms: float
    p99_ms: float
    max_ms: float
    requests: int
    errors: dict[str, int]
    rss_peak_mb: float
    server_cpu: float  # cores the server used while under load
    other_cpu: float  # cores used by everything but server and wrk (noise; PostgreSQL itself on PG)
    cpu_us: float  # server CPU per request, µs: the figure least moved by other load
    ratio: dict[str, float] = field(default_factory=dict)  # chainkeys / baseline


def of_rounds(results: list[Result]) -> Result:
    """A server's figures for a scenario from its rounds: the best round's (the least
    disturbed on a shared machine), its latencies the median of the rounds'. The best
    round's own p99 was luck for a server whose tail comes and goes: the baseline at
    NORMAL, whose checkpoints fsync inside a request, gave 28-364 ms in four rounds of
    one run (its best round 28), chainkeys 36-47 (bench/README.md)."""
    best = max(results, key=lambda r: r.rps)
    return dataclasses.replace(
        best, p50_ms=median(r.p50_ms for r in results), p99_ms=median(r.p99_ms for r in results)
    )


def size_label(n: int) -> str:
    if n >= 1_000_000 and n % 1_000_000 == 0:
        return f"{n // 1_000_000}M"
    if n >= 1000 and n % 1000 == 0:
        return f"{n // 1000}k"
    return str(n)


def plan(quick: bool, small: int, large: int, pg: bool, pg_large: bool) -> list[Config]:
    if quick:
        configs = [
            Config("sqlite", small, 1, "FULL", ALL),
            Config("sqlite", large, 1, "FULL", ("get", "list-first")),
        ]
        if pg:
            configs += [
                Config("postgresql", small, 1, "-", ("get", "create-cosmos")),
                Config("postgresql", small, 2, "-", ("create-cosmos",)),
            ]
        return configs
    configs = [
        Config("sqlite", small, 1, "FULL", ALL),
        Config("sqlite", large, 1, "FULL", (*READS, "mixed", "create-cosmos")),
        Config("sqlite", small, 2, "FULL", ("get", "list-first", "mixed", "create-cosmos")),
        Config("sqlite", small, 1, "NORMAL", ("mixed", "import", *CREATES, *SIGNS)),
    ]
    if pg:
        pg_set = ("get", "list-first", "mixed", "import", "create-cosmos")
        configs += [
            Config("postgresql", small, 1, "-", pg_set),
            Config("postgresql", small, 2, "-", pg_set),
        ]
        if pg_large:
            configs.append(Config("postgresql", large, 1, "-", ("get", "list-first", "list-deep")))
    return configs


# ---------------------------------------------------------------- running


class Bench:
    def __init__(self, args: argparse.Namespace, work: Path, out: Path) -> None:
        self.args = args
        self.work = work
        self.out = out
        self.wrk = wrk.ensure_wrk()
        self.results: list[Result] = []
        self.profiles: dict[str, dict[str, Any]] = {}
        self.parity: dict[str, dict[str, bool]] = {}
        self.failures: dict[str, str] = {}
        self.datasets: dict[tuple[str, int], Dataset] = {}
        self.pg_dbs: list[str] = []
        self.prefix = f"ckbench_{uuid.uuid4().hex[:8]}"
        self.src: Path | None = None
        self.sign_requests = sign_requests(work)
        self.refs = [refs.install(r, out / "refs", self.log) for r in args.against]
        # per ref server label: its token, its names file, the scenarios it cannot run
        self.ref_data: dict[str, tuple[str, Path, set[str]]] = {}
        if args.commit:
            # chainkeys from a clean export of one commit: edits in the work tree stay out.
            snap = work / "src-snapshot"
            snap.mkdir()
            # Resolved now: HEAD may move while the run goes on.
            args.commit = (
                _run(["git", "-C", str(procs.REPO), "rev-parse", "--short", args.commit])
                or args.commit
            )
            archive = subprocess.run(
                ["git", "-C", str(procs.REPO), "archive", "--format=tar", args.commit, "src"],
                capture_output=True,
                check=True,
            ).stdout
            subprocess.run(["tar", "-x", "-C", str(snap)], input=archive, check=True)
            self.src = snap / "src"

    def log(self, text: str) -> None:
        print(f"[bench {time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)

    # -- data

    def dataset(self, backend: str, size: int) -> Dataset:
        key = (backend, size)
        if key not in self.datasets:
            started = time.monotonic()
            env = self.chainkeys_env()
            if backend == "sqlite":
                ds = preload.sqlite_dataset(self.work, size, env=env)
            else:
                self.pg_dbs.append(f"{self.prefix}_tmpl_{size}")
                ds = preload.pg_dataset(self.work, size, self.args.pg_url, self.prefix, env=env)
            self.log(
                f"preloaded {backend} tenant of {size} accounts in {time.monotonic() - started:.1f}s"
            )
            self.datasets[key] = ds
        return self.datasets[key]

    @contextlib.contextmanager
    def fresh_store(self, cfg: Config, impl: str) -> Iterator[tuple[Path, dict[str, str]]]:
        """A private copy of the data set for one server run, removed afterwards."""
        ds = self.dataset(cfg.backend, cfg.size)
        run_dir = self.work / f"run-{cfg.key}-{impl}"
        shutil.copytree(ds.data_dir, run_dir)
        env: dict[str, str] = {}
        db = None
        if cfg.backend == "postgresql":
            db = f"{self.prefix}_run_{impl}"
            preload.pg_admin(self.args.pg_url, f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
            preload.pg_admin(
                self.args.pg_url, f'CREATE DATABASE "{db}" TEMPLATE "{ds.pg_template}"'
            )
            self.pg_dbs.append(db)
            env["CHAINKEYS_DATABASE_URL"] = preload.pg_url(self.args.pg_url, db)
        else:
            env["CHAINKEYS_SQLITE_SYNCHRONOUS"] = cfg.sync
        try:
            yield run_dir, env
        finally:
            shutil.rmtree(run_dir, ignore_errors=True)
            if db is not None:
                preload.pg_admin(self.args.pg_url, f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')

    def chainkeys_env(self) -> dict[str, str]:
        """Environment that makes `python -m chainkeys…` the chainkeys under test."""
        if self.src is None:
            return {}
        return {"PYTHONPATH": f"{self.src}{os.pathsep}{procs.REPO}"}

    # -- servers

    def start(self, cfg: Config, impl: str, data_dir: Path, env: dict[str, str]) -> procs.Server:
        log = self.out / "logs" / f"{cfg.key}-{impl}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        if impl == "chainkeys":
            args = [
                "-m",
                "chainkeys.cli",
                "serve",
                "--data-dir",
                str(data_dir),
                "--workers",
                str(cfg.workers),
            ]
            env = {**env, "CHAINKEYS_LOG_LEVEL": self.args.log_level, **self.chainkeys_env()}
        else:
            args = [
                "-m",
                "bench.baseline_pg" if cfg.backend == "postgresql" else "bench.baseline",
                "--data-dir",
                str(data_dir),
                "--workers",
                str(cfg.workers),
            ]
        return procs.start(f"{impl} {cfg.key}", args, env, log, cfg.workers)

    def wrk_env(self, cfg: Config, scenario: str, impl: str = "chainkeys") -> dict[str, str]:
        ds = self.dataset(cfg.backend, cfg.size)
        token, names = ds.token, ds.names_file
        if impl in self.ref_data:
            token, names, _ = self.ref_data[impl]
        if scenario in SIGNS:
            path, template = self.sign_requests[scenario]
            return {"BENCH_TOKEN": token, "BENCH_PATH": path, "BENCH_BODY": str(template)}
        family = (
            scenario.removeprefix("create-") if scenario.startswith("create-") else preload.FAMILY
        )
        path = f"/{family}"
        if scenario == "list-deep":
            path += f"?cursor={ds.deep_cursor}"
        return {"BENCH_TOKEN": token, "BENCH_PATH": path, "BENCH_NAMES": str(names)}

    def load(
        self,
        server: procs.Server,
        cfg: Config,
        scenario: str,
        seconds: float,
        impl: str = "chainkeys",
    ) -> wrk.Load:
        lua = wrk.script(SCRIPTS[scenario], self.work)
        return wrk.run(
            self.wrk,
            server.url,
            lua,
            self.wrk_env(cfg, scenario, impl),
            seconds=seconds,
            connections=self.args.connections,
            threads=self.args.threads,
        )

    def start_ref(self, ref: refs.Ref, cfg: Config, stack: contextlib.ExitStack) -> procs.Server:
        """The ref on a store of its own, filled to the config's size through its API."""
        data_dir = self.work / f"run-{cfg.key}-{ref.label}"
        env = {"CHAINKEYS_LOG_LEVEL": self.args.log_level}
        url = None
        if cfg.backend == "postgresql":  # an empty database of its own, filled through its API
            db = f"{self.prefix}_run_{ref.label}"
            preload.pg_admin(self.args.pg_url, f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
            preload.pg_admin(self.args.pg_url, f'CREATE DATABASE "{db}"')
            self.pg_dbs.append(db)
            stack.callback(
                preload.pg_admin, self.args.pg_url, f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)'
            )
            url = env["CHAINKEYS_DATABASE_URL"] = preload.pg_url(self.args.pg_url, db)
        else:
            env["CHAINKEYS_SQLITE_SYNCHRONOUS"] = cfg.sync
        token = refs.token(ref, data_dir, url)
        log = self.out / "logs" / f"{cfg.key}-{ref.label}.log"
        server = procs.start(
            f"{ref.label} {cfg.key}",
            [
                "-m",
                "chainkeys.cli",
                "serve",
                "--data-dir",
                str(data_dir),
                "--workers",
                str(cfg.workers),
            ],
            env,
            log,
            cfg.workers,
            python=ref.python,
        )
        stack.callback(shutil.rmtree, data_dir, True)
        stack.callback(server.stop)
        names = self.work / f"names-{cfg.key}-{ref.label}.txt"
        refs.fill(server.url, token, cfg.size, names)
        unsupported = {"list-deep"}  # its cursors are its own: no deep page prepared
        if any(s in SIGNS for s in cfg.scenarios):
            import_signers(server.url, token)
            for scenario, (path, template) in self.sign_requests.items():
                body = template.read_text().replace("SEQ", "1").encode()
                if not refs.supports(server.url, token, "POST", path, body):
                    unsupported.add(scenario)
        self.ref_data[ref.label] = (token, names, unsupported)
        self.log(
            f"{ref.label} {cfg.key} up with {cfg.size} accounts; not run there: "
            f"{', '.join(sorted(unsupported & set(cfg.scenarios))) or 'nothing'}"
        )
        return server

    def run_config(self, cfg: Config) -> None:
        """Start chainkeys (and the baseline, on its own copy) and take turns scenario by scenario.

        Both servers stay up; only one is under load at a time. Each scenario
        runs `rounds` times per server, alternating, and the best round counts:
        on a shared machine the least disturbed run is the truest one (its latencies
        are the median of the rounds': `of_rounds`).
        """
        impls = ["chainkeys"]
        if not self.args.no_baseline:  # (on PostgreSQL: reads only, bench/baseline_pg.py)
            impls.append("baseline")
        with contextlib.ExitStack() as stack:
            servers: dict[str, procs.Server] = {}
            for impl in impls:
                data_dir, env = stack.enter_context(self.fresh_store(cfg, impl))
                server = self.start(cfg, impl, data_dir, env)
                stack.callback(server.stop)
                servers[impl] = server
                self.log(f"{impl} {cfg.key} up (pids {server.pids})")
            if cfg.size <= 20_000:
                for ref in self.refs:
                    servers[ref.label] = self.start_ref(ref, cfg, stack)
            ds = self.dataset(cfg.backend, cfg.size)
            if "baseline" in servers:
                self.parity[cfg.key] = parity(
                    servers["chainkeys"].url,
                    servers["baseline"].url,
                    ds,
                    reads_only=cfg.backend == "postgresql",
                )
            if any(s in SIGNS for s in cfg.scenarios):
                for impl, server in servers.items():
                    if impl not in self.ref_data:
                        import_signers(server.url, ds.token)
                if "baseline" in servers and cfg.backend == "sqlite":
                    self.parity[cfg.key].update(
                        sign_parity(
                            servers["chainkeys"].url,
                            servers["baseline"].url,
                            ds.token,
                            self.sign_requests,
                        )
                    )
            for scenario in cfg.scenarios:
                rounds: dict[str, list[Result]] = {}
                for rnd in range(self.args.rounds):
                    for impl, server in servers.items():
                        if impl in self.ref_data and scenario in self.ref_data[impl][2]:
                            continue
                        if (
                            impl == "baseline"
                            and cfg.backend == "postgresql"
                            and scenario not in baseline_pg.READS
                        ):
                            continue
                        if rnd == 0 and self.args.warmup > 0:
                            self.load(server, cfg, scenario, self.args.warmup, impl)
                        result = self.measure(server, cfg, impl, scenario)
                        if self.args.rounds > 2:  # the spread between rounds: the noise
                            self.log(
                                f"    round {rnd + 1} {impl:9} {scenario:15} "
                                f"{result.rps:9.0f} req/s  p99 {result.p99_ms:7.2f} ms"
                            )
                        rounds.setdefault(impl, []).append(result)
                best = {impl: of_rounds(results) for impl, results in rounds.items()}
                for impl, result in best.items():
                    self.results.append(result)
                    flag = f"  ERRORS {result.errors}" if sum(result.errors.values()) else ""
                    self.log(
                        f"  {impl:9} {scenario:15} {result.rps:9.0f} req/s  p50 {result.p50_ms:6.2f} ms"
                        f"  p99 {result.p99_ms:7.2f} ms  rss {result.rss_peak_mb:6.1f} MB"
                        f"  other cpu {result.other_cpu:4.2f}{flag}"
                    )
                if scenario in self.args.profile:
                    try:
                        self.profile(servers["chainkeys"], cfg, scenario)
                    except Exception as exc:  # a profile is a diagnostic: never a lost config
                        self.log(f"  profiling {scenario} failed: {type(exc).__name__}: {exc}")

    def measure(self, server: procs.Server, cfg: Config, impl: str, scenario: str) -> Result:
        if self.args.quiet_wait > 0:
            procs.wait_quiet(self.args.quiet_wait)
        seconds = self.args.seconds
        for _ in range(3):
            with procs.RssSampler(server) as rss, procs.CpuMeter(server) as cpu:
                got = self.load(server, cfg, scenario, seconds, impl)
            if got.requests:
                break
            # No request completed in the window (a short --quick window on a machine
            # busy with other work): not a measurement; a longer window, said so.
            seconds *= 4
            self.log(f"  {impl} {scenario}: no request completed; again for {seconds:g} s")
        return Result(
            cfg.key,
            impl,
            cfg.backend,
            cfg.size,
            cfg.workers,
            cfg.sync,
            scenario,
            self.args.connections,
            round(got.rps, 1),
            got.p50_ms,
            got.p90_ms,
            got.p99_ms,
            got.max_ms,
            got.requests,
            got.errors,
            round(rss.peak_kb / 1024, 1),
            round(cpu.server_cores, 2),
            round(cpu.other_cores, 2),
            round(cpu.server_cores * 1e6 / got.rps, 1) if got.rps else 0.0,
        )

    def profile(self, server: procs.Server, cfg: Config, scenario: str) -> None:
        """py-spy (sampling, non-blocking) over one more load of the scenario; top frames kept."""
        pyspy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
        if not Path(pyspy).exists():
            self.log("  py-spy not found (pip install py-spy); not profiling")
            return
        label = f"{cfg.key}-{scenario}"
        raw = self.out / "profiles" / f"{label}.txt"
        raw.parent.mkdir(parents=True, exist_ok=True)
        seconds = max(3, int(self.args.seconds))
        spy = subprocess.Popen(
            [
                pyspy,
                "record",
                "--pid",
                str(server.popen.pid),
                "--subprocesses",
                "--nonblocking",
                "--rate",
                "250",
                "--duration",
                str(seconds),
                "--format",
                "raw",
                "-o",
                str(raw),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        time.sleep(0.5)
        self.load(server, cfg, scenario, seconds)
        _, err = spy.communicate(timeout=seconds + 60)
        if not raw.exists():
            self.log(f"  py-spy failed: {err.decode(errors='replace')[-300:]}")
            return
        # A non-blocking sample can read a frame mid-update: a name may hold stray bytes.
        summary = summarize_profile(raw.read_text(errors="replace"))
        self.profiles[label] = summary
        (raw.with_suffix(".top.txt")).write_text(format_profile(label, summary))
        self.log(f"  profiled {label}: {raw.with_suffix('.top.txt')}")

    def run(self, configs: list[Config]) -> None:
        for cfg in configs:
            try:
                self.run_config(cfg)
            except Exception as exc:  # one broken config must not lose the others' results
                self.failures[cfg.key] = f"{type(exc).__name__}: {exc}"
                self.log(f"{cfg.key} FAILED: {exc}")

    def cleanup(self) -> None:
        for db in self.pg_dbs:
            with contextlib.suppress(Exception):
                preload.pg_admin(self.args.pg_url, f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')


# ---------------------------------------------------------------- parity

# A fixed, valid private key: imported into both servers, it must give the same answers.
PARITY_KEY = "4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318"


def sign_requests(work: Path) -> dict[str, tuple[str, Path]]:
    """scenario -> (path, body template file) for the accounts of PARITY_KEY."""
    from coincurve import PublicKey

    from bench import lean

    pub = PublicKey.from_secret(bytes.fromhex(PARITY_KEY)).format(compressed=True)
    cosmos = lean.cosmos_address(pub)
    transfer = {
        "fromAddress": cosmos,
        "toAddress": "cosmos1q6hag67dl53wl99vzg42z8eyzfz2xlkvsrxukv",
        "amount": "1000",
        "denom": "uatom",
        "chainId": "cosmoshub-4",
        "sequence": "SEQ",
        "accountNumber": 1,
        "feeDenom": "uatom",
        "feeAmount": "500",
        "gasLimit": 200000,
        "memo": "bench",
        "timeoutHeight": 0,
    }
    message = {"message": "bench SEQ"}
    requests = {
        "sign-cosmos-transfer": (f"/cosmos/{cosmos}/sign-transfer", transfer),
        "sign-cosmos-message": (f"/cosmos/{cosmos}/sign-message", message),
        "sign-dogecoin-message": (f"/dogecoin/{lean.p2pkh_address(pub)}/sign-message", message),
        "sign-eos-message": (f"/eos/{lean.eos_name(pub)}/sign-message", message),
        "sign-litecoin-message": (f"/litecoin/{lean.p2wpkh_address(pub)}/sign-message", message),
    }
    out = {}
    for scenario, (path, body) in requests.items():
        template = work / f"{scenario}.json"
        # The sequence is a JSON number in the transfer: "SEQ" (quoted) becomes SEQ.
        template.write_text(json.dumps(body).replace('"SEQ"', "SEQ"))
        out[scenario] = (path, template)
    return out


def import_signers(url: str, token: str) -> None:
    """PARITY_KEY in every family (already there: fine)."""
    body = json.dumps({"private_key": PARITY_KEY}).encode()
    for family in ("cosmos", "dogecoin", "eos", "litecoin"):
        status, answer = _call(url, "POST", f"/{family}", token, body)
        if status not in (200, 409):
            raise RuntimeError(f"importing the signing key into {url}/{family}: {answer}")


def sign_parity(
    ck: str, base: str, token: str, requests: dict[str, tuple[str, Path]]
) -> dict[str, bool]:
    """The same request signed by both: byte-identical answers (RFC 6979 is deterministic)."""
    out = {}
    for scenario, (path, template) in requests.items():
        body = template.read_text().replace("SEQ", "1").encode()
        a = _call(ck, "POST", path, token, body)
        out[scenario] = a[0] == 200 and a == _call(base, "POST", path, token, body)
    return out


def _call(
    url: str, method: str, path: str, token: str, body: bytes | None = None
) -> tuple[int, Any]:
    import urllib.error
    import urllib.request

    req = urllib.request.Request(
        url + path,
        data=body,
        method=method,
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, _timeless(json.loads(resp.read()))
    except urllib.error.HTTPError as exc:
        return exc.code, _timeless(json.loads(exc.read() or b"null"))


def _timeless(value: Any) -> Any:
    """An answer without `created_at` (each server stamps its own rows)."""
    if isinstance(value, dict):
        return {k: _timeless(v) for k, v in value.items() if k != "created_at"}
    if isinstance(value, list):
        return [_timeless(v) for v in value]
    return value


def parity(ck: str, base: str, ds: Dataset, reads_only: bool = False) -> dict[str, bool]:
    """Do chainkeys and the baseline answer alike? (The baseline must do the same work.)"""
    out: dict[str, bool] = {}
    body = json.dumps({"private_key": PARITY_KEY}).encode()
    for family in () if reads_only else ("cosmos", "dogecoin", "eos", "litecoin"):
        a = _call(ck, "POST", f"/{family}", ds.token, body)
        out[f"import-{family}"] = a == _call(base, "POST", f"/{family}", ds.token, body)
        inner = a[1].get("data", {}) if isinstance(a[1], dict) else {}
        name = (inner.get("data") or {}).get("address") or inner.get("address", "")
        out[f"get-{family}"] = bool(name) and _call(
            ck, "GET", f"/{family}/{name}", ds.token
        ) == _call(base, "GET", f"/{family}/{name}", ds.token)
    name = ds.names_file.read_text().split()[0]
    for label, path in (
        ("get-preloaded", f"/cosmos/{name}"),
        ("list-first", "/cosmos"),
        ("list-deep", f"/cosmos?cursor={ds.deep_cursor}"),
    ):
        out[label] = _call(ck, "GET", path, ds.token) == _call(base, "GET", path, ds.token)
    return out


# ---------------------------------------------------------------- profiles


def _func(frame: str) -> str:
    """'handler (chainkeys/api/routes.py:12)' -> 'handler (chainkeys/api/routes.py)'."""
    name, _, where = frame.partition(" (")
    path = where.rstrip(")").rsplit(":", 1)[0]
    for marker in ("site-packages/", "/src/", "/lib/python3"):
        if marker in path:
            path = path.split(marker, 1)[1]
            break
    return f"{name} ({path})" if path else name


def summarize_profile(raw: str, top: int = 20) -> dict[str, Any]:
    """Self and inclusive sample shares per function from py-spy's raw (collapsed) output."""
    own: dict[str, int] = {}
    incl: dict[str, int] = {}
    total = 0
    for line in raw.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        total += n
        frames = [_func(f) for f in stack.split(";") if not f.startswith("process ")]
        if not frames:
            continue
        own[frames[-1]] = own.get(frames[-1], 0) + n
        for f in set(frames):
            incl[f] = incl.get(f, 0) + n

    def share(d: dict[str, int]) -> list[tuple[str, float]]:
        return [
            (k, round(100 * v / total, 1))
            for k, v in sorted(d.items(), key=lambda kv: -kv[1])[:top]
        ]

    ours = {k: v for k, v in incl.items() if "(chainkeys/" in k}
    return {
        "samples": total,
        "self": share(own),
        "inclusive": share(incl),
        "chainkeys": share(ours),
    }


def format_profile(label: str, summary: dict[str, Any]) -> str:
    lines = [f"py-spy profile of {label} ({summary['samples']} samples)", "", "self %:"]
    lines += [f"  {pct:5.1f}  {name}" for name, pct in summary["self"]]
    lines += ["", "inclusive %, chainkeys' own functions:"]
    lines += [f"  {pct:5.1f}  {name}" for name, pct in summary.get("chainkeys", [])]
    lines += ["", "inclusive %:"]
    lines += [f"  {pct:5.1f}  {name}" for name, pct in summary["inclusive"]]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- report


def add_ratios(results: list[Result]) -> None:
    base = {(r.config, r.scenario): r for r in results if r.impl == "baseline"}
    for r in results:
        if r.impl != "chainkeys":
            continue
        cfg = Config(r.backend, r.size, r.workers, r.sync, ())
        b = base.get((cfg.baseline_key(), r.scenario))
        if b is None or not b.rps:
            continue
        r.ratio = {
            "rps": round(r.rps / b.rps, 3),
            "p50": round(r.p50_ms / b.p50_ms, 2) if b.p50_ms else 0.0,
            "p99": round(r.p99_ms / b.p99_ms, 2) if b.p99_ms else 0.0,
            "rss": round(r.rss_peak_mb / b.rss_peak_mb, 2) if b.rss_peak_mb else 0.0,
            "cpu_per_request": round(b.cpu_us / r.cpu_us, 3) if r.cpu_us else 0.0,
            "baseline_cpu_us": b.cpu_us,
            "baseline_rps": b.rps,
            "baseline_p50_ms": b.p50_ms,
            "baseline_p99_ms": b.p99_ms,
            "baseline_rss_mb": b.rss_peak_mb,
        }


@dataclass
class Target:
    name: str
    value: float | None
    limit: str
    ok: bool | None  # None: not measured in this run
    detail: str = ""


def _find(
    results: list[Result],
    impl: str,
    backend: str,
    size: int,
    workers: int,
    scenario: str,
    sync: str | None = None,
) -> Result | None:
    for r in results:
        if (r.impl, r.backend, r.size, r.workers, r.scenario) == (
            impl,
            backend,
            size,
            workers,
            scenario,
        ) and (sync is None or r.sync == sync):
            return r
    return None


def check_targets(results: list[Result], small: int, large: int, connections: int) -> list[Target]:
    out: list[Target] = []
    ck = [r for r in results if r.impl == "chainkeys"]
    for sync in ("FULL", "NORMAL"):
        sq = [
            r
            for r in ck
            if r.backend == "sqlite" and r.workers == 1 and r.sync == sync and r.size == small
        ]
        for label, prefix, limit in (
            ("create", "create-", CREATE_TARGET),
            ("sign", "sign-", SIGN_TARGET),
        ):
            rows = [r for r in sq if r.scenario.startswith(prefix) and r.ratio]
            if rows:
                worst = min(rows, key=lambda r: r.ratio["rps"])
                cpu = min(r.ratio["cpu_per_request"] for r in rows)
                out.append(
                    Target(
                        f"{label} >= {limit} x baseline (worst kind; SQLite {sync})",
                        worst.ratio["rps"],
                        f">= {limit}",
                        worst.ratio["rps"] >= limit,
                        f"{worst.scenario}; CPU per request ratio (worst) {cpu:.2f}",
                    )
                )
        get = next((r for r in sq if r.scenario == "get" and r.ratio), None)
        if get:
            out.append(
                Target(
                    f"get >= {GET_TARGET} x baseline get (SQLite {sync})",
                    get.ratio["rps"],
                    f">= {GET_TARGET}",
                    get.ratio["rps"] >= GET_TARGET,
                    f"CPU per request ratio {get.ratio['cpu_per_request']:.2f}",
                )
            )
        compared = [r for r in sq if r.ratio and r.ratio.get("p99")]
        if compared:
            worst_p99 = max(compared, key=lambda r: r.ratio["p99"])
            out.append(
                Target(
                    f"p99 <= {P99_TARGET} x the baseline's (worst scenario; SQLite {sync})",
                    worst_p99.ratio["p99"],
                    f"<= {P99_TARGET}",
                    worst_p99.ratio["p99"] <= P99_TARGET,
                    f"{worst_p99.scenario}: {worst_p99.p99_ms:.1f} vs "
                    f"{worst_p99.ratio['baseline_p99_ms']:.1f} ms",
                )
            )
    pg_get = next(
        (
            r
            for r in ck
            if r.backend == "postgresql"
            and r.workers == 1
            and r.size == small
            and r.scenario == "get"
            and r.ratio
        ),
        None,
    )
    if pg_get:
        out.append(
            Target(
                f"PostgreSQL get >= {GET_TARGET} x the asyncpg baseline's",
                pg_get.ratio["rps"],
                f">= {GET_TARGET}",
                pg_get.ratio["rps"] >= GET_TARGET,
                f"CPU per request ratio {pg_get.ratio['cpu_per_request']:.2f}",
            )
        )
    for scenario in ("get", "list-first"):
        a = _find(results, "chainkeys", "sqlite", small, 1, scenario, "FULL")
        b = _find(results, "chainkeys", "sqlite", large, 1, scenario, "FULL")
        if a and b and b.rps:
            slow = a.rps / b.rps
            detail = f"{a.rps:.0f} vs {b.rps:.0f} req/s"
            if a.cpu_us:
                detail += f"; CPU/request {b.cpu_us / a.cpu_us:.2f}x"
            ba = _find(results, "baseline", "sqlite", small, 1, scenario, "FULL")
            bb = _find(results, "baseline", "sqlite", large, 1, scenario, "FULL")
            if ba and bb and bb.rps:
                detail += f"; the baseline's own: {ba.rps / bb.rps:.2f}x"
            out.append(
                Target(
                    f"{scenario}: {size_label(large)} tenant within 1.3x of {size_label(small)} (req/s)",
                    round(slow, 3),
                    "<= 1.3",
                    slow <= 1.3,
                    detail,
                )
            )
    small_rss = {
        r.scenario: r.rss_peak_mb
        for r in ck
        if r.backend == "sqlite" and r.size == small and r.workers == 1 and r.sync == "FULL"
    }
    large_rss = {
        r.scenario: r.rss_peak_mb
        for r in ck
        if r.backend == "sqlite" and r.size == large and r.workers == 1 and r.sync == "FULL"
    }
    common = set(small_rss) & set(large_rss)
    if common:
        a_rss, b_rss = max(small_rss[s] for s in common), max(large_rss[s] for s in common)
        ratio = b_rss / a_rss
        out.append(
            Target(
                f"server RSS at {size_label(large)} within 1.2x of {size_label(small)}",
                round(ratio, 3),
                "<= 1.2",
                ratio <= 1.2,
                f"{b_rss:.0f} vs {a_rss:.0f} MB",
            )
        )
    one = _find(results, "chainkeys", "postgresql", small, 1, "create-cosmos")
    two = _find(results, "chainkeys", "postgresql", small, 2, "create-cosmos")
    if one and two and one.rps:
        ratio = two.rps / one.rps
        out.append(
            Target(
                "PostgreSQL creates: 2 workers >= 1.6 x 1 worker",
                round(ratio, 3),
                ">= 1.6",
                ratio >= 1.6,
                f"{two.rps:.0f} vs {one.rps:.0f} req/s",
            )
        )
    else:
        out.append(
            Target(
                "PostgreSQL creates: 2 workers >= 1.6 x 1 worker",
                None,
                ">= 1.6",
                None,
                "not run (PostgreSQL unreachable or skipped)",
            )
        )
    return out


def table(results: list[Result]) -> str:
    head = (
        "| config | scenario | chainkeys req/s | p50 ms | p99 ms | RSS MB | CPU µs/req | baseline req/s "
        "| p50 ms | p99 ms | RSS MB | CPU µs/req | ratio req/s | ratio CPU | other load | errors |"
    )
    lines = [head, "|" + "---|" * 16]
    for r in results:
        if r.impl != "chainkeys":
            continue
        q = r.ratio
        base = (
            (
                f"{q['baseline_rps']:.0f} | {q['baseline_p50_ms']:.2f} | {q['baseline_p99_ms']:.2f} | "
                f"{q['baseline_rss_mb']:.0f} | {q['baseline_cpu_us']:.0f} | **{q['rps']:.2f}** | "
                f"{q['cpu_per_request']:.2f}"
            )
            if q
            else "- | - | - | - | - | - | -"
        )
        errors = sum(r.errors.values())
        lines.append(
            f"| {r.config} | {r.scenario} | {r.rps:.0f} | {r.p50_ms:.2f} | {r.p99_ms:.2f} | "
            f"{r.rss_peak_mb:.0f} | {r.cpu_us:.0f} | {base} | {r.other_cpu:.2f} | {errors or ''} |"
        )
    return "\n".join(lines)


def against_table(results: list[Result]) -> str:
    """Each ref (--against) beside the current tree, both as ratios to the same baseline."""
    by = {(r.impl, r.config, r.scenario): r for r in results}
    lines = [
        "| config | scenario | ref | ref req/s | current req/s | current / ref "
        "| ref / baseline | current / baseline | ref p99 ms | current p99 ms |",
        "|" + "---|" * 10,
    ]
    for r in results:
        if not r.impl.startswith("ref-"):
            continue
        now = by.get(("chainkeys", r.config, r.scenario))
        cfg = Config(r.backend, r.size, r.workers, r.sync, ())
        base = by.get(("baseline", cfg.baseline_key(), r.scenario))
        if now is None or not r.rps:
            continue
        vs_base = f"{r.rps / base.rps:.2f}" if base and base.rps else "-"
        now_base = f"**{now.rps / base.rps:.2f}**" if base and base.rps else "-"
        lines.append(
            f"| {r.config} | {r.scenario} | {r.impl.removeprefix('ref-')} | {r.rps:.0f} "
            f"| {now.rps:.0f} | **{now.rps / r.rps:.2f}** | {vs_base} | {now_base} "
            f"| {r.p99_ms:.1f} | {now.p99_ms:.1f} |"
        )
    return "\n".join(lines) if len(lines) > 2 else ""


def targets_table(targets: list[Target]) -> str:
    lines = ["| target | measured | limit | result | detail |", "|---|---|---|---|---|"]
    for t in targets:
        verdict = "not run" if t.ok is None else ("PASS" if t.ok else "**MISS**")
        value = "-" if t.value is None else f"{t.value:g}"
        lines.append(f"| {t.name} | {value} | {t.limit} | {verdict} | {t.detail} |")
    return "\n".join(lines)


def _run(cmd: list[str]) -> str:
    try:
        return subprocess.run(
            cmd, capture_output=True, text=True, timeout=10, check=False
        ).stdout.strip()
    except OSError:
        return ""


def environment(args: argparse.Namespace, wrk_path: str) -> dict[str, Any]:
    cpu = next(
        (
            ln.split(":", 1)[1].strip()
            for ln in Path("/proc/cpuinfo").read_text().splitlines()
            if ln.startswith("model name")
        ),
        platform.processor(),
    )
    mem = next(
        (
            ln.split()[1]
            for ln in Path("/proc/meminfo").read_text().splitlines()
            if ln.startswith("MemTotal")
        ),
        "0",
    )
    packages = [
        "chainkeys",
        "uvicorn",
        "uvloop",
        "httptools",
        "orjson",
        "msgspec",
        "coincurve",
        "cryptography",
        "sqlalchemy",
        "asyncpg",
        "bip-utils",
    ]
    versions = {}
    for p in packages:
        with contextlib.suppress(metadata.PackageNotFoundError):
            versions[p] = metadata.version(p)
    pg_version = None
    if args.pg:
        with contextlib.suppress(Exception):
            import asyncio

            pg_version = asyncio.run(preload._pg(args.pg_url, "SHOW server_version"))
    wrk_banner = _run([wrk_path, "--version"]).splitlines()
    return {
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": {
            "cpu": cpu,
            "cores": os.cpu_count(),
            "memory_gb": round(int(mem) / 1024 / 1024, 1),
            "kernel": platform.release(),
            "os": _run(["sh", "-c", ". /etc/os-release && echo $PRETTY_NAME"]),
        },
        "versions": {
            "python": platform.python_version(),
            "sqlite": sqlite3.sqlite_version,
            "postgresql": pg_version,
            "wrk": wrk_banner[0].split(" [")[0].removeprefix("wrk ") if wrk_banner else "",
            **versions,
        },
        "git_commit": _run(
            ["git", "-C", str(procs.REPO), "rev-parse", "--short", args.commit or "HEAD"]
        )
        + (
            ""
            if args.commit
            or not _run(["git", "-C", str(procs.REPO), "status", "--porcelain", "--", "src"])
            else " + uncommitted changes in src/"
        ),
        "settings": {
            "quick": args.quick,
            "seconds": args.seconds,
            "warmup": args.warmup,
            "rounds": args.rounds,
            "quiet_wait": args.quiet_wait,
            "connections": args.connections,
            "wrk_threads": args.threads,
            "small": args.small,
            "large": args.large,
            "log_level": args.log_level,
        },
    }


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n", 1)[0])
    p.add_argument(
        "--quick", action="store_true", help="seconds, small data (the test suite runs this)"
    )
    p.add_argument("--seconds", type=float, help="measured seconds per scenario (8; quick 1)")
    p.add_argument("--warmup", type=float, help="warm-up seconds per scenario (2; quick 0)")
    p.add_argument(
        "--rounds",
        type=int,
        help="runs per scenario and server: best req/s, median p50/p99 (2; quick 1)",
    )
    p.add_argument(
        "--quiet-wait",
        type=float,
        help="before each run, wait up to this long for other "
        "load on the machine to drop below 0.3 cores (2; quick 0)",
    )
    p.add_argument("--connections", type=int, default=64)
    p.add_argument(
        "--threads", type=int, default=1, help="wrk threads (1 leaves the cores to the server)"
    )
    p.add_argument("--small", type=int, help="accounts in the small tenant (1000; quick 200)")
    p.add_argument("--large", type=int, help="accounts in the large tenant (1000000; quick 3000)")
    p.add_argument(
        "--postgres",
        choices=("auto", "off", "require"),
        default="auto",
        help="PostgreSQL scenarios: when reachable (auto), never, or fail if unreachable",
    )
    p.add_argument(
        "--pg-url",
        default=os.environ.get("CHAINKEYS_BENCH_POSTGRES_URL")
        or os.environ.get("CHAINKEYS_TEST_POSTGRES_URL", DEFAULT_PG),
        help="an admin URL; the benchmark creates (and drops) its own databases",
    )
    p.add_argument(
        "--pg-large",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="also the large tenant on PostgreSQL (full run: yes)",
    )
    p.add_argument(
        "--only", default="", help="comma list of config keys to run (e.g. sqlite-1k-w1-FULL)"
    )
    p.add_argument("--scenarios", default="", help="comma list: run only these scenarios")
    p.add_argument("--no-baseline", action="store_true")
    p.add_argument(
        "--against",
        default="",
        help="comma list of git refs (e.g. 2242199,main~5): each is installed in its own "
        "venv and measured in the same run, interleaved (SQLite configs up to 20k accounts)",
    )
    p.add_argument("--profile", default="", help="comma list of scenarios to profile with py-spy")
    p.add_argument(
        "--log-level", default="INFO", help="CHAINKEYS_LOG_LEVEL for the server (its default: INFO)"
    )
    p.add_argument("--out", type=Path, default=procs.REPO / "bench" / "results")
    p.add_argument(
        "--commit",
        default="",
        help="run chainkeys from a clean export of this commit's src/ "
        "(default: the work tree as it is)",
    )
    p.add_argument(
        "--report",
        type=Path,
        help="only re-render results.md (and ratios, targets) from a results.json",
    )
    p.add_argument("--keep", action="store_true", help="keep the temporary data directory")
    p.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    args = p.parse_args(argv)
    q = args.quick
    args.seconds = args.seconds or (1 if q else 8)
    args.rounds = args.rounds or (1 if q else 2)
    args.quiet_wait = args.quiet_wait if args.quiet_wait is not None else (0 if q else 2)
    args.warmup = args.warmup if args.warmup is not None else (0 if q else 2)
    args.small = args.small or (200 if q else 1000)
    args.large = args.large or (3000 if q else 1_000_000)
    args.pg_large = (not q) if args.pg_large is None else args.pg_large
    args.profile = {s for s in args.profile.split(",") if s}
    args.against = [r for r in args.against.split(",") if r]
    return args


def render(doc: dict[str, Any], out: Path) -> tuple[str, list[Target]]:
    """Ratios, targets and the markdown tables from a results.json document."""
    results = [Result(**{**r, "ratio": {}}) for r in doc["results"]]
    add_ratios(results)
    s = doc["settings"]
    targets = check_targets(results, s["small"], s["large"], s["connections"])
    doc["results"] = [asdict(r) for r in results]
    doc["targets"] = [asdict(t) for t in targets]
    (out / "results.json").write_text(json.dumps(doc, indent=2) + "\n")
    text = f"{table(results)}\n\n{targets_table(targets)}\n"
    against = against_table(results)
    if against:
        text += f"\nAgainst other releases, in the same run (`--against`):\n\n{against}\n"
    (out / "results.md").write_text(text)
    return text, targets


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.report:
        doc = json.loads(args.report.read_text())
        text, _ = render(doc, args.report.parent)
        print(text)
        return 0
    args.pg = False
    if args.postgres != "off":
        why = preload.pg_reachable(args.pg_url)
        if why is None:
            args.pg = True
        elif args.postgres == "require":
            print(f"PostgreSQL not reachable at {args.pg_url}: {why}", file=sys.stderr)
            return 2
        else:
            print(f"[bench] PostgreSQL not reachable ({why}); SQLite only", file=sys.stderr)
    configs = plan(args.quick, args.small, args.large, args.pg, args.pg_large)
    only = {s for s in args.only.split(",") if s}
    keep = {s for s in args.scenarios.split(",") if s}
    if only:
        configs = [c for c in configs if c.key in only]
    if keep:
        configs = [
            Config(c.backend, c.size, c.workers, c.sync, tuple(s for s in c.scenarios if s in keep))
            for c in configs
        ]
        configs = [c for c in configs if c.scenarios]
    args.out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="chainkeys-bench-", dir=os.environ.get("BENCH_TMPDIR")))
    bench = Bench(args, work, args.out)
    started = time.monotonic()
    try:
        bench.run(configs)
    finally:
        bench.cleanup()
        if args.keep:
            print(f"[bench] data kept in {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)
    env = environment(args, bench.wrk)
    env["elapsed_s"] = round(time.monotonic() - started, 1)
    doc = {
        **env,
        "results": [asdict(r) for r in bench.results],
        "parity": bench.parity,
        "failures": bench.failures,
        "profiles": bench.profiles,
    }
    text, targets = render(doc, args.out)
    print(text)
    print(
        f"[bench] {env['elapsed_s']}s; results in {args.out}/results.json and results.md",
        file=sys.stderr,
    )
    missed = [t for t in targets if t.ok is False]
    if bench.failures:
        print(f"[bench] configs that failed: {bench.failures}", file=sys.stderr)
        return 1
    return 1 if args.strict and missed else 0
