"""The barrier's fence, driven through the clock seam: a process whose view of the key
ring is older than the fence re-reads it before it seals; it refuses when it cannot,
and when its key was retired under it."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from chainkeys import clock
from chainkeys.bootstrap import Services, open_services
from chainkeys.config import Settings
from chainkeys.errors import KeyUnavailable, SealFenced
from chainkeys.store.backend import Backend
from chainkeys.vault.barrier import live_window_ms
from chainkeys.vault.seal import Context

CONTEXT = Context("t", "cosmos", "name")


def settings(tmp_path: Path) -> Settings:
    return Settings(data_dir=tmp_path / "data", master_key_provider="file")


def run(tmp_path: Path, work: object) -> None:
    async def main() -> None:
        svc = await open_services(settings(tmp_path))
        other = await open_services(settings(tmp_path))  # the operator's CLI, say
        try:
            await work(svc, other)  # type: ignore[operator]
        finally:
            await svc.close()
            await other.close()

    asyncio.run(main())


def test_a_stalled_process_re_reads_the_ring_before_it_seals(tmp_path: Path) -> None:
    async def work(svc: Services, operator: Services) -> None:
        old = svc.barrier.key_id
        await operator.keys.rotate(wait_seconds=0)  # no process heartbeats: none waited for
        assert (await svc.barrier.seal(b"x", CONTEXT)).key_id == old  # within the fence
        with clock.shift(svc.barrier.fence_ms + 1):  # as after a stall longer than the fence
            sealed = await svc.barrier.seal(b"x", CONTEXT)
        new = (await operator.keys.state()).current
        assert sealed.key_id == new != old

    run(tmp_path, work)


def test_a_process_whose_key_was_retired_refuses_to_seal_and_says_why(tmp_path: Path) -> None:
    async def work(svc: Services, operator: Services) -> None:
        old = svc.barrier.key_id
        # the process never learns the rotation: its ring is cleared of the forward entry
        await operator.keys.rotate(wait_seconds=0)
        retired = await operator.keys.retire()
        assert retired.retired == [old]
        with clock.shift(svc.barrier.fence_ms + 1):
            with pytest.raises(SealFenced, match="restart it with the current key"):
                await svc.barrier.seal(b"x", CONTEXT)
            with pytest.raises(KeyUnavailable):
                await svc.barrier.ensure(retired.current_key_id)

    run(tmp_path, work)  # (no refresh task runs here: the process learns only when it seals)


def test_a_stale_process_that_cannot_read_the_ring_seals_nothing(tmp_path: Path) -> None:
    async def work(svc: Services, operator: Services) -> None:
        class Down:
            def read(self) -> object:
                raise_unavailable()
                return None

        def raise_unavailable() -> None:
            from chainkeys.errors import StorageUnavailable

            raise StorageUnavailable()

        real: Backend = svc.barrier.db
        svc.barrier.db = Down()  # type: ignore[assignment]
        try:
            await svc.barrier.seal(b"fresh", CONTEXT)  # fresh: no read needed
            with clock.shift(svc.barrier.fence_ms + 1), pytest.raises(SealFenced, match="older"):
                await svc.barrier.seal(b"stale", CONTEXT)
        finally:
            svc.barrier.db = real

    run(tmp_path, work)


def test_a_value_sealed_late_with_a_retired_key_still_opens_and_blocks_destroy(
    tmp_path: Path,
) -> None:
    """No key is lost by an online operation: the ring keeps a retired key under the
    current one, so whatever a late process sealed with it opens after a restart with
    the current key alone; retiring the key a stalled process holds is refused until
    the operator names it gone; destroying the key is refused while such a value exists
    or a process that used the key has a heartbeat, however old."""
    from chainkeys.errors import Conflict
    from chainkeys.vault.repository import Meta

    late = Context("-", "-", "late-value", purpose="meta")

    async def work(svc: Services, operator: Services) -> None:
        old = svc.barrier.key_id
        await svc.barrier.beat()  # a process that sealed with the old key (and then stalled)
        sealed = await svc.barrier.seal(b"sealed late", late)
        # it stalls: its heartbeat ages out, and the rotation stops waiting for it
        with clock.shift(live_window_ms(svc.settings.key_refresh_seconds) + 1):
            await operator.keys.rotate(wait_seconds=0)
            # retiring the key a stalled process holds is refused until it is named gone
            with pytest.raises(Conflict, match=f"heartbeat stopped.*{svc.barrier.process}"):
                await operator.keys.retire()
            retired = await operator.keys.retire(frozenset({svc.barrier.process}))
        assert retired.retired == [old]
        await svc.barrier.beat()  # it was not gone after all: it resumes, holding the old key
        async with operator.db.write() as tx:  # and the value it sealed before lands
            await Meta.insert(tx, "late-value", sealed.blob, sealed.key_id)
        with pytest.raises(Conflict, match="still sealed with key"):
            await operator.keys.destroy(old)

    run(tmp_path, work)

    async def restarted() -> None:  # the current key alone opens the late value
        svc = await open_services(settings(tmp_path))
        try:
            async with svc.db.read() as tx:
                found = await Meta.get(tx, "late-value")
            assert found is not None
            assert await svc.barrier.open_async(found[0], found[1] or "", late) == b"sealed late"
            with clock.shift(live_window_ms(svc.settings.key_refresh_seconds) + 1):
                await svc.keys.rotate(wait_seconds=0)  # re-seals it; the heartbeat still blocks
            state = await svc.keys.state()
            old = next(t.key_id for t in state.terms if t.retired_ms is not None)
            with pytest.raises(Conflict, match="--gone") as refused:
                await svc.keys.destroy(old)
            stale = [u.process for u in state.processes if u.names(old)]
            assert stale and all(p in str(refused.value) for p in stale)
            assert await svc.keys.destroy(old, frozenset(stale)) >= 1
            after = await svc.keys.state()
            assert next(t for t in after.terms if t.key_id == old).destroyed_ms is not None
        finally:
            await svc.close()

    asyncio.run(restarted())
