"""Policy decisions of a serving process, run back to back.

The decisions that requests ask for during one turn of the event loop run together,
one after another, at the next turn. Why: a decision under conditions calls into CEL
(cel-cpp behind pybind11, docs/policies.md), and the first call after a request's other
work (HTTP, SQLite, the chain's encoders) finds the CPU's caches holding that work, not
CEL's code and data: measured in a loaded server, the call took ~100 µs where the same
call right after another took ~16 µs. Run back to back, every decision of a turn but the
first finds them warm. bench.sign ("10 rules with conditions vs without", 16
connections, 1 worker): the server's CPU per sign request beyond the unconditional
policy's went from ~140 µs to ~25 µs (about eight decisions per turn under that load;
one alone costs what it did).

A decision is pure (no I/O, no await: `engine.decide`), so running it one turn later and
beside others changes when it runs, never what it answers. A request cancelled while it
waits (its client went away) is skipped; an exception (a Refusal, or a failure) is its
own request's.
"""

from __future__ import annotations

import asyncio

from chainkeys.chains.tx.base import Summary
from chainkeys.policies.conditions import Facts
from chainkeys.policies.document import Policy
from chainkeys.policies.engine import Decision, decide

Waiting = tuple[Policy, Summary, Facts | None, "asyncio.Future[Decision]"]


class Decider:
    """One per serving process (its event loop)."""

    def __init__(self) -> None:
        self._waiting: list[Waiting] = []
        self._loop: asyncio.AbstractEventLoop | None = None

    async def decide(self, policy: Policy, summary: Summary, facts: Facts | None) -> Decision:
        """`engine.decide(policy, summary, facts)`, run with the others of this turn."""
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # a new loop (tests): what waited on a closed one is gone
            self._loop, self._waiting = loop, []
        future: asyncio.Future[Decision] = loop.create_future()
        if not self._waiting:
            loop.call_soon(self._run)
        self._waiting.append((policy, summary, facts, future))
        return await future

    def _run(self) -> None:
        waiting, self._waiting = self._waiting, []
        for policy, summary, facts, future in waiting:
            if future.done():  # cancelled while it waited
                continue
            try:
                future.set_result(decide(policy, summary, facts))
            except Exception as exc:  # a Refusal, or a failure: that request's answer
                future.set_exception(exc)
