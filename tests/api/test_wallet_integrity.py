"""HD wallets under a database writer (issue 62), on both engines, through real HTTP: a
next-index counter lowered, put back from an older copy or deleted is refused (500
`integrity_failure`, audited) and no address is handed out twice; a wallet row moved
into another tenant, renamed onto another wallet's name, un-exported, or given another
wallet's sealed phrase is refused. A store from before (no MACs, seed fingerprints
under a key of the wallets' own) starts only once adopted, and then derives exactly
what it derived before."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from alembic import command
from sqlalchemy import delete, insert, select, update
from tests.api.tenants import Tenant
from tests.conftest import BACKENDS, Server, backend_settings, drop_pg_database, own_server
from tests.integrity.stores import as_writer as _sync

from chainkeys.bootstrap import open_services, open_unadopted
from chainkeys.config import Settings
from chainkeys.errors import StartupError
from chainkeys.store import migrate
from chainkeys.store.tables import meta, tenants, wallet_counters, wallets
from chainkeys.vault.adoption import adopt, read
from chainkeys.vault.integrity import CONTEXT, RECORD, Record
from chainkeys.vault.repository import Meta
from chainkeys.vault.seal import Context

ABOUT = "abandon " * 11 + "about"
LEGAL = "legal winner thank year wave sausage worth useful legal winner thank yellow"
# cosmjs DirectSecp256k1HdWallet, "abandon … about", m/44'/118'/0'/0/0 (a known vector)
ABOUT_COSMOS_0 = "cosmos19rl4cm2hmr8afy4kldpxz3fka4jguq0auqdal4"
OLD_SEED_RECORD = "wallet_seed_key"


@pytest.fixture(scope="module", params=BACKENDS)
def srv(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    with own_server(request.param, tmp_path_factory.mktemp("walletmacs")) as s:
        yield s


@pytest.fixture
def t(srv: Server) -> Iterator[Tenant]:
    made = Tenant(srv)
    yield made
    made.client.close()


def _sql(srv: Server, stmt: Any) -> list[dict[str, Any]]:
    """What a database writer runs: SQL on the live store, no master key."""
    assert srv.services is not None
    db = srv.services.db

    async def run() -> list[dict[str, Any]]:
        async with db.write() as tx:
            result = await tx.execute(stmt)
            if not hasattr(stmt, "selected_columns"):  # an UPDATE, INSERT or DELETE
                return []
            return [dict(r._mapping) for r in result.all()]

    return srv.call(run())


def _wallet(c: httpx.Client, mnemonic: str, name: str | None = None) -> str:
    body = {"mnemonic": mnemonic, **({"name": name} if name else {})}
    r = c.post("/wallets", json=body)
    assert r.status_code == 200, r.text
    return str(r.json()["data"]["id"])


def _derive(c: httpx.Client, wallet: str, **kw: Any) -> httpx.Response:
    return c.post(f"/wallets/{wallet}/accounts", json={"family": "cosmos", **kw})


def _addresses(r: httpx.Response) -> list[str]:
    assert r.status_code == 200, r.text
    return [a["address"] for a in r.json()["data"]["accounts"]]


def _refused(r: httpx.Response) -> None:
    assert (r.status_code, r.json()["code"]) == (500, "integrity_failure"), r.text
    assert "address" not in r.text


def _counter(srv: Server, wallet: str) -> dict[str, Any]:
    [row] = _sql(srv, select(wallet_counters).where(wallet_counters.c.wallet_id == wallet))
    return row


def _refusals(t: Tenant) -> list[dict[str, Any]]:
    events = t.client.get("/audit", params={"action": "derive"}).json()["data"]["events"]
    return [e for e in events if e["outcome"] == "integrity_failure"]


@pytest.mark.parametrize("how", ["lowered", "put back", "deleted"])
def test_a_counter_moved_back_hands_out_no_address_twice(srv: Server, t: Tenant, how: str) -> None:
    """Indices 0-2 handed out; then the writer lowers the counter to 1 (its MAC fails),
    puts back the row as it was at 2 (a valid MAC of its own), or deletes it (derive-next
    would start at 0). Derive-next and its preview are refused and audited; nothing new
    is stored. A row put back or deleted changes the tenant's pinned set, so its other
    chains fail closed with it; an edited row is refused on its own. Another tenant
    derives on."""
    wallet = _wallet(t.client, ABOUT)
    given = _addresses(_derive(t.client, wallet, count=2))
    older = _counter(srv, wallet)
    given += _addresses(_derive(t.client, wallet))
    assert given[0] == ABOUT_COSMOS_0 and len(set(given)) == 3
    key = wallet_counters.c.wallet_id == wallet
    if how == "lowered":
        _sql(srv, update(wallet_counters).where(key).values(next_index=1))
    elif how == "put back":
        _sql(
            srv,
            update(wallet_counters)
            .where(key)
            .values(next_index=older["next_index"], mac=older["mac"]),
        )
    else:
        _sql(srv, delete(wallet_counters).where(key))
    _refused(_derive(t.client, wallet))
    _refused(_derive(t.client, wallet, preview=True))
    another_chain = _derive(t.client, wallet, change=1)
    if how == "lowered":
        given += _addresses(another_chain)
    else:
        _refused(another_chain)
    r = t.client.get("/cosmos", params={"limit": 100})
    assert r.status_code == 200, r.text
    listed = [k["address"] for k in r.json()["data"]["data"]["keys"]]
    assert sorted(listed) == sorted(given)  # nothing stored, no address given twice
    assert len(set(given)) == len(given)
    assert len(_refusals(t)) == (2 if how == "lowered" else 3)
    other = Tenant(srv)
    try:
        assert _addresses(_derive(other.client, _wallet(other.client, ABOUT))) == [ABOUT_COSMOS_0]
    finally:
        other.client.close()


def test_a_counter_moved_onto_another_chain_or_tenant_is_refused(srv: Server, t: Tenant) -> None:
    """The counter's chain (its family) or its tenant edited: its MAC binds both."""
    wallet = _wallet(t.client, LEGAL)
    _addresses(_derive(t.client, wallet, count=2))
    key = wallet_counters.c.wallet_id == wallet
    _sql(srv, update(wallet_counters).where(key).values(family="dogecoin", network="mainnet"))
    _refused(t.client.post(f"/wallets/{wallet}/accounts", json={"family": "dogecoin"}))
    _sql(srv, update(wallet_counters).where(key).values(family="cosmos", network="cosmoshub"))
    _addresses(_derive(t.client, wallet))  # put as it was: the same row, the same MAC
    other = Tenant(srv)
    try:
        [theirs] = _sql(srv, select(tenants.c.id).where(tenants.c.name == other.name))
        _sql(srv, update(wallet_counters).where(key).values(tenant_id=theirs["id"]))
        _refused(_derive(t.client, wallet))
    finally:
        other.client.close()


def test_an_edited_wallet_row_is_refused(srv: Server, t: Tenant) -> None:
    """Moved into another tenant, renamed onto another wallet's name, un-exported, or
    given another wallet's sealed phrase: each refused (500 `integrity_failure`), never
    another wallet's or another tenant's addresses."""
    a, b = _wallet(t.client, ABOUT, "alpha"), _wallet(t.client, LEGAL, "beta")
    a_first = _addresses(_derive(t.client, a))
    by_id = wallets.c.id
    [row_a] = _sql(srv, select(wallets).where(by_id == a))
    [row_b] = _sql(srv, select(wallets).where(by_id == b))
    _sql(
        srv,
        update(wallets).where(by_id == a).values(secret=row_b["secret"], key_id=row_b["key_id"]),
    )
    r = _derive(t.client, a, index=5)
    _refused(r)
    _sql(
        srv,
        update(wallets).where(by_id == a).values(secret=row_a["secret"], key_id=row_a["key_id"]),
    )
    assert _addresses(_derive(t.client, a, index=0)) == a_first  # put back: as before
    _sql(srv, update(wallets).where(by_id == b).values(name="gamma"))
    _sql(srv, update(wallets).where(by_id == a).values(name="beta"))
    _refused(_derive(t.client, "beta"))  # the name now on alpha's row
    _refused(t.client.get(f"/wallets/{a}"))
    _refused(t.client.get("/wallets"))
    _sql(srv, update(wallets).where(by_id == a).values(name="alpha"))
    _sql(srv, update(wallets).where(by_id == b).values(name="beta"))
    assert t.client.get("/wallets/alpha").status_code == 200
    other = Tenant(srv)
    try:
        [theirs] = _sql(srv, select(tenants.c.id).where(tenants.c.name == other.name))
        _sql(srv, update(wallets).where(by_id == b).values(tenant_id=theirs["id"]))
        _refused(_derive(other.client, b))
        _refused(other.client.get("/wallets"))
        assert t.client.get(f"/wallets/{b}").status_code == 404  # gone from its tenant
    finally:
        other.client.close()


@pytest.mark.parametrize("backend", BACKENDS, indirect=True)
def test_an_exported_wallet_cleared_by_hand_is_refused(tmp_path: Path, backend: str) -> None:
    """Exported for good: a writer who clears the mark hides nothing, the row fails."""
    with own_server(backend, tmp_path, export_enabled=True) as srv:
        assert srv.services is not None
        _, token = srv.call(
            srv.services.tokens.create("exporter", "ops", frozenset({"read", "create", "export"}))
        )
        with srv.client(token) as c:
            wallet = _wallet(c, LEGAL)
            assert c.post(f"/wallets/{wallet}/export").status_code == 200
            assert c.get(f"/wallets/{wallet}").json()["data"]["exported"] is True
            _sql(srv, update(wallets).where(wallets.c.id == wallet).values(exported=0))
            _refused(c.get(f"/wallets/{wallet}"))


# ---- a store from before: adopted explicitly, the same addresses after ------------------


def _as_before(settings: Settings) -> tuple[str, list[str]]:
    """A store as the release before wrote it: a wallet with indices 0-1 derived, its
    seed fingerprint under a random key of the wallets' own (sealed in `meta`), and an
    integrity record that names neither wallet table. Returns the token and addresses."""

    async def make() -> tuple[str, list[str]]:
        svc = await open_services(settings)
        try:
            _, token = await svc.tokens.create("acme", "ops")
            from chainkeys.wallets.models import DeriveRequest

            who = await svc.tokens.authenticate(token)
            assert who is not None
            view = await svc.wallets.create(who, mnemonic=ABOUT)
            made = await svc.wallets.derive(who, view.id, DeriveRequest("cosmos", count=2))
            old_key = secrets.token_bytes(32)
            phrase = b'{"mnemonic":"' + ABOUT.encode() + b'","passphrase":""}'
            tenant_id = who.tenant_id
            old = hmac.new(old_key, tenant_id.encode() + b"\x00" + phrase, hashlib.sha256)
            barrier = svc.barrier
            sealed = await barrier.seal(old_key, Context("-", "-", OLD_SEED_RECORD, "meta"))
            record = await read(svc.db, barrier)
            assert record is not None
            named = record.adopted - {"wallets", "wallet_counters"}
            older = await barrier.seal(Record(record.key, 3, named, "born").encode(), CONTEXT)
            async with svc.db.write() as tx:
                await Meta.put(tx, OLD_SEED_RECORD, sealed.blob, sealed.key_id)
                await Meta.put(tx, RECORD, older.blob, older.key_id)
                await tx.execute(update(wallets).values(seed_key=old.hexdigest()))
            return token, [a.address for a in made]
        finally:
            await svc.close()

    token, addresses = asyncio.run(make())

    def back_to_0024(conn: Any) -> None:  # what that release's schema held
        command.downgrade(migrate.alembic_config(conn), "0024")
        conn.execute(
            insert(wallet_counters).values(  # a purged wallet's counter
                wallet_id="wal_purged",
                family="cosmos",
                network="cosmoshub",
                address_type="",
                account=0,
                change=0,
                next_index=7,
            )
        )
        command.upgrade(migrate.alembic_config(conn), "head")  # `chainkeys db upgrade`

    _sync(settings, back_to_0024)
    return token, addresses


@pytest.mark.parametrize("backend", BACKENDS, indirect=True)
def test_a_store_from_before_derives_the_same_addresses_once_adopted(
    backend: str, tmp_path: Path
) -> None:
    settings, pg_url = backend_settings(backend, tmp_path / "d")
    try:
        token, before = _as_before(settings)
        assert before[0] == ABOUT_COSMOS_0
        with pytest.raises(StartupError) as refused:
            asyncio.run(open_services(settings))
        assert "never authenticated" in refused.value.message
        assert "wallets" in refused.value.message

        async def adopting() -> None:
            db, barrier = await open_unadopted(settings)
            try:

                async def record(tx: Any, details: dict[str, Any]) -> None:
                    assert details["unauthenticated"]["wallets"] == 1

                await adopt(db, barrier, record)
            finally:
                await db.close()

        asyncio.run(adopting())
        rows = _sync(settings, lambda c: c.execute(select(wallet_counters)).all())
        assert len(rows) == 1 and rows[0].wallet_id != "wal_purged"  # the orphan deleted
        assert (
            _sync(
                settings,
                lambda c: c.execute(select(meta.c.key).where(meta.c.key == OLD_SEED_RECORD)).all(),
            )
            == []
        )
        srv = Server(settings, backend)
        srv.start()
        try:
            with srv.client(token) as c:
                [wallet] = c.get("/wallets").json()["data"]["wallets"]
                again = _addresses(_derive(c, wallet["id"], index=0, count=2))
                assert again == before  # the same addresses as before the upgrade
                [after] = c.post(
                    f"/wallets/{wallet['id']}/accounts", json={"family": "cosmos"}
                ).json()["data"]["accounts"]
                assert after["index"] == 2 and after["address"] not in before
                dup = c.post("/wallets", json={"mnemonic": ABOUT})
                assert dup.status_code == 409 and wallet["id"] in dup.json()["message"]
            assert srv.services is not None and srv.services.barrier.integrity is not None
            [(tenant_id, seed_key)] = _sync(
                settings, lambda c: c.execute(select(wallets.c.tenant_id, wallets.c.seed_key)).all()
            )
            phrase = b'{"mnemonic":"' + ABOUT.encode() + b'","passphrase":""}'
            assert seed_key == srv.services.barrier.integrity.seed_key(tenant_id, phrase)
        finally:
            srv.stop()
    finally:
        if pg_url:
            drop_pg_database(pg_url)
