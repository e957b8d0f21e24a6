"""Signing costs relative to chainkeys itself: Cosmos transfers under a policy (1,000
allow-listed recipients and active caps) against the same transfers without one, a
derived key against a stored one, derive-next against create, ten policy rules with
CEL conditions (nine of them evaluated and not applying) against the same rules without
conditions, and (--hsm) the master key in SoftHSM2 against the key file. Each sign kind against the lean baseline is in
the main benchmark (`python -m bench`, the sign-* scenarios). One command, one run:

    python -m bench.sign            # ~2 min
    python -m bench.sign --quick    # seconds (the test suite runs it)
    python -m bench.sign --hsm      # also: the master key in SoftHSM2 vs the key file

Every request signs different bytes (the body's SEQ becomes a per-request number), so
under the policy each one is checked against the allow-list and counted against the
24 h cap in the database. Rounds alternate (chainkeys, baseline, chainkeys, …) and the
median of each side is compared, as throughput and as the server's CPU per request (the
steadier of the two on a shared machine). Results: a table on stdout and sign.json in
--out.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path
from typing import Any

from bench import procs, wrk
from chainkeys.chains import encoding

KEY = "11" * 32  # the baseline signs with the same key
TO = "cosmos1q6hag67dl53wl99vzg42z8eyzfz2xlkvsrxukv"
TARGET_POLICY, TARGET_HSM, TARGET_DERIVED, TARGET_CONDITIONS = 0.8, 0.95, 0.95, 0.9
PHRASE = "abandon " * 11 + "about"  # public test phrase: never fund it
SOFTHSM = ("/usr/lib/softhsm/libsofthsm2.so", "/usr/lib/x86_64-linux-gnu/softhsm/libsofthsm2.so")

# one worker: the comparisons are of one event loop against itself (serve defaults to auto)
ONE = ("--workers", "1")


def transfer(sender: str) -> dict[str, Any]:
    return {
        "fromAddress": sender,
        "toAddress": TO,
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


def policy(recipients: int) -> dict[str, Any]:
    """One cosmos rule with `recipients` allow-listed addresses (TO among them) and caps
    that are active (every transfer is counted) but never reached in a run."""
    allowed = [TO] + [
        encoding.bech32_encode("cosmos", i.to_bytes(20, "big")) for i in range(1, recipients)
    ]
    big = str(10**30)
    return {
        "rules": [
            {
                "family": "cosmos",
                "network": "cosmoshub",
                "recipients": allowed,
                "max_per_tx": {"uatom": big},
                "max_per_day": {"uatom": big},
            },
            {"family": "eos", "raw_messages": True},
            {"family": "dogecoin", "raw_messages": True},
            {"family": "litecoin", "raw_messages": True},
        ]
    }


def cli(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "chainkeys.cli", *args],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        check=True,
        cwd=procs.REPO,
    )
    return done.stdout


def softhsm_env(tmp: Path) -> dict[str, str]:
    """A fresh SoftHSM2 token and the pkcs11 provider's settings for it."""
    module = next((m for m in SOFTHSM if Path(m).exists()), None)
    if module is None:
        raise RuntimeError("SoftHSM2 is not installed; install it with: apt-get install softhsm2")
    (tmp / "tokens").mkdir()
    conf = tmp / "softhsm2.conf"
    conf.write_text(f"directories.tokendir = {tmp / 'tokens'}\n")
    env = {
        "SOFTHSM2_CONF": str(conf),
        "CHAINKEYS_MASTER_KEY_PROVIDER": "pkcs11",
        "CHAINKEYS_PKCS11_MODULE": module,
        "CHAINKEYS_PKCS11_TOKEN_LABEL": "bench",
        "CHAINKEYS_PKCS11_PIN": "246810",
    }
    subprocess.run(
        [
            "softhsm2-util",
            "--init-token",
            "--free",
            "--label",
            "bench",
            "--pin",
            "246810",
            "--so-pin",
            "13579135",
        ],
        env={**os.environ, **env},
        check=True,
        capture_output=True,
    )
    return env


def post(url: str, token: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
    req = urllib.request.Request(
        url + path,
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Authorization": token, "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=30) as resp:
        out: dict[str, Any] = json.loads(resp.read())
    return out


def conditions(with_when: bool) -> dict[str, Any]:
    """Ten rules: five deny rules and four allow rules whose conditions are false for a
    bench transfer, then the allow rule that decides (its own condition true). Without
    conditions, the same rules, the nine that would not apply moved to other networks (so
    the same rule decides, with the same caps, and nothing is evaluated)."""
    big = str(10**30)
    nets = [
        "cosmoshub-testnet",
        "osmosis",
        "osmosis-testnet",
        "juno",
        "akash",
        "stargaze",
        "celestia",
        "osmosis",
        "juno",
    ]
    falses = [
        "tx.ibc.exists(p, p.channel != 'channel-141')",
        "token.label == 'nobody'",
        "'uosmo' in tx.total && tx.total['uosmo'] > 0",
        "now.getDayOfWeek('UTC') == 9",
        "has(tx.message)",
        "tx.kind == 'psbt'",
        "account.index > 1000000",
        "size(tx.outputs) > 50",
        "'uatom' in tx.total && tx.total['uatom'] > 1000000000",
    ]
    rules: list[dict[str, Any]] = []
    for i, when in enumerate(falses):
        rule: dict[str, Any] = {"family": "cosmos", "effect": "deny" if i < 5 else "allow"}
        rule.update({"network": "cosmoshub", "when": when} if with_when else {"network": nets[i]})
        if rule["effect"] == "allow":
            rule["max_per_tx"] = {"uatom": big}
        rules.append(rule)
    deciding: dict[str, Any] = {
        "family": "cosmos",
        "network": "cosmoshub",
        "max_per_tx": {"uatom": big},
        "max_per_day": {"uatom": big},
    }
    if with_when:
        deciding["when"] = "tx.kind == 'transfer' && 'uatom' in tx.total && tx.total['uatom'] > 0"
    return {"rules": [r for r in rules if with_when or r["effect"] == "allow"] + [deciding]}


def accounts(url: str, token: str) -> dict[str, tuple[str, dict[str, Any]]]:
    """Import the key on every family; scenario -> (path, body template)."""
    made = {
        f: post(
            url,
            token,
            f"/{f}",
            {"private_key": KEY} | ({"name": "benchsigner1"} if f == "eos" else {}),
        )
        for f in ("cosmos", "dogecoin", "eos", "litecoin")
    }
    cosmos = made["cosmos"]["data"]["data"]["address"]
    message = {"message": "bench SEQ"}
    wallet = post(url, token, "/wallets", {"mnemonic": PHRASE})["data"]["id"]
    [derived] = post(url, token, f"/wallets/{wallet}/accounts", {"family": "dogecoin"})["data"][
        "accounts"
    ]
    return {
        "derived-message": (f"/dogecoin/{derived['address']}/sign-message", message),
        "derive-next": (f"/wallets/{wallet}/accounts", {"family": "litecoin"}),
        "create-litecoin": ("/litecoin", {}),
        "cosmos-transfer": (f"/cosmos/{cosmos}/sign-transfer", transfer(cosmos)),
        "dogecoin-message": (f"/dogecoin/{made['dogecoin']['address']}/sign-message", message),
    }


def load(
    wrk_bin: str,
    url: str,
    token: str,
    path: str,
    body: dict[str, Any],
    tmp: Path,
    seconds: float,
    connections: int,
) -> float:
    template = tmp / f"body-{abs(hash(path))}.json"
    # The sequence is a JSON number in the transfer: "SEQ" (quoted) becomes SEQ.
    template.write_text(json.dumps(body).replace('"SEQ"', "SEQ"))
    env = {"BENCH_TOKEN": token, "BENCH_PATH": path, "BENCH_BODY": str(template)}
    result = wrk.run(
        wrk_bin, url, wrk.script("sign", tmp), env, seconds=seconds, connections=connections
    )
    if result.error_count:
        raise RuntimeError(f"{path}: {result.errors} errors (non-2xx or socket)")
    return result.rps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--seconds", type=float, default=6)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--out", type=Path, default=Path("bench/results"))
    parser.add_argument("--hsm", action="store_true", help="also compare the pkcs11 provider")
    parser.add_argument(
        "--only",
        default="",
        help="measure only these runs (comma-separated "
        "prefixes, e.g. cosmos-transfer/conditions,cosmos-transfer/unc)",
    )
    args = parser.parse_args()
    if args.quick:
        args.seconds, args.rounds = 1, 1
    wrk_bin = wrk.ensure_wrk()
    tmp = Path(tempfile.mkdtemp(prefix="chainkeys-sign-bench-"))
    env = {
        "CHAINKEYS_DATA_DIR": str(tmp / "data"),
        "CHAINKEYS_SQLITE_SYNCHRONOUS": "NORMAL",
        "CHAINKEYS_ACCESS_LOG": "false",
        "CHAINKEYS_LOG_LEVEL": "WARNING",
    }
    server = procs.start(
        "chainkeys", ["-m", "chainkeys.cli", "serve", *ONE], env, tmp / "chainkeys.log", 1
    )
    hsm_server = None
    if args.hsm:
        hsm_env = {**env, **softhsm_env(tmp), "CHAINKEYS_DATA_DIR": str(tmp / "hsm-data")}
        cli(hsm_env, "hsm", "init")
        hsm_server = procs.start(
            "chainkeys-hsm", ["-m", "chainkeys.cli", "serve", *ONE], hsm_env, tmp / "hsm.log", 1
        )
    try:
        plain = (tmp / "data" / "first-token").read_text().strip()  # stdout is no terminal
        made = cli(env, "token", "create", "--tenant", "bench-policy")
        governed = made.strip().splitlines()[-1]
        (tmp / "policy.json").write_text(json.dumps(policy(1000)))
        cli(env, "policy", "set", "bench-policy", str(tmp / "policy.json"))
        tokens = {}
        for name in ("conditions", "unconditional"):
            made = cli(env, "token", "create", "--tenant", f"bench-{name}")
            tokens[name] = made.strip().splitlines()[-1]
            (tmp / f"{name}.json").write_text(json.dumps(conditions(name == "conditions")))
            cli(env, "policy", "set", f"bench-{name}", str(tmp / f"{name}.json"))
        plain_scenarios, governed_scenarios = (
            accounts(server.url, plain),
            accounts(server.url, governed),
        )
        conditional = {n: accounts(server.url, t)["cosmos-transfer"] for n, t in tokens.items()}
        runs: dict[str, list[float]] = {}
        cpu: dict[str, list[float]] = {}  # the server's CPU per request, µs

        only = tuple(p for p in args.only.split(",") if p)

        def measure(name: str, url: str, token: str, path: str, body: dict[str, Any]) -> None:
            if only and not name.startswith(only):
                return
            target = hsm_server if url != server.url and hsm_server is not None else server
            with procs.CpuMeter(target) as meter:
                rps = load(wrk_bin, url, token, path, body, tmp, args.seconds, args.connections)
            runs.setdefault(name, []).append(rps)
            cpu.setdefault(name, []).append(meter.server_cores * 1e6 / rps)

        for _ in range(args.rounds):
            for scenario, (path, body) in plain_scenarios.items():
                measure(f"{scenario}/chainkeys", server.url, plain, path, body)
            path, body = plain_scenarios["cosmos-transfer"]
            measure("cosmos-transfer/no-policy", server.url, plain, path, body)
            path, body = governed_scenarios["cosmos-transfer"]
            measure("cosmos-transfer/policy", server.url, governed, path, body)
            for name, (path, body) in conditional.items():
                measure(f"cosmos-transfer/{name}", server.url, tokens[name], path, body)
            if hsm_server is not None:
                hsm_token = (tmp / "hsm-data" / "first-token").read_text().strip()
                if "cosmos-transfer/hsm" not in runs:
                    hsm_path, hsm_body = accounts(hsm_server.url, hsm_token)["cosmos-transfer"]
                measure("cosmos-transfer/hsm", hsm_server.url, hsm_token, hsm_path, hsm_body)
                path, body = plain_scenarios["cosmos-transfer"]
                measure("cosmos-transfer/file-key", server.url, plain, path, body)
    finally:
        server.stop()
        if hsm_server is not None:
            hsm_server.stop()
        shutil.rmtree(tmp, ignore_errors=True)  # a store and a token file: nothing left behind
    report(runs, cpu, args.out)


# (row, measured run, the run it is compared with, target ratio or None: shown only)
COMPARISONS = (
    (
        "sign derived vs stored key",
        "derived-message/chainkeys",
        "dogecoin-message/chainkeys",
        TARGET_DERIVED,
    ),
    ("derive next index vs create", "derive-next/chainkeys", "create-litecoin/chainkeys", None),
    (
        "cosmos-transfer policy vs none",
        "cosmos-transfer/policy",
        "cosmos-transfer/no-policy",
        TARGET_POLICY,
    ),
    (
        "10 rules with conditions vs without",
        "cosmos-transfer/conditions",
        "cosmos-transfer/unconditional",
        TARGET_CONDITIONS,
    ),
    (
        "cosmos-transfer HSM key vs file",
        "cosmos-transfer/hsm",
        "cosmos-transfer/file-key",
        TARGET_HSM,
    ),
)


def report(runs: dict[str, list[float]], cpu: dict[str, list[float]], out: Path) -> None:
    """Each comparison as a ratio of throughputs (the target's), and beside it the ratio
    of the server's CPU per request (the other's over this one's: higher is better, as
    for throughput). On a shared machine the second moves less from run to run: other
    machines' load slows wrk and the server alike but takes no CPU time from the server."""
    median = {k: statistics.median(v) for k, v in runs.items()}
    per = {k: statistics.median(v) for k, v in cpu.items()}
    rows = [
        (name, median[a], median[b], median[a] / median[b], target, per[b] / per[a])
        for name, a, b, target in COMPARISONS
        if a in median and b in median
    ]
    print(f"{'scenario':36} {'req/s':>9} {'vs req/s':>9} {'ratio':>6} {'cpu':>5} target")
    for name, a, b, ratio, target, by_cpu in rows:
        verdict = (
            "(shown only)"
            if target is None
            else (f">={target} " + ("ok" if ratio >= target else "MISS"))
        )
        print(f"{name:36} {a:9.0f} {b:9.0f} {ratio:6.2f} {by_cpu:5.2f} {verdict}")
    out.mkdir(parents=True, exist_ok=True)
    doc = {"runs": runs, "cpu_us_per_request": cpu, "rows": rows}
    (out / "sign.json").write_text(json.dumps(doc, indent=1))


if __name__ == "__main__":
    main()
