"""How long a policy decision holds the event loop, timed from outside.

`python -m bench.loop_hold [--requests 40]` starts `chainkeys serve` (SQLite, a body
cap large enough for 1,000-message amino documents), imports a Cosmos key, and sends
sign-amino requests of 1,000 MsgSends each from four threads while a fifth times
`GET /livez` back to back. It does so three times: with no policy, with a policy whose
conditions cost as much as `policy set` allows one family and network together
(policies/analysis.py SCOPE_COST), and it shows that the quadratic condition of issue
49 (`tx.outputs.all(o, o in tx.outputs)`) is refused when set. What a decision adds to
/livez is the difference between the first two runs' latencies: the decoding of the
requests themselves holds the loop in both.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from bench import procs

KEY = "0000000000000000000000000000000000000000000000000000000000000001"
COSMOS = {"family": "cosmos", "network": "cosmoshub"}
HEAVY = [  # each reads every message of the request and is false: nothing is refused
    "tx.outputs.exists(o, o.amount < 0 || o.amount > 10000000 || o.denom == 'x' || "
    "o.recipient.startsWith('osmo1') || o.recipient.endsWith('qqqq') || o.recipient == 'a')",
    "tx.messages.exists(m, m.startsWith('/ibc') || m.endsWith('Delegate') || m.contains('x'))",
    "tx.outputs.exists(o, o.amount > 99999999) || tx.outputs.exists(o, o.denom == 'uosmo')",
]


def in_process() -> None:
    """What one 1,000-message request costs the loop, decoded and decided in process."""
    import msgspec

    from chainkeys.chains.registry import FAMILIES
    from chainkeys.chains.secp256k1 import key_from_secret
    from chainkeys.chains.tx.base import Owner
    from chainkeys.policies.conditions import Facts
    from chainkeys.policies.document import parse
    from chainkeys.policies.engine import decide

    fam = FAMILIES["cosmos"]
    kind = next(k for k in fam.signers if k.path == "sign-amino")
    key = key_from_secret(bytes.fromhex(KEY), True)
    net = fam.network(None)
    acct = fam.account(key, net, {})
    owner = Owner("cosmos", acct.name, acct.address, key.public, net)
    request = msgspec.convert(_doc(acct.address, 1000, 1), kind.request)
    facts = Facts("t", "l", ("sign",), (), acct.name, acct.address, "", "", -1, 0, {})
    rules = [{**COSMOS, "effect": "deny", "when": w} for w in HEAVY]
    heavy = parse(json.dumps({"rules": [*rules, {**COSMOS, "raw_messages": True}]}))
    plain = parse(json.dumps({"rules": [{**COSMOS, "raw_messages": True}]}))

    def best(work: Any) -> float:
        times = []
        for _ in range(5):
            t = time.perf_counter()
            work()
            times.append((time.perf_counter() - t) * 1000)
        return min(times)

    summary = kind.prepare(request, owner).summary
    print(
        f"in process, one request of 1,000 messages: decode {best(lambda: kind.prepare(request, owner)):.1f} ms, "
        f"decide at the cap {best(lambda: decide(heavy, summary, facts)):.2f} ms, "
        f"without conditions {best(lambda: decide(plain, summary, None)):.2f} ms"
    )


def _cli(data: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHAINKEYS_")}
    return subprocess.run(
        [sys.executable, "-m", "chainkeys.cli", *args, "--data-dir", str(data)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _doc(address: str, n: int, sequence: int) -> dict[str, object]:
    msg = {
        "type": "cosmos-sdk/MsgSend",
        "value": {
            "from_address": address,
            "to_address": address,
            "amount": [{"denom": "uatom", "amount": "1"}],
        },
    }
    return {
        "signDoc": {
            "chain_id": "cosmoshub-4",
            "account_number": "1",
            "sequence": str(sequence),
            "fee": {"amount": [], "gas": "200000"},
            "msgs": [msg] * n,
            "memo": "",
        }
    }


def _run(server: procs.Server, token: str, address: str, requests: int) -> list[float]:
    """/livez latencies (ms) while `requests` big signs run from four threads."""
    stop = threading.Event()
    latencies: list[float] = []

    def poll() -> None:
        with httpx.Client(base_url=server.url, timeout=30) as c:
            while not stop.is_set():
                t = time.perf_counter()
                c.get("/livez")
                latencies.append((time.perf_counter() - t) * 1000)

    def sign(first: int) -> None:
        headers = {"Authorization": token}
        with httpx.Client(base_url=server.url, timeout=120, headers=headers) as c:
            for i in range(first, requests, 4):
                c.post(f"/cosmos/{address}/sign-amino", json=_doc(address, 1000, i))

    poller = threading.Thread(target=poll)
    poller.start()
    signers = [threading.Thread(target=sign, args=(k,)) for k in range(4)]
    for t in signers:
        t.start()
    for t in signers:
        t.join()
    stop.set()
    poller.join()
    return latencies


def _show(name: str, ms: list[float]) -> None:
    ms = sorted(ms)
    p99 = ms[int(len(ms) * 0.99)] if ms else float("nan")
    print(
        f"{name:24} /livez n={len(ms):5}  p50 {statistics.median(ms):7.2f} ms  "
        f"p99 {p99:7.2f} ms  max {ms[-1]:7.2f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=40)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="chainkeys-loophold-") as tmp:
        data = Path(tmp) / "data"
        _cli(data, "init")
        token = _cli(data, "token", "create", "--tenant", "bench").stdout.strip().splitlines()[-1]
        env = {
            "CHAINKEYS_DATA_DIR": str(data),
            "CHAINKEYS_MAX_BODY_BYTES": str(4 << 20),
            "CHAINKEYS_LOG_LEVEL": "WARNING",
        }
        server = procs.start(
            "chainkeys",
            ["-m", "chainkeys.cli", "serve", "--workers", "1"],
            env,
            Path(tmp) / "serve.log",
            1,
        )
        try:
            with httpx.Client(base_url=server.url, headers={"Authorization": token}) as c:
                made = c.post("/cosmos", json={"private_key": KEY}).json()
                address = made["data"]["data"]["address"]
            in_process()
            _show("no policy", _run(server, token, address, args.requests))
            rules: list[dict[str, Any]] = [{**COSMOS, "effect": "deny", "when": w} for w in HEAVY]
            rules.append({**COSMOS, "raw_messages": True})
            policy = Path(tmp) / "heavy.json"
            policy.write_text(json.dumps({"rules": rules}))
            done = _cli(data, "policy", "set", "bench", str(policy))
            print(done.stdout.strip() or done.stderr.strip())
            time.sleep(6)  # the server re-reads the tenant's policy within 5 s
            _show("conditions at the cap", _run(server, token, address, args.requests))
            quad = Path(tmp) / "quadratic.json"
            quad.write_text(
                json.dumps({"rules": [{**COSMOS, "when": "tx.outputs.all(o, o in tx.outputs)"}]})
            )
            refused = _cli(data, "policy", "set", "bench", str(quad))
            print(f"quadratic condition: exit {refused.returncode}: {refused.stderr.strip()}")
        finally:
            server.stop()


if __name__ == "__main__":
    main()
