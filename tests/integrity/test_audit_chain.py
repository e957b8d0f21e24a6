"""The audit chain (audit/chain.py), on both engines: rows linked once committed, and
`chainkeys audit verify` exits 0 on an honest log and 1 naming the first row where a
database writer edited, deleted, reordered or inserted one, or cut the tail."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import delete, func, insert, select, update
from tests.conftest import BACKENDS, backend_settings, chainkeys_cli, drop_pg_database
from tests.integrity.stores import as_writer as _sql  # a writer without the master key
from tests.masterkey.test_rotation import env_of

from chainkeys.audit.chain import link_committed, verify
from chainkeys.bootstrap import Services, open_services
from chainkeys.config import Settings
from chainkeys.store.tables import audit, audit_heads

pytestmark = pytest.mark.parametrize("backend", BACKENDS, indirect=True)


@pytest.fixture
def store(backend: str, tmp_path: Path) -> Iterator[Settings]:
    """A store with two tenants' events (tokens issued, policies set, one revoked) and
    the operator's, every row linked."""
    settings, pg_url = backend_settings(backend, tmp_path)

    async def fill(svc: Services) -> None:
        for tenant in ("acme", "globex"):
            row, _ = await svc.tokens.create(tenant, "app")
            await svc.policies.set(tenant, '{"rules": [{"family": "cosmos"}]}', "json")
            await svc.tokens.revoke(row.id)
        await svc.tokens.create("acme", "second")
        assert await link_committed(svc.db, _integrity(svc)) == await _count(svc)

    _with_services(settings, fill)
    yield settings
    if pg_url:
        drop_pg_database(pg_url)


def _integrity(svc: Services) -> Any:
    integrity = svc.barrier.integrity
    assert integrity is not None
    return integrity


async def _count(svc: Services) -> int:
    async with svc.db.read() as tx:
        return int((await tx.execute(select(func.count()).select_from(audit))).scalar_one())


def _with_services(settings: Settings, work: Callable[[Services], Any]) -> Any:
    async def main() -> Any:
        svc = await open_services(settings)
        try:
            return await work(svc)
        finally:
            await svc.close()

    return asyncio.run(main())


def _ids(settings: Settings, tenant_rows: bool = True) -> list[int]:
    where = audit.c.tenant_id.is_not(None) if tenant_rows else audit.c.tenant_id.is_(None)
    return [
        r[0]
        for r in _sql(
            settings,
            lambda c: c.execute(select(audit.c.id).where(where).order_by(audit.c.id)).all(),
        )
    ]


def _verify(settings: Settings, *args: str) -> tuple[int, str]:
    done = chainkeys_cli("audit", "verify", *args, env=env_of(settings))
    return done.returncode, done.stdout + done.stderr


def test_an_honest_log_verifies(store: Settings) -> None:
    code, out = _verify(store)
    assert code == 0, out
    total = len(_ids(store)) + len(_ids(store, tenant_rows=False))
    assert f"{total} rows linked and checked" in out
    code, out = _verify(store, "--tenant", "acme")
    assert code == 0 and "rows linked and checked" in out, out


def test_an_edited_row_is_named(store: Settings) -> None:
    target = _ids(store)[2]
    _sql(
        store,
        lambda c: c.execute(
            update(audit).where(audit.c.id == target).values(outcome="ok", action="forged")
        ),
    )
    code, out = _verify(store)
    assert code == 1 and f"row {target} fails its MAC" in out, out


def test_a_deleted_row_breaks_the_chain_at_the_next_one(store: Settings) -> None:
    rows = _sql(
        store, lambda c: c.execute(select(audit.c.id, audit.c.tenant_id).order_by(audit.c.id)).all()
    )
    tenant = next(t for _, t in rows if t is not None)
    ids = [i for i, t in rows if t == tenant]
    _sql(store, lambda c: c.execute(delete(audit).where(audit.c.id == ids[1])))
    code, out = _verify(store)
    assert code == 1 and f"row {ids[2]}" in out and "fails its link" in out, out


def test_swapped_rows_are_named(store: Settings) -> None:
    first, second = _ids(store)[:2]

    def swap(c: Any) -> None:
        a, b = (
            c.execute(select(audit).where(audit.c.id == i)).one()._mapping for i in (first, second)
        )
        keep = {k: v for k, v in a.items() if k != "id"}
        c.execute(
            update(audit)
            .where(audit.c.id == first)
            .values(**{k: v for k, v in b.items() if k != "id"})
        )
        c.execute(update(audit).where(audit.c.id == second).values(**keep))

    _sql(store, swap)
    code, out = _verify(store)
    assert code == 1 and f"row {first}" in out, out


def test_a_deleted_tail_leaves_its_head_unmatched(store: Settings) -> None:
    last = _ids(store)[-1]
    _sql(store, lambda c: c.execute(delete(audit).where(audit.c.id == last)))
    code, out = _verify(store)
    assert code == 1 and "were deleted" in out, out


def test_a_whole_tenant_deleted_with_its_head_is_missed_by_the_count(store: Settings) -> None:
    def wipe(c: Any) -> None:
        c.execute(
            delete(audit).where(
                audit.c.tenant_id.is_not(None),
                audit.c.id.in_(
                    select(audit.c.id).where(
                        audit.c.tenant_id
                        == select(audit.c.tenant_id)
                        .where(audit.c.tenant_id.is_not(None))
                        .order_by(audit.c.id.desc())
                        .limit(1)
                        .scalar_subquery()
                    )
                ),
            )
        )
        c.execute(
            delete(audit_heads).where(
                audit_heads.c.tenant_key.like("t%"),
                ~audit_heads.c.tenant_key.in_(
                    select("t" + audit.c.tenant_id).where(audit.c.tenant_id.is_not(None))
                ),
            )
        )

    _sql(store, wipe)
    code, out = _verify(store)
    assert code == 1 and "a whole tenant" in out, out


def test_a_wiped_log_and_every_head_fail(store: Settings) -> None:
    def wipe(c: Any) -> None:
        c.execute(delete(audit))
        c.execute(delete(audit_heads))

    _sql(store, wipe)
    code, out = _verify(store)
    assert code == 1 and "was wiped" in out, out


def test_a_forged_head_is_refused_and_never_built_on(store: Settings) -> None:
    _sql(
        store,
        lambda c: c.execute(
            update(audit_heads)
            .where(audit_heads.c.tenant_key == "*")
            .values(rows=audit_heads.c.rows - 1)
        ),
    )
    code, out = _verify(store)
    assert code == 1 and "integrity check" in out, out

    async def link_more(svc: Services) -> Any:
        await svc.tokens.create("acme", "third")
        return await link_committed(svc.db, _integrity(svc))

    with pytest.raises(Exception, match="integrity check"):
        _with_services(store, link_more)


def test_a_row_inserted_later_is_waiting_above_the_cursor_and_named_below_it(
    store: Settings,
) -> None:
    first = _ids(store)[0]

    def forge(new_id: int, chain: str | None) -> Callable[[Any], None]:
        def write(c: Any) -> None:
            row = dict(c.execute(select(audit).where(audit.c.id == first)).one()._mapping)
            c.execute(insert(audit).values(**{**row, "id": new_id, "chain": chain}))

        return write

    top = max(_ids(store) + _ids(store, tenant_rows=False))
    _sql(store, forge(top + 10, None))  # a copy above the cursor: not linked yet, waiting
    code, out = _verify(store)
    assert code == 0 and "1 newer rows not linked yet" in out, out

    _sql(store, forge(0, None))  # below the cursor, unlinked: inserted after the fact
    code, out = _verify(store)
    assert code == 1 and "row 0 is not in the chain" in out, out

    _sql(store, lambda c: c.execute(delete(audit).where(audit.c.id == 0)))
    link = _sql(
        store, lambda c: c.execute(select(audit.c.chain).where(audit.c.id == first)).scalar_one()
    )
    _sql(store, forge(0, link))  # a copied row with a copied link
    code, out = _verify(store)
    assert code == 1 and "row 0 fails its link" in out, out


def test_rows_are_linked_once_committed_and_a_future_date_stalls_nothing(
    backend: str, tmp_path: Path
) -> None:
    """No settling window: the next round links what committed. A writer who dates an
    unlinked row a year ahead stalls nothing (the rows after it are linked too) and
    `verify` names the row at once, by its MAC, before and after it is linked."""
    settings, pg_url = backend_settings(backend, tmp_path)
    try:

        async def first(svc: Services) -> tuple[int, Any]:
            await svc.tokens.create("acme", "app")
            linked = await link_committed(svc.db, _integrity(svc))
            return linked, await verify(svc.db, _integrity(svc))

        linked, verdict = _with_services(settings, first)
        assert linked >= 1 and verdict.ok and verdict.rows == linked and verdict.unlinked == 0

        async def more(svc: Services) -> None:
            await svc.tokens.create("acme", "second")
            await svc.tokens.create("acme", "third")

        _with_services(settings, more)
        newest = max(_ids(settings))
        year = 365 * 86_400_000
        _sql(
            settings,
            lambda c: c.execute(
                update(audit)
                .where(audit.c.id == newest - 1)
                .values(created_ms=audit.c.created_ms + year)
            ),
        )
        code, out = _verify(settings)
        assert code == 1 and f"row {newest - 1} fails its MAC" in out, out

        async def link(svc: Services) -> int:
            return await link_committed(svc.db, _integrity(svc))

        assert _with_services(settings, link) >= 2  # the dated row and the one after it
        assert (
            _sql(
                settings,
                lambda c: c.execute(
                    select(func.count()).select_from(audit).where(audit.c.chain.is_(None))
                ).scalar_one(),
            )
            == 0
        )
        code, out = _verify(settings)
        assert code == 1 and f"row {newest - 1} fails its MAC" in out, out
    finally:
        if pg_url:
            drop_pg_database(pg_url)


def test_a_row_inserted_without_the_key_is_named_once_linked(store: Settings) -> None:
    """A row a writer inserts above the cursor is linked by the next round (the chain
    takes what committed), and `verify` names it: it carries no valid MAC."""

    def forge(c: Any) -> None:
        c.execute(
            insert(audit).values(
                tenant_id=None, action="token.create", outcome="ok", created_ms=1, mac=None
            )
        )

    _sql(store, forge)

    async def link(svc: Services) -> int:
        return await link_committed(svc.db, _integrity(svc))

    assert _with_services(store, link) >= 1
    code, out = _verify(store)
    assert code == 1 and "fails its MAC" in out, out
