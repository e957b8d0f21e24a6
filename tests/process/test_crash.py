"""Crash safety: `kill -9` a real server in the middle of concurrent creates and deletes.

After a restart on the same data: every create that was answered 200 exists
and its sealed key opens to the key the response returned; every delete that
was answered 200 stays deleted; and every stored row is whole (its sealed
secret opens under its own tenant/family/name and derives its own address).
Requests cut off by the kill may have happened or not; either way no partial
row may remain.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from sqlalchemy import select
from tests.conftest import BACKENDS, TLS, drop_pg_database, make_pg_database
from tests.process.test_process import first_token, start

from chainkeys.bootstrap import open_services
from chainkeys.chains.registry import FAMILIES
from chainkeys.chains.secp256k1 import key_from_secret
from chainkeys.config import Settings
from chainkeys.store.tables import accounts
from chainkeys.vault.seal import Context

pytestmark = pytest.mark.slow
FAMILY_CYCLE = ("cosmos", "dogecoin", "eos", "litecoin")
WORKERS = 8
SEEDED = 60  # Cosmos accounts made before the stream, for the deletes
ANSWERED_BEFORE_KILL = 150


@dataclass
class Outcome:
    op: str  # create | delete
    family: str
    name: str = ""
    private_key: str = ""
    status: int = 0  # 0: no answer (cut off by the kill)


@pytest.fixture(params=BACKENDS)
def crash_env(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[dict[str, str]]:
    """A fresh data dir (and database); the master key comes from the key file."""
    for var in (
        "CHAINKEYS_MASTER_KEY",
        "CHAINKEYS_DATABASE_URL",
        "CHAINKEYS_RATE_LIMIT_PER_SECOND",
    ):
        monkeypatch.delenv(var, raising=False)
    env = {"CHAINKEYS_DATA_DIR": str(tmp_path / "data"), "CHAINKEYS_LOG_LEVEL": "WARNING"}
    pg_url = None
    if request.param == "postgresql":
        pg_url = make_pg_database()
        env["CHAINKEYS_DATABASE_URL"] = pg_url
    yield env
    if pg_url:
        drop_pg_database(pg_url)


def created_name(family: str, body: dict[str, object]) -> tuple[str, str]:
    data = body["data"]
    assert isinstance(data, dict)
    fields = data["data"] if family == "cosmos" else data
    name = fields["address"]
    return str(name), str(fields["private_key"])


def stream(
    base_url: str, token: str, seeds: list[str], stop: threading.Event
) -> tuple[list[Outcome], int]:
    """Creates (every family) and Cosmos deletes from WORKERS threads until the server dies."""
    outcomes: list[Outcome] = []
    lock = threading.Lock()
    answered = [0]

    def worker(n: int) -> None:
        with httpx.Client(
            verify=TLS, base_url=base_url, headers={"Authorization": token}, timeout=30
        ) as c:
            i = 0
            while True:
                i += 1
                with lock:
                    delete = i % 3 == 0 and bool(seeds)
                    target = seeds.pop() if delete else ""
                family = "cosmos" if delete else FAMILY_CYCLE[(n + i) % 4]
                outcome = Outcome("delete" if delete else "create", family, name=target)
                with lock:
                    outcomes.append(outcome)
                try:
                    if delete:
                        r = c.delete(f"/cosmos/{target}")
                    else:
                        r = c.post(f"/{family}", json={})
                        if r.status_code == 200:
                            outcome.name, outcome.private_key = created_name(family, r.json())
                except httpx.TransportError:
                    return  # the server is gone; this request's fate is unknown
                outcome.status = r.status_code
                assert r.status_code == 200, r.text
                with lock:
                    answered[0] += 1
                    if answered[0] >= ANSWERED_BEFORE_KILL:
                        stop.set()

    with concurrent.futures.ThreadPoolExecutor(WORKERS) as pool:
        for future in [pool.submit(worker, n) for n in range(WORKERS)]:
            future.result()  # each returns once the server is gone
    return outcomes, answered[0]


def test_kill_9_mid_stream_loses_no_acknowledged_write_and_leaves_no_partial_row(
    crash_env: dict[str, str], tmp_path: Path
) -> None:
    proc = start(crash_env, tmp_path / "first.log")
    token = first_token(proc)
    seeds: list[str] = []
    with httpx.Client(
        verify=TLS, base_url=proc.base_url, headers={"Authorization": token}, timeout=30
    ) as c:
        for _ in range(SEEDED):
            seeds.append(c.post("/cosmos", json={}).json()["data"]["data"]["address"])
    seeded = set(seeds)

    stop = threading.Event()

    def kill_when_busy() -> None:
        stop.wait(60)
        proc.popen.kill()  # SIGKILL: no shutdown, no flush, no finally

    killer = threading.Thread(target=kill_when_busy)
    killer.start()
    outcomes, answered = stream(proc.base_url, token, seeds, stop)
    killer.join()
    assert proc.popen.wait(10) == -9
    cut_off = [o for o in outcomes if o.status == 0]
    assert answered >= ANSWERED_BEFORE_KILL
    assert cut_off, "the kill should land while requests are in flight"

    created = [o for o in outcomes if o.op == "create" and o.status == 200]
    deleted = {o.name for o in outcomes if o.op == "delete" and o.status == 200}
    assert created and deleted

    proc = start(crash_env, tmp_path / "second.log")
    try:
        with httpx.Client(
            verify=TLS, base_url=proc.base_url, headers={"Authorization": token}, timeout=30
        ) as c:
            for o in created:
                assert c.get(f"/{o.family}/{o.name}").status_code == 200, o
            for name in deleted:
                assert c.get(f"/cosmos/{name}").status_code == 404, name
            assert c.post("/cosmos", json={}).status_code == 200  # and it still works
    finally:
        proc.stop()

    rows = asyncio.run(open_every_row(crash_env))
    keys = {(o.family, o.name): o.private_key for o in created}
    for (family, name), secret in rows.items():
        if (family, name) in keys:
            fam = FAMILIES[family]
            returned = keys[(family, name)]
            network = fam.network(None)
            assert fam.parse_private_key(returned, network).secret == secret, (family, name)
    assert set(keys) <= set(rows)
    assert not deleted & {name for family, name in rows if family == "cosmos"}
    unknown_deletes = {o.name for o in cut_off if o.op == "delete"}
    never_deleted = seeded - deleted - unknown_deletes
    assert never_deleted <= {name for family, name in rows if family == "cosmos"}


async def open_every_row(env: dict[str, str]) -> dict[tuple[str, str], bytes]:
    """Every stored account, opened and checked against its own public fields."""
    settings = Settings(
        data_dir=Path(env["CHAINKEYS_DATA_DIR"]), database_url=env.get("CHAINKEYS_DATABASE_URL")
    )
    svc = await open_services(settings)
    opened: dict[tuple[str, str], bytes] = {}
    try:
        after = 0
        while True:
            async with svc.db.read() as tx:
                page = select(accounts).where(accounts.c.id > after).order_by(accounts.c.id)
                rows = (await tx.execute(page.limit(500))).all()
            if not rows:
                break
            for row in rows:
                assert row.secret, row.name
                secret = svc.barrier.open(
                    bytes(row.secret), row.key_id, Context(row.tenant_id, row.family, row.name)
                )
                details = json.loads(row.details)
                fam = FAMILIES[row.family]
                key = key_from_secret(secret, compressed=bool(details.get("compressed", True)))
                given: dict[str, str] = {
                    "address_type": details.get("address_type") or "",
                    "name": row.name,
                }
                options = fam.options(
                    {s.name: given[s.name] for s in fam.option_specs if given[s.name]}, key
                )
                account = fam.account(key, fam.network(row.network), options)
                assert (account.address, account.public_key) == (row.address, row.public_key), (
                    row.name
                )
                opened[(row.family, row.name)] = secret
            after = rows[-1].id or after
    finally:
        await svc.close()
    return opened
