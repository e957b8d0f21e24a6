"""The gate: the one keyed object through which services reach authenticated rows.

It is the integrity key (vault/integrity.py: token digests, row MACs, set elements)
with this process's heads (vault/heads.py: which copy of a row is the latest), opened
by the barrier at start (vault/adoption.py), told of a rotation's keys in place
(`Integrity.learn`: every holder of the gate sees them at once) and handed to every
service that reads or writes a registered table (store/integrity.py).
"""

from __future__ import annotations

from collections.abc import Mapping

from chainkeys.errors import IntegrityFailure
from chainkeys.vault.heads import Heads
from chainkeys.vault.integrity import Integrity


class Gate(Integrity):
    """This store's integrity key and this process's view of its heads."""

    __slots__ = ("heads",)

    def __init__(self, key: bytes, macs: Mapping[int, bytes] | None = None, writing: int = 1):
        super().__init__(key, macs, writing)
        self.heads = Heads(self)

    def __repr__(self) -> str:
        return "Gate(***)"


def opened(gate: Gate | None) -> Gate:
    """The barrier's gate, which every process that serves has opened at start (None
    only in a command that never reads an authenticated row)."""
    if gate is None:
        raise IntegrityFailure("the integrity key is not open here: nothing was done")
    return gate
