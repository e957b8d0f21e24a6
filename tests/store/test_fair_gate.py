"""The gate in front of the PostgreSQL pool: bounded, first come first served,
bounded waits, and no place lost to a cancelled or timed-out waiter."""

from __future__ import annotations

import asyncio

import pytest

from chainkeys.store.postgres.gate import FairGate


def test_waiters_get_in_in_arrival_order() -> None:
    async def main() -> list[str]:
        gate = FairGate(2)
        order: list[str] = []

        async def user(name: str, hold: float) -> None:
            await gate.enter(5)
            order.append(name)
            await asyncio.sleep(hold)
            gate.leave()

        holders = [asyncio.ensure_future(user(f"h{i}", 0.01)) for i in range(2)]
        await asyncio.sleep(0)
        waiters = [asyncio.ensure_future(user(f"w{i}", 0.001)) for i in range(6)]
        await asyncio.gather(*holders, *waiters)
        return order

    assert asyncio.run(main()) == ["h0", "h1"] + [f"w{i}" for i in range(6)]


def test_a_newcomer_cannot_take_the_place_freed_for_a_waiter() -> None:
    """asyncio.Queue (asyncpg's pool) gives what is freed to whoever asks first,
    and the woken waiter queues again at the back; the gate hands it over."""

    async def main() -> list[str]:
        gate = FairGate(1)
        await gate.enter(1)
        order: list[str] = []

        async def waiter() -> None:
            await gate.enter(5)
            order.append("waiter")
            gate.leave()

        waiting = asyncio.ensure_future(waiter())
        await asyncio.sleep(0)
        gate.leave()
        await gate.enter(5)  # a newcomer, in the same loop step as the release
        order.append("newcomer")
        gate.leave()
        await waiting
        return order

    assert asyncio.run(main()) == ["waiter", "newcomer"]


def test_no_more_than_size_inside_at_once() -> None:
    async def main() -> int:
        gate = FairGate(3)
        inside = most = 0

        async def user() -> None:
            nonlocal inside, most
            await gate.enter(5)
            inside += 1
            most = max(most, inside)
            await asyncio.sleep(0.001)
            inside -= 1
            gate.leave()

        await asyncio.gather(*(user() for _ in range(50)))
        return most

    assert asyncio.run(main()) == 3


def test_a_wait_is_bounded_and_a_timed_out_or_cancelled_waiter_loses_no_place() -> None:
    async def main() -> None:
        gate = FairGate(1)
        await gate.enter(1)  # the only place is taken
        with pytest.raises(TimeoutError):
            await gate.enter(0.01)
        cancelled = asyncio.ensure_future(gate.enter(5))
        await asyncio.sleep(0)
        cancelled.cancel()
        with pytest.raises(asyncio.CancelledError):
            await cancelled
        gate.leave()
        await asyncio.wait_for(gate.enter(1), 0.5)  # the place is still there
        gate.leave()
        # handed a place just as it is cancelled: it passes the place on
        await gate.enter(1)
        handed = asyncio.ensure_future(gate.enter(5))
        later = asyncio.ensure_future(gate.enter(5))
        await asyncio.sleep(0)
        gate.leave()  # -> handed
        handed.cancel()
        with pytest.raises(asyncio.CancelledError):
            await handed
        await asyncio.wait_for(later, 0.5)  # got the place handed on

    asyncio.run(main())
