"""When the PostgreSQL server dies: a failover under load, and nothing acknowledged lost.

A real highly available PostgreSQL (tests/process/ha_cluster.py: pg_auto_failover, a primary
and its synchronous standby) serves two chainkeys replicas through one multi-host URL
(`target_session_attrs=read-write`). Clients in threads create accounts with an
Idempotency-Key (retried with it until a 200), sign transfers, and sign 1-uatom
transfers of a tenant whose policy caps them at CAP a day (a 503 retried with the same
body: the same digest, counted once). The primary's machine dies (every process
SIGKILLed at once) under that load, then, once the old primary has rejoined as the
standby, the new one's too (a failover back).

What a client may be told meanwhile is a 200, the cap's 403 or the 503
`storage_unavailable` envelope, never another answer and never nothing within the
request timeout; `/readyz` says 503 during the switch and 200 after, by itself.
After each failover, on the new primary: every account a keyed create was told about,
exactly one per key; every signature answered 200 with its audit row (its tx id); every
capped signature answered 200 counted in the cap, and the cap spent exactly (no more:
it was reached); `chainkeys audit verify` passes once every row is linked; and a
change through one replica reaches the other's caches (its LISTEN followed too).

The seconds from the kill to the new primary and to the first 200 are printed (`-s`);
docs/deploy.md quotes them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
from tests.api.test_sign_cosmos import PRIVATE, TRANSFER
from tests.conftest import TEST_MASTER_KEY, TLS, chainkeys_cli, wait_for
from tests.process.bounds import TIMEOUTS
from tests.process.ha_cluster import AutoFailover, Node, auto_failover
from tests.process.test_process import Proc, start

from chainkeys.audit.chain import link_committed
from chainkeys.bootstrap import Services, open_services
from chainkeys.config import Settings

pytestmark = [pytest.mark.slow, pytest.mark.long(40)]

REQUEST_TIMEOUT = 20.0  # seconds: a client still waiting then was left hanging
CLIENTS = 6  # threads, half on each replica
CAP = 40  # uatom a day, per capped tenant: each failover's transfers spend it across the kill
UNAVAILABLE = {
    "success": False,
    "message": "storage is unavailable; try again",
    "code": "storage_unavailable",
}
T = TypeVar("T")
SIGN = f"/cosmos/{TRANSFER['fromAddress']}/sign-transfer"


@dataclass
class Load:
    """Clients in threads until `stop`; what each was told, and when."""

    procs: list[Proc]
    hot: str  # token of the tenant without a policy: creates and signs
    capped: str  # token of the tenant whose transfers a 24 h cap counts
    phase: int  # (sequence numbers of its own: each transfer it signs is new)
    stop: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    keyed: dict[str, str] = field(default_factory=dict)  # Idempotency-Key -> address
    signed: dict[str, float] = field(default_factory=dict)  # tx hash -> when answered 200
    spent: dict[str, float] = field(default_factory=dict)  # capped tx hash -> when (200)
    refused: list[float] = field(default_factory=list)  # when the cap said no (403)
    writes: list[tuple[float, float]] = field(default_factory=list)  # sent, answered: 200s
    unavailable: int = 0
    slowest: float = 0.0  # seconds, the longest any request took
    errors: list[str] = field(default_factory=list)
    _threads: list[threading.Thread] = field(default_factory=list)
    _sequence: Iterator[int] = field(default_factory=lambda: iter(range(10**9)))

    def _next(self) -> int:
        with self.lock:
            return self.phase * 10**6 + next(self._sequence)

    def _send(
        self,
        c: httpx.Client,
        path: str,
        body: dict[str, Any],
        headers: dict[str, str] | None = None,
    ) -> httpx.Response | None:
        """The answer, None for a 503 (the envelope checked); an error recorded."""
        asked = time.monotonic()
        try:
            r = c.post(path, json=body, headers=headers)
        except httpx.HTTPError as exc:  # no answer within the request timeout
            with self.lock:
                self.errors.append(f"POST {path}: {type(exc).__name__}: {exc}")
            return None
        with self.lock:
            self.slowest = max(self.slowest, time.monotonic() - asked)
        if r.status_code == 503 and r.json() == UNAVAILABLE:
            with self.lock:
                self.unavailable += 1
            time.sleep(0.05)  # pacing: a client told 503 waits a moment before it asks again
            return None
        if r.status_code == 200:
            with self.lock:
                self.writes.append((asked, time.monotonic()))
        return r

    def _unexpected(self, r: httpx.Response) -> None:
        with self.lock:
            self.errors.append(f"{r.request.url.path}: {r.status_code} {r.text}")

    def keyed_create(self, c: httpx.Client) -> None:
        key = uuid.uuid4().hex
        deadline = time.monotonic() + 90  # ends a broken run
        while time.monotonic() < deadline:
            r = self._send(c, "/cosmos", {}, {"Idempotency-Key": key, "Authorization": self.hot})
            if r is None:
                continue
            if r.status_code != 200:
                return self._unexpected(r)
            with self.lock:
                self.keyed[key] = r.json()["data"]["data"]["address"]
            return None
        with self.lock:
            self.errors.append(f"keyed create {key} never answered 200")
        return None

    def sign(self, c: httpx.Client) -> None:
        body = {**TRANSFER, "sequence": self._next()}
        r = self._send(c, SIGN, body, {"Authorization": self.hot})
        if r is None:
            return  # a 503: signed or not, the client was not told it was
        if r.status_code != 200:
            return self._unexpected(r)
        with self.lock:
            self.signed[r.json()["data"]["txHash"]] = time.monotonic()
        return None

    def capped_transfer(self, c: httpx.Client) -> None:
        body = {**TRANSFER, "amount": "1", "feeAmount": "0", "sequence": self._next()}
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:  # the same transfer again after a 503
            r = self._send(c, SIGN, body, {"Authorization": self.capped})
            if r is None:
                continue
            if r.status_code == 200:
                with self.lock:
                    self.spent[r.json()["data"]["txHash"]] = time.monotonic()
            elif r.status_code == 403 and r.json()["code"] == "policy_denied":
                with self.lock:
                    self.refused.append(time.monotonic())
            else:
                self._unexpected(r)
            return
        with self.lock:
            self.errors.append("a capped transfer never answered other than 503")

    def _client(self, proc: Proc) -> None:
        steps = (self.keyed_create, self.sign, self.capped_transfer)
        with httpx.Client(verify=TLS, base_url=proc.base_url, timeout=REQUEST_TIMEOUT) as c:
            i = 0
            while not self.stop.is_set():
                steps[i % len(steps)](c)
                i += 1

    def __enter__(self) -> Load:
        for i in range(CLIENTS):
            proc = self.procs[i % len(self.procs)]
            t = threading.Thread(target=self._client, args=(proc,), daemon=True)
            t.start()
            self._threads.append(t)
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for t in self._threads:
            t.join(120)

    def count(self, what: Callable[[Load], T]) -> T:
        with self.lock:
            return what(self)


def ready(proc: Proc) -> int:
    return httpx.get(f"{proc.base_url}/readyz", verify=TLS, timeout=REQUEST_TIMEOUT).status_code


def with_services(settings: Settings, work: Callable[[Services], Any]) -> Any:
    async def main() -> Any:
        svc = await open_services(settings)
        try:
            return await work(svc)
        finally:
            await svc.close()

    return asyncio.run(main())


@dataclass
class Deployment:
    """The cluster, the two replicas, and the tokens of the tenants."""

    ha: AutoFailover
    procs: list[Proc]
    settings: Settings
    tokens: dict[str, str]
    tenants: dict[str, str]  # token name -> tenant id


@contextlib.contextmanager
def deployed(ha: AutoFailover, tmp_path: Path, capped: list[str]) -> Iterator[Deployment]:
    """Two replicas on `ha`'s URL; the tenants' tokens (`hot`, and each of `capped`,
    whose policy caps cosmoshub transfers at CAP uatom a day), each with the account
    the transfers are signed with."""
    url = ha.url()
    settings = Settings(database_url=url, master_key=TEST_MASTER_KEY, data_dir=tmp_path / "cli")
    names = ["hot", *capped]

    async def prepare(svc: Services) -> tuple[dict[str, str], dict[str, str]]:
        tokens, tenants = {}, {}
        for name in names:
            row, tokens[name] = await svc.tokens.create(name, "failover test")
            tenants[name] = row.tenant_id
            if name in capped:
                rule = {
                    "family": "cosmos",
                    "network": "cosmoshub",
                    "max_per_day": {"uatom": str(CAP)},
                }
                await svc.policies.set(name, json.dumps({"rules": [rule]}), "json")
        return tokens, tenants

    tokens, tenants = with_services(settings, prepare)
    procs: list[Proc] = []
    try:
        for i in range(2):
            env = {
                "CHAINKEYS_DATABASE_URL": url,
                "CHAINKEYS_MASTER_KEY": TEST_MASTER_KEY,
                "CHAINKEYS_DATA_DIR": str(tmp_path / f"data{i}"),
                **TIMEOUTS,
            }
            procs.append(start(env, tmp_path / f"replica{i}.log"))
        for name in names:  # the account every transfer is signed with
            r = httpx.post(
                f"{procs[0].base_url}/cosmos",
                json={"private_key": PRIVATE},
                headers={"Authorization": tokens[name]},
                verify=TLS,
            )
            assert r.status_code == 200, r.text
        yield Deployment(ha, procs, settings, tokens, tenants)
    finally:
        logs = [proc.stop() for proc in procs]
    for log in logs:
        assert "Traceback" not in log


@pytest.fixture
def deployment(tmp_path: Path) -> Iterator[Deployment]:
    with auto_failover() as ha, deployed(ha, tmp_path, ["capped-1", "capped-2"]) as d:
        yield d


@dataclass
class Switch:
    """One failover's figures: seconds from the kill."""

    promoted: float  # until the monitor had the standby promoted
    served: float  # until the first write sent after it was answered 200
    slowest: float  # the longest any request took (the whole run)
    unavailable: int  # 503s told (the whole run)
    before: dict[str, int]  # 200s answered before the kill: keyed, signed, spent


def fail_over(d: Deployment, load: Load, victim: Node) -> Switch:
    """Kill `victim`'s machine under `load` once it is well under way; wait until
    service resumes on the other node and the capped tenant has spent its cap there."""
    ha = d.ha
    assert ha.sql(victim, "SHOW synchronous_commit") == "on"
    assert ha.synchronous(victim) != ""  # commits wait for the standby
    wait_for(
        lambda: load.count(lambda s: min(len(s.keyed), len(s.signed))) >= 5
        and load.count(lambda s: len(s.spent)) >= CAP // 2,
        "the load under way",
    )
    killed = time.monotonic()
    ha.kill(victim)
    gone = time.monotonic()  # a request sent from now on cannot reach the old primary
    with load.lock:
        before = {"keyed": len(load.keyed), "signed": len(load.signed), "spent": len(load.spent)}
    for proc in d.procs:  # each replica has its own connections to lose
        wait_for(lambda: ready(proc) == 503, "/readyz saying the database is down")  # noqa: B023
    wait_for(lambda: ha.primary() is ha.other(victim), "the standby promoted")
    promoted = time.monotonic() - killed
    for proc in d.procs:
        wait_for(lambda: ready(proc) == 200, "/readyz back on the new primary")  # noqa: B023
    wait_for(
        lambda: load.count(lambda s: sum(1 for t in s.refused if t > killed)) > 0,
        "the cap spent on the new primary",
    )
    wait_for(
        lambda: load.count(lambda s: len(s.keyed)) >= before["keyed"] + 5,
        "creates on the new primary",
    )
    served = load.count(lambda s: min(done for sent, done in s.writes if sent > gone)) - killed
    return Switch(promoted, served, 0.0, 0, before)


@dataclass
class Told:
    """What the clients were told 200 for, over every failover."""

    keyed: dict[str, str] = field(default_factory=dict)
    signed: set[str] = field(default_factory=set)

    def add(self, load: Load) -> None:
        assert not load.errors, load.errors[:5]
        self.keyed.update(load.keyed)
        self.signed.update(load.signed)


def check(d: Deployment, told: Told, load: Load, primary: Node, cap: str) -> None:
    """What the clients were told against the new primary's rows."""
    ha, hot, capped = d.ha, d.tenants["hot"], d.tenants[cap]
    accounts = ha.fetch(
        primary, "SELECT address FROM accounts WHERE tenant_id = $1 AND family = 'cosmos'", hot
    )
    addresses = {r[0] for r in accounts} - {TRANSFER["fromAddress"]}
    # every keyed create told 200, and exactly one account per key
    assert set(told.keyed.values()) == addresses
    assert len(told.keyed) == len(addresses)
    created = ha.sql(
        primary,
        "SELECT count(*) FROM audit WHERE tenant_id = $1 AND action = 'create' AND outcome = 'ok'",
        hot,
    )
    assert created == len(addresses)
    # every signature told 200 has its audit row (the row holds its tx id and digest)
    audited = ha.fetch(
        primary,
        "SELECT tenant_id, details FROM audit WHERE action = 'sign' "
        "AND outcome = 'ok' AND tenant_id = ANY($1::text[])",
        [hot, capped],
    )
    tx_ids: dict[str, dict[str, str]] = {hot: {}, capped: {}}
    for tenant, details in audited:
        found = json.loads(details)
        tx_ids[tenant][found["tx_id"]] = found["digest"]
    assert told.signed <= set(tx_ids[hot])
    # every capped signature told 200 counted once, and the cap spent exactly: it was
    # reached (a 403 said so), and no more was signed
    assert set(load.spent) <= set(tx_ids[capped])
    spends = ha.fetch(
        primary, "SELECT digest, amount FROM policy_spends WHERE tenant_id = $1", capped
    )
    digests = [r[0] for r in spends]
    assert len(digests) == len(set(digests))
    assert {tx_ids[capped][tx] for tx in load.spent} <= set(digests)
    assert len(load.spent) <= CAP
    assert sum(Decimal(r[1]) for r in spends) == CAP
    total = ha.fetch(primary, "SELECT total FROM policy_totals WHERE tenant_id = $1", capped)
    assert [Decimal(r[0]) for r in total] == [CAP]


def caches_follow(d: Deployment, token: str) -> None:
    """A change through one replica reaches the other's caches: its LISTEN connection
    (store/postgres/watch.py) followed the primary too (on a standby it would hear
    nothing, and keep serving what it cached)."""
    a, b = (
        httpx.Client(
            verify=TLS,
            base_url=p.base_url,
            headers={"Authorization": token},
            timeout=REQUEST_TIMEOUT,
        )
        for p in d.procs
    )
    with a, b:
        made = a.post("/cosmos", json={})
        assert made.status_code == 200, made.text
        name = made.json()["data"]["data"]["address"]
        assert b.get(f"/cosmos/{name}").status_code == 200  # (now in b's cache)
        assert a.delete(f"/cosmos/{name}").status_code == 200
        wait_for(lambda: b.get(f"/cosmos/{name}").status_code == 404, "the other's delete")


def verify_audit(d: Deployment) -> None:
    """Every committed row linked, then `chainkeys audit verify` and
    `chainkeys integrity verify`."""

    async def link(svc: Services) -> int:
        assert svc.barrier.integrity is not None
        return await link_committed(svc.db, svc.barrier.integrity)

    # The servers' own round links within seconds: what it left is linked here (often
    # nothing), so that verify reads every committed row linked.
    with_services(d.settings, link)
    env = {
        "CHAINKEYS_DATABASE_URL": d.ha.url(),
        "CHAINKEYS_MASTER_KEY": TEST_MASTER_KEY,
        "CHAINKEYS_DATA_DIR": str(d.settings.data_dir),
    }
    done = chainkeys_cli("audit", "verify", env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    done = chainkeys_cli("integrity", "verify", env=env)  # every row and head as pinned
    assert done.returncode == 0, done.stdout + done.stderr


def test_failover_and_back_under_load_lose_nothing_acknowledged(deployment: Deployment) -> None:
    d, ha, told = deployment, deployment.ha, Told()
    first = ha.primary()
    assert first is not None
    for phase, (victim, cap) in enumerate([(first, "capped-1"), (ha.other(first), "capped-2")]):
        if phase == 1:  # the old primary rejoins, as the standby of the new one
            ha.run(first)
            ha.wait_replicating(ha.other(first))
        with Load(d.procs, d.tokens["hot"], d.tokens[cap], phase) as load:
            switch = fail_over(d, load, victim)
        switch.slowest, switch.unavailable = load.slowest, load.unavailable
        print(f"failover {phase + 1}: {switch}")
        told.add(load)
        survivor = ha.other(victim)
        assert ha.primary() is survivor
        check(d, told, load, survivor, cap)
        caches_follow(d, d.tokens[cap])
        assert all(n > 0 for n in switch.before.values())  # acknowledged before the kill
        assert load.unavailable > 0  # the switch was seen, and told as it is
        verify_audit(d)
