"""Decisions run back to back (policies/decider.py): each request still gets the answer to
its own summary, a refusal stays its own request's, a request cancelled while it waits
takes no one's answer, and a decider whose loop closed with requests waiting serves the
next loop."""

from __future__ import annotations

import asyncio
import json

import pytest

from chainkeys.chains.tx.base import Amount, Item, Summary
from chainkeys.policies.conditions import Facts
from chainkeys.policies.decider import Decider
from chainkeys.policies.document import parse
from chainkeys.policies.engine import Decision, Refusal

POLICY = parse(json.dumps({"rules": [
    {"family": "cosmos", "network": "cosmoshub", "effect": "deny", "name": "big",
     "when": "tx.total['uatom'] > 600"},
    {"family": "cosmos", "network": "cosmoshub", "name": "transfers",
     "when": "tx.kind == 'transfer'"},
]}))  # fmt: skip
FACTS = Facts("t1", "payouts", ("sign",), (), "cosmos1a", "cosmos1a", "", "", -1,
              1_795_521_600_000, {})  # fmt: skip


def transfer(amount: int) -> Summary:
    item = Item("/cosmos.bank.v1beta1.MsgSend", "cosmos1b", (Amount("uatom", amount),))
    return Summary("cosmos", "cosmoshub", "sign-transfer", "cosmoshub-4", (item,),
                   (Amount("uatom", 1),), f"{amount:064x}")  # fmt: skip


def test_decisions_of_one_turn_each_answer_their_own_request() -> None:
    amounts = [10 * i + (700 if i % 3 == 0 else 0) for i in range(30)]

    async def main() -> list[Decision | BaseException]:
        decider = Decider()
        return await asyncio.gather(
            *(decider.decide(POLICY, transfer(a), FACTS) for a in amounts),
            return_exceptions=True,
        )

    for amount, answer in zip(amounts, asyncio.run(main()), strict=True):
        if amount + 1 > 600:
            assert isinstance(answer, Refusal) and "big" in answer.message
        else:
            assert isinstance(answer, Decision), answer
            assert answer.rule.name == "transfers" and answer.spent == {"uatom": amount + 1}


def test_a_request_cancelled_while_it_waits_takes_no_answer() -> None:
    async def main() -> Decision:
        decider = Decider()
        gone = asyncio.ensure_future(decider.decide(POLICY, transfer(5), FACTS))
        kept = asyncio.ensure_future(decider.decide(POLICY, transfer(7), FACTS))
        await asyncio.sleep(0)  # both are waiting for the next turn
        gone.cancel()
        decision = await asyncio.wait_for(kept, 60)  # not stuck behind the cancelled one
        assert gone.cancelled()
        return decision

    assert asyncio.run(main()).spent == {"uatom": 8}


def test_a_decider_whose_loop_stopped_with_a_request_waiting_serves_the_next_loop() -> None:
    """A loop that stops for good with a request waiting (a test's loop, a worker's at
    shutdown) leaves it behind: the next loop's requests are served, not queued behind it."""
    decider = Decider()
    old = asyncio.new_event_loop()
    try:
        waiting = old.create_task(decider.decide(POLICY, transfer(5), FACTS))
        old.call_soon(old.stop)  # one turn: the request waits, its turn has not come
        old.run_forever()
        assert not waiting.done()

        async def main() -> Decision:
            return await asyncio.wait_for(decider.decide(POLICY, transfer(9), FACTS), 60)

        assert asyncio.run(main()).spent == {"uatom": 10}
        waiting.cancel()  # let the old loop end its task before it is closed
        old.run_until_complete(asyncio.gather(waiting, return_exceptions=True))
    finally:
        old.close()


def test_a_failure_is_the_answer_of_its_own_request_only() -> None:
    async def main() -> tuple[Decision | BaseException, ...]:
        decider = Decider()
        broken = transfer(5)
        object.__setattr__(broken, "items", None)  # a summary the engine cannot read
        return tuple(await asyncio.gather(decider.decide(POLICY, transfer(3), FACTS),
                                          decider.decide(POLICY, broken, FACTS),
                                          decider.decide(POLICY, transfer(4), FACTS),
                                          return_exceptions=True))  # fmt: skip

    first, failed, last = asyncio.run(main())
    assert isinstance(first, Decision) and isinstance(last, Decision)
    assert isinstance(failed, TypeError)
    with pytest.raises(TypeError):
        raise failed
