"""Several chainkeys processes on one database: replicas on PostgreSQL, `serve --workers N`.

Hundreds of concurrent mixed requests go through every process at once:
creates on every family, the same key imported through both, the same EOS
name claimed through both, Cosmos deletes arriving twice. Races resolve to
exactly one 200 and the rest 409 (or 404 for the second delete); nothing is
duplicated or lost; no request answers 500 or 503. Afterwards every account
is checked through every process.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import random
import re
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from tests.conftest import (
    BACKENDS,
    TEST_MASTER_KEY,
    TLS,
    chainkeys_cli,
    drop_pg_database,
    make_pg_database,
)
from tests.process.test_process import Proc, first_token, start

pytestmark = [pytest.mark.slow, pytest.mark.long(90)]
FAMILIES = ("cosmos", "dogecoin", "eos", "litecoin")


@dataclass
class Op:
    """One request, sent to one process; `group` names the race it belongs to."""

    proc: int
    method: str
    path: str
    body: dict[str, Any] | None = None
    group: str = ""
    status: int = 0
    response: dict[str, Any] = field(default_factory=dict)


class Clients:
    """One keep-alive client per (thread, process); all closed at the end."""

    def __init__(self, procs: list[Proc], token: str) -> None:
        self.procs, self.token = procs, token
        self._local = threading.local()
        self._all: list[httpx.Client] = []
        self._lock = threading.Lock()

    def get(self, i: int) -> httpx.Client:
        mine: dict[int, httpx.Client] = self._local.__dict__.setdefault("clients", {})
        if i not in mine:
            client = httpx.Client(
                verify=TLS,
                base_url=self.procs[i].base_url,
                headers={"Authorization": self.token},
                timeout=60,
            )
            mine[i] = client
            with self._lock:
                self._all.append(client)
        return mine[i]

    def close(self) -> None:
        for client in self._all:
            client.close()


def run_all(clients: Clients, ops: list[Op], threads: int = 24) -> None:
    def one(op: Op) -> None:
        c = clients.get(op.proc)
        r = (
            c.request(op.method, op.path, json=op.body)
            if op.body is not None
            else c.request(op.method, op.path)
        )
        op.status, op.response = r.status_code, r.json()

    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        list(pool.map(one, ops))


def name_of(family: str, body: dict[str, Any]) -> str:
    """The account name from a create response (each family has its shape)."""
    inner = body["data"]["data"] if family == "cosmos" else body["data"]
    return str(inner["address"])


def listed(client: httpx.Client, family: str) -> list[str]:
    r = client.get(f"/{family}", params={"limit": 1000})
    assert r.status_code == 200, r.text
    keys = r.json()["data"]["data"]["keys"] if family == "cosmos" else r.json()["data"]["keys"]
    return [k["address"] if isinstance(k, dict) else k for k in keys]


def key_hex(n: int) -> str:
    return f"{n:064x}"


def mixed_workload(procs: int, seed: int, victims: list[str], keepers: dict[str, str]) -> list[Op]:
    """Creates, same-key imports, same-name EOS claims, double deletes, gets, lists."""
    ops: list[Op] = []
    rr = iter(range(10**6))
    for i in range(80):
        ops.append(Op(next(rr) % procs, "POST", f"/{FAMILIES[i % 4]}", {}, "create"))
    for k in range(6):
        for family in FAMILIES:
            for attempt in range(4):  # the same key through every process at once
                body = {"private_key": key_hex(seed * 1000 + k + 1)}
                ops.append(Op(attempt % procs, "POST", f"/{family}", body, f"import:{family}:{k}"))
    for k in range(6):
        name = f"replicarace{'abcdef'[k]}"  # EOS names: a-z and 1-5, 12 characters
        for attempt in range(4):
            ops.append(Op(attempt % procs, "POST", "/eos", {"name": name}, f"eosname:{name}"))
    for name in victims:
        for attempt in range(2):  # the same delete twice, through two processes if there are
            ops.append(Op(attempt % procs, "DELETE", f"/cosmos/{name}", None, f"delete:{name}"))
    for family_name, family in keepers.items():
        for attempt in range(2):
            ops.append(Op(attempt % procs, "GET", f"/{family}/{family_name}", None, "get"))
    for i in range(8):
        ops.append(Op(i % procs, "GET", f"/{FAMILIES[i % 4]}", None, "list"))
    random.Random(seed).shuffle(ops)
    return ops


def check_outcomes(ops: list[Op]) -> dict[str, set[str]]:
    """Every race resolved once; returns the names each family must now hold (added)."""
    statuses = Counter(op.status for op in ops)
    assert statuses.keys() <= {200, 404, 409}, statuses  # never 500, never 503
    groups: dict[str, list[Op]] = defaultdict(list)
    for op in ops:
        groups[op.group].append(op)
    added: dict[str, set[str]] = defaultdict(set)
    for group, members in groups.items():
        codes = Counter(m.status for m in members)
        if group in ("create", "get", "list"):
            assert codes == {200: len(members)}, (group, codes)
        elif group.startswith(("import:", "eosname:")):
            assert codes == {200: 1, 409: len(members) - 1}, (group, codes)
            assert all(m.response["code"] == "account_exists" for m in members if m.status == 409)
        elif group.startswith("delete:"):
            assert codes == {200: 1, 404: len(members) - 1}, (group, codes)
        for m in members:
            if m.method == "POST" and m.status == 200:
                family = m.path.strip("/")
                name = name_of(family, m.response)
                assert name not in added[family], f"{family} {name} created twice"
                added[family].add(name)
    return added


@dataclass
class Deployment:
    procs: list[Proc]
    token: str


def start_replicas(tmp_path: Path, url: str | None, count: int, *args: str) -> list[Proc]:
    procs = []
    for i in range(count):
        env = {
            "CHAINKEYS_DATA_DIR": str(tmp_path / ("data" if url is None else f"data{i}")),
            "CHAINKEYS_MASTER_KEY": TEST_MASTER_KEY,  # one key shared by every replica
            "CHAINKEYS_DATABASE_URL": url or "",
        }
        if url is None:
            del env["CHAINKEYS_DATABASE_URL"]
        procs.append(start(env, tmp_path / f"replica{i}.log", *args))
    return procs


@pytest.fixture
def replicas(tmp_path: Path) -> Iterator[Deployment]:
    """Two `chainkeys serve` processes on one fresh PostgreSQL database."""
    url = make_pg_database()
    procs: list[Proc] = []
    try:
        procs = start_replicas(tmp_path, url, 2)
        yield Deployment(procs, first_token(procs[0]))
    finally:
        for proc in procs:
            proc.stop()
        drop_pg_database(url)


def exercise(procs: list[Proc], token: str, seed: int) -> None:
    """Prepare, race, then check every account through every process."""
    clients = Clients(procs, token)
    try:
        setup = [Op(i % len(procs), "POST", "/cosmos", {}, "victim") for i in range(24)]
        setup += [Op(i % len(procs), "POST", f"/{FAMILIES[i % 4]}", {}, "keeper") for i in range(8)]
        run_all(clients, setup)
        assert {op.status for op in setup} == {200}
        victims = [name_of("cosmos", op.response) for op in setup if op.group == "victim"]
        keepers = {
            name_of(op.path.strip("/"), op.response): op.path.strip("/")
            for op in setup
            if op.group == "keeper"
        }

        ops = mixed_workload(len(procs), seed, victims, keepers)
        run_all(clients, ops)
        added = check_outcomes(ops)

        expected = {f: set(added[f]) for f in FAMILIES}
        for name, family in keepers.items():
            expected[family].add(name)
        for i in range(len(procs)):
            c = clients.get(i)
            for family in FAMILIES:
                names = listed(c, family)
                assert len(names) == len(set(names)), f"{family}: a duplicate in the list"
                assert set(names) == expected[family], f"{family} differs through process {i}"
                for name in expected[family]:
                    assert c.get(f"/{family}/{name}").status_code == 200
            for name in victims:
                assert c.get(f"/cosmos/{name}").status_code == 404  # stays deleted
    finally:
        clients.close()


def test_two_replicas_on_one_postgresql_database(replicas: Deployment) -> None:
    exercise(replicas.procs, replicas.token, seed=1)
    for proc in replicas.procs:
        log = proc.stop()
        assert "unhandled" not in log and "Traceback" not in log


def test_a_token_issued_through_one_replica_works_on_the_other_and_revocation_too(
    replicas: Deployment, tmp_path: Path
) -> None:
    a, b = replicas.procs
    with httpx.Client(
        verify=TLS, base_url=a.base_url, headers={"Authorization": replicas.token}
    ) as c:
        created = c.post("/dogecoin", json={})
        assert created.status_code == 200
    name = created.json()["address"]
    env = {"CHAINKEYS_DATABASE_URL": _url_of(a), "CHAINKEYS_MASTER_KEY": TEST_MASTER_KEY}
    made = chainkeys_cli("token", "create", "--tenant", "other", env=env)
    assert made.returncode == 0, made.stderr
    other = made.stdout.strip().splitlines()[-1]
    with httpx.Client(verify=TLS, base_url=b.base_url, headers={"Authorization": other}) as c:
        assert c.get(f"/dogecoin/{name}").status_code == 404  # tenants stay apart
        assert c.get("/dogecoin").status_code == 200
        token_id = re.search(r"token id (\w+)", made.stdout)
        assert token_id is not None
        revoked = chainkeys_cli("token", "revoke", token_id.group(1), env=env)
        assert revoked.returncode == 0, revoked.stderr
        assert c.get("/dogecoin").status_code == 401  # at once, on every replica
    with httpx.Client(
        verify=TLS, base_url=b.base_url, headers={"Authorization": replicas.token}
    ) as c:
        assert c.get(f"/dogecoin/{name}").status_code == 200


def _url_of(proc: Proc) -> str:
    cmdline = Path(f"/proc/{proc.popen.pid}/environ").read_bytes().split(b"\0")
    for item in cmdline:
        if item.startswith(b"CHAINKEYS_DATABASE_URL="):
            return item.split(b"=", 1)[1].decode()
    raise AssertionError("no database URL in the replica's environment")


@pytest.mark.parametrize("backend", BACKENDS, indirect=True)
def test_serve_with_two_workers(backend: str, tmp_path: Path) -> None:
    url = make_pg_database() if backend == "postgresql" else None
    procs: list[Proc] = []
    try:
        procs = start_replicas(tmp_path, url, 1, "--workers", "2")
        exercise(procs, first_token(procs[0]), seed=2)
        # /metrics merges both workers' counters (prometheus_client multiprocess mode)
        text = httpx.get(f"{procs[0].base_url}/metrics", verify=TLS, timeout=10).text
        served = sum(
            s.value
            for f in text_string_to_metric_families(text)
            for s in f.samples
            if s.name == "chainkeys_requests_total"
        )
        assert served >= 10
        log = procs[0].stop()
        # The supervisor logs each worker it started and stopped.
        assert len(set(re.findall(r"Stopped worker-(\d+)", log))) == 2
        assert "unhandled" not in log and "Traceback" not in log
    finally:
        for proc in procs:
            proc.stop()
        if url:
            drop_pg_database(url)


def test_replicas_started_together_on_an_empty_database(tmp_path: Path) -> None:
    """A fresh deployment: three replicas at once; one schema, one check record, one token."""
    url = make_pg_database()
    procs: list[Proc] = []
    try:
        for i in range(3):
            env = {
                "CHAINKEYS_DATABASE_URL": url,
                "CHAINKEYS_DATA_DIR": str(tmp_path / f"data{i}"),
                "CHAINKEYS_MASTER_KEY": TEST_MASTER_KEY,
            }
            procs.append(start(env, tmp_path / f"replica{i}.log", wait=False))
        deadline = time.monotonic() + 60
        for proc in procs:
            while True:
                assert proc.popen.poll() is None, f"a replica exited: {proc.log_path.read_text()}"
                with contextlib.suppress(httpx.HTTPError):
                    if (
                        httpx.get(f"{proc.base_url}/healthz", verify=TLS, timeout=1).status_code
                        == 200
                    ):
                        break
                assert time.monotonic() < deadline, "a replica did not start"
                time.sleep(0.1)
        # the token file is written before a replica serves (its message comes once it answers)
        issued = [
            p for i, p in enumerate(procs) if (tmp_path / f"data{i}" / "first-token").exists()
        ]
        assert len(issued) == 1, "exactly one replica issues the first token"
        token = first_token(issued[0])
        assert ["first start" in p.stdout for p in procs].count(True) == 1
        for proc in procs:
            with httpx.Client(
                verify=TLS, base_url=proc.base_url, headers={"Authorization": token}
            ) as c:
                assert c.get("/cosmos").status_code == 200
    finally:
        for proc in procs:
            proc.stop()
        drop_pg_database(url)


def race_transfers(
    replicas: Deployment, tmp_path: Path, rules: list[dict[str, Any]], count: int, threads: int
) -> list[Op]:
    """Import the transfer's key, set `rules` by the CLI, then `count` transfers of 1
    uatom through both replicas at once; the ops, answered."""
    from tests.api.test_sign_cosmos import PRIVATE, TRANSFER

    a, _ = replicas.procs
    with httpx.Client(
        verify=TLS, base_url=a.base_url, headers={"Authorization": replicas.token}
    ) as c:
        assert c.post("/cosmos", json={"private_key": PRIVATE}).status_code == 200
    (tmp_path / "policy.json").write_text(json.dumps({"rules": rules}))
    env = {"CHAINKEYS_DATABASE_URL": _url_of(a), "CHAINKEYS_MASTER_KEY": TEST_MASTER_KEY}
    done = chainkeys_cli("policy", "set", "default", str(tmp_path / "policy.json"), env=env)
    assert done.returncode == 0, done.stderr
    path = f"/cosmos/{TRANSFER['fromAddress']}/sign-transfer"
    ops = [
        Op(i % 2, "POST", path, {**TRANSFER, "amount": "1", "feeAmount": "0", "sequence": i})
        for i in range(count)
    ]
    clients = Clients(replicas.procs, replicas.token)
    try:
        run_all(clients, ops, threads=threads)
    finally:
        clients.close()
    return ops


def test_two_replicas_never_overshoot_a_daily_cap(replicas: Deployment, tmp_path: Path) -> None:
    """200 concurrent transfers through both replicas against a 24 h cap that admits
    exactly 50: exactly 50 are signed, the rest refused by the policy."""
    rules = [{"family": "cosmos", "network": "cosmoshub", "max_per_day": {"uatom": "50"}}]
    ops = race_transfers(replicas, tmp_path, rules, 200, 32)
    codes = Counter(op.status for op in ops)
    assert codes == {200: 50, 403: 150}, (codes, [op.response for op in ops if op.status >= 500])
    assert {op.response["code"] for op in ops if op.status == 403} == {"policy_denied"}
    assert {op.proc for op in ops if op.status == 200} == {0, 1}  # both replicas signed


def test_two_replicas_never_overspend_a_budget_written_as_a_condition(
    replicas: Deployment, tmp_path: Path
) -> None:
    """docs/policies.md's budget by condition (a deny rule over `spent`): 20 concurrent
    transfers through both replicas against a budget of 5 sign exactly 5 (the condition
    is decided again under the caps' lock, in the transaction that counts)."""
    rules = [
        {
            "family": "cosmos",
            "network": "cosmoshub",
            "effect": "deny",
            "name": "budget",
            "when": "'uatom' in spent && spent['uatom'] >= 5",
        },
        {"family": "cosmos", "network": "cosmoshub"},
    ]
    ops = race_transfers(replicas, tmp_path, rules, 20, 20)
    codes = Counter(op.status for op in ops)
    assert codes == {200: 5, 403: 15}, (codes, [op.response for op in ops if op.status >= 500])
    assert all("budget" in op.response["message"] for op in ops if op.status == 403)
