"""PostgreSQL failover, the figures docs/deploy.md quotes: what the synchronous standby
costs, how long a failover takes with pg_auto_failover's own timings, and what an
asynchronous standby loses when the primary dies. Each on a pg_auto_failover cluster of
its own (tests/process/ha_cluster.py: a monitor, a primary and its standby on this machine).

    python -m bench.failover                       # all three, ~6 min
    python -m bench.failover --only throughput --seconds 10 --rounds 3
    python -m bench.failover --only loss --kills 5 --commit local

throughput: one `chainkeys serve` (2 workers) on the cluster (fsync on, as in
  production), wrk creating Cosmos accounts then signing Cosmos transfers, in rounds
  alternating the database's synchronous_commit: `on` (each commit waits for the
  standby to have flushed it: the recipe) and `local` (it does not: asynchronous
  replication). The server is restarted between rounds (the setting is a session's).
loss: tests/process/test_failover.py's load (keyed creates, signs, transfers capped at CAP a
  day) on two replicas, the primary killed `--kills` times (the old one rejoining in
  between), with synchronous_commit `--commit` (local: asynchronous). After each kill,
  what the clients were told 200 for and the new primary does not hold, and how many
  signatures the cap admitted over CAP; the standby's write lag sampled under the load.
  `--lag-ms`: the primary's WAL senders are stopped that long before the kill, as a
  network that far behind would leave the standby.
defaults: one kill under that load with pg_auto_failover's default monitor timings
  (and PostgreSQL's default wal_retrieve_retry_interval): seconds to the new primary.

Results: a table on stdout and failover.json in --out. Needs pg_auto_failover (Debian:
apt-get install postgresql-15-auto-failover), wrk, and root or the postgres user.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from tests.api.test_sign_cosmos import PRIVATE, TRANSFER
from tests.conftest import TEST_MASTER_KEY, TLS
from tests.process.ha_cluster import DATABASE, NODE_SETTINGS, AutoFailover, auto_failover
from tests.process.test_failover import CAP, SIGN, Deployment, Load, deployed, ready, with_services
from tests.process.test_process import start

from bench import wrk
from chainkeys.bootstrap import Services
from chainkeys.config import Settings

OUT = Path("bench/results")


def set_commit(ha: AutoFailover, mode: str) -> None:
    """chainkeys' database: synchronous_commit for every new session (on the primary)."""
    primary = ha.primary()
    assert primary is not None
    ha.execute(primary, f"ALTER DATABASE {DATABASE} SET synchronous_commit = '{mode}'")


def throughput(seconds: float, rounds: int, work: Path) -> list[dict[str, Any]]:
    found = wrk.ensure_wrk()
    rows: list[dict[str, Any]] = []
    with auto_failover(node_settings={**NODE_SETTINGS, "fsync": "on"}) as ha:
        url = ha.url()
        settings = Settings(database_url=url, master_key=TEST_MASTER_KEY, data_dir=work / "cli")

        async def token(svc: Services) -> str:
            return (await svc.tokens.create("bench", "throughput"))[1]

        bearer = with_services(settings, token)
        body = work / "transfer.json"
        body.write_text(json.dumps({**TRANSFER, "sequence": "SEQ"}).replace('"SEQ"', "SEQ"))
        for n in range(rounds):
            for mode in ("on", "local"):
                set_commit(ha, mode)
                env = {
                    "CHAINKEYS_DATABASE_URL": url,
                    "CHAINKEYS_MASTER_KEY": TEST_MASTER_KEY,
                    "CHAINKEYS_DATA_DIR": str(work / f"data-{mode}-{n}"),
                    "CHAINKEYS_ACCESS_LOG": "false",
                }
                proc = start(env, work / f"server-{mode}-{n}.log", "--workers", "2")
                try:
                    r = httpx.post(
                        f"{proc.base_url}/cosmos",
                        json={"private_key": PRIVATE},
                        headers={"Authorization": bearer},
                        verify=TLS,
                    )
                    assert r.status_code in (200, 409), r.text
                    row: dict[str, Any] = {"round": n, "synchronous_commit": mode}
                    for name, path, extra in (
                        ("create", "/cosmos", {}),
                        ("sign", SIGN, {"BENCH_BODY": str(body)}),
                    ):
                        env = {"BENCH_TOKEN": bearer, "BENCH_PATH": path, **extra}
                        load = wrk.run(
                            found,
                            proc.base_url,
                            wrk.script(name, work),
                            env,
                            seconds=seconds,
                            connections=16,
                        )
                        assert load.error_count == 0, load.errors
                        row[f"{name}_rps"] = round(load.rps, 1)
                        row[f"{name}_p50_ms"] = round(load.p50_ms, 2)
                        row[f"{name}_p99_ms"] = round(load.p99_ms, 2)
                    rows.append(row)
                    print(row, flush=True)
                finally:
                    proc.stop()
    return rows


def lag_sampler(ha: AutoFailover, into: list[float]) -> Callable[[], None]:
    """A thread's body: the standby's write lag, as the primary sees it, until stopped."""
    import threading

    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(0.2):
            primary = ha.primary()
            if primary is None:
                continue
            try:
                lag = ha.sql(
                    primary,
                    "SELECT COALESCE(max(extract(epoch FROM write_lag)), 0) "
                    "FROM pg_stat_replication",
                )
            except Exception:  # the primary just died: the sample is moot
                continue
            into.append(float(lag))

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()

    def done() -> None:
        stop.set()
        thread.join(10)

    return done


def missing(d: Deployment, load: Load, cap: str) -> dict[str, int]:
    """What the clients were told 200 for and the new primary lacks."""
    ha = d.ha
    primary = ha.primary()
    assert primary is not None
    hot, capped = d.tenants["hot"], d.tenants[cap]
    addresses = {
        r[0] for r in ha.fetch(primary, "SELECT address FROM accounts WHERE tenant_id = $1", hot)
    }
    tx_ids = {
        json.loads(r[0])["tx_id"]
        for r in ha.fetch(
            primary,
            "SELECT details FROM audit WHERE action = 'sign' AND outcome = 'ok' "
            "AND tenant_id = ANY($1::text[])",
            [hot, capped],
        )
    }
    spent = ha.sql(primary, "SELECT count(*) FROM policy_spends WHERE tenant_id = $1", capped)
    return {
        "told_created": len(load.keyed),
        "lost_accounts": sum(1 for a in load.keyed.values() if a not in addresses),
        "told_signed": len(load.signed) + len(load.spent),
        "lost_signature_audit_rows": sum(1 for t in [*load.signed, *load.spent] if t not in tx_ids),
        "cap_spends_counted": int(spent),
        "over_cap_signatures": max(0, len(load.spent) - CAP),
    }


def switch(d: Deployment, load: Load, lag: float = 0.0, limit: float = 300) -> dict[str, float]:
    """Kill the primary under `load` once it is under way: seconds to the new primary
    and to the first 200 of a write sent after the kill."""
    ha = d.ha

    def until(check: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + limit
        while not check():
            if time.monotonic() > deadline:
                raise RuntimeError(f"never saw {what}")
            time.sleep(0.01)

    until(lambda: load.count(lambda s: len(s.spent)) >= CAP // 2, "the load under way")
    victim = ha.primary()
    assert victim is not None
    killed = time.monotonic()
    ha.kill(victim, lag)
    gone = time.monotonic()
    until(lambda: ha.primary() is ha.other(victim), "the standby promoted")
    promoted = time.monotonic() - killed
    until(lambda: load.count(lambda s: any(sent > gone for sent, _ in s.writes)), "a write")
    served = load.count(lambda s: min(done for sent, done in s.writes if sent > gone)) - killed
    until(lambda: all(ready(p) == 200 for p in d.procs), "/readyz")
    until(lambda: load.count(lambda s: sum(1 for t in s.refused if t > killed)) > 0, "the cap")
    return {"promoted_s": round(promoted, 2), "served_s": round(served, 2)}


def loss(kills: int, commit: str, lag: float, work: Path) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    caps = [f"capped-{k}" for k in range(kills)]
    with auto_failover() as ha:
        set_commit(ha, commit)
        with deployed(ha, work, caps) as d:
            for k, cap in enumerate(caps):
                if k:
                    victim = next(n for n in ha.nodes if n.popen is None)
                    ha.run(victim)
                    ha.wait_replicating(ha.other(victim))
                lags: list[float] = []
                stop_sampling = lag_sampler(ha, lags)
                with Load(d.procs, d.tokens["hot"], d.tokens[cap], k) as load:
                    figures = switch(d, load, lag)
                stop_sampling()
                row = {
                    "kill": k + 1,
                    "synchronous_commit": commit,
                    "lag_ms": lag * 1000,
                    **figures,
                    **missing(d, load, cap),
                    "errors": len(load.errors),
                    "max_write_lag_ms": round(1000 * max(lags, default=0.0), 3),
                }
                rows.append(row)
                print(row, flush=True)
    return rows


def defaults(work: Path) -> list[dict[str, Any]]:
    node = {k: v for k, v in NODE_SETTINGS.items() if k != "wal_retrieve_retry_interval"}
    with (
        auto_failover(node_settings=node, monitor_settings={}) as ha,
        deployed(ha, work, ["capped-0"]) as d,
    ):
        with Load(d.procs, d.tokens["hot"], d.tokens["capped-0"], 0) as load:
            figures = switch(d, load)
        row = {"monitor": "pg_auto_failover defaults", **figures, **missing(d, load, "capped-0")}
        print(row, flush=True)
        return [row]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=("throughput", "loss", "defaults"), action="append")
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--kills", type=int, default=5)
    parser.add_argument("--commit", default="local", choices=("local", "on", "off"))
    parser.add_argument(
        "--lag-ms",
        type=float,
        default=0.0,
        help="loss: the standby hears nothing for this long before the kill",
    )
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    chosen = args.only or ["throughput", "loss", "defaults"]
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="chainkeys-failover-") as tmp:
        work = Path(tmp)
        for part in chosen:
            (work / part).mkdir()
        if "throughput" in chosen:
            rows = throughput(args.seconds, args.rounds, work / "throughput")
            results["throughput"] = rows
            for kind in ("create", "sign"):
                on = statistics.median(
                    r[f"{kind}_rps"] for r in rows if r["synchronous_commit"] == "on"
                )
                local = statistics.median(
                    r[f"{kind}_rps"] for r in rows if r["synchronous_commit"] == "local"
                )
                print(f"{kind}: {on:.0f}/s synchronous, {local:.0f}/s local ({on / local:.2f} x)")
        if "loss" in chosen:
            results["loss"] = loss(args.kills, args.commit, args.lag_ms / 1000, work / "loss")
        if "defaults" in chosen:
            results["defaults"] = defaults(work / "defaults")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "failover.json").write_text(json.dumps(results, indent=2))
    print(f"results in {args.out / 'failover.json'}")


if __name__ == "__main__":
    main()
