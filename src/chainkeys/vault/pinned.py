"""What each pinned set of a tenant's head holds (vault/heads.py), as data: the
authenticated table it is drawn from, which rows are in it and by what identity.

The services add and remove members as they write (in the same transaction); this
table is what rebuilds the heads when an operator adopts a store
(`chainkeys integrity adopt`) and what `chainkeys integrity verify`, the start and the
supervised round check them against, read from the rows themselves.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select

from chainkeys.store.integrity import (
    APPROVER_CREDENTIALS,
    APPROVER_INVITES,
    CHANGES,
    FREEZES,
    GOVERNANCE,
    KEY_RING,
    MASTER_KEYS,
    POLICY_TOTALS,
    POLICY_VERSIONS,
    TOKENS,
    WALLET_COUNTERS,
    Authenticated,
)
from chainkeys.store.sql import Tx
from chainkeys.vault.heads import Member

Row = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Pinned:
    """One set: its table, the row's identity, and which rows are live (or, with
    `latest`, only each tenant's row with the highest value of that column)."""

    name: str
    entry: Authenticated
    ident: Callable[[Row], str]
    live: Callable[[Row], bool] = lambda row: True
    latest: str | None = None


def token_member(row: Row) -> Member:
    return (str(row["id"]), str(row["mac"]))


def cap_ident(row: Row) -> str:
    return f"{row['family']}/{row['network']}/{row['denom']}"


def counter_ident(row: Row) -> str:
    """A wallet counter's identity in its tenant's set: the chain it counts."""
    parts = ("wallet_id", "family", "network", "address_type", "account", "change")
    return "/".join(str(row[p]) for p in parts)


PINNED: tuple[Pinned, ...] = (
    Pinned("tokens", TOKENS, lambda r: str(r["id"]), lambda r: r["revoked_ms"] is None),
    Pinned(
        "credentials",
        APPROVER_CREDENTIALS,
        lambda r: str(r["id"]),
        lambda r: r["revoked_ms"] is None,
    ),
    Pinned(
        "invites", APPROVER_INVITES, lambda r: str(r["code_digest"]), lambda r: r["used_ms"] is None
    ),
    Pinned("policy", POLICY_VERSIONS, lambda r: str(r["version"]), latest="version"),
    Pinned("caps", POLICY_TOTALS, cap_ident),
    Pinned("freezes", FREEZES, lambda r: str(r["id"]), lambda r: r["lifted_ms"] is None),
    Pinned("governance", GOVERNANCE, lambda r: str(r["tenant_id"])),
    Pinned(
        "changes",
        CHANGES,
        lambda r: str(r["id"]),
        lambda r: r["state"] in ("pending", "scheduled"),
    ),
    Pinned("counters", WALLET_COUNTERS, counter_ident),
)


# The ring's head (vault/heads.py, scope `ring`): every term and every ring entry, each
# by its primary key; a term retired or destroyed stays a member (with its new MAC), so
# a copy from before is not one.
RING_PINNED: tuple[Pinned, ...] = (
    Pinned("master_keys", MASTER_KEYS, lambda r: str(r["key_id"])),
    Pinned("key_ring", KEY_RING, lambda r: f"{r['key_id']}/{r['wrapped_by']}"),
)


async def ring_members(tx: Tx) -> dict[str, list[Member]]:
    """The ring's sets as the tables hold them now (MACs are the caller's to check)."""
    return {
        p.name: [(p.ident(r), str(r["mac"])) for r in await rows(tx, p.entry)] for p in RING_PINNED
    }


async def members(tx: Tx, pinned: Pinned) -> dict[str, list[Member]]:
    """Per tenant id, the members of the set as the table holds them now (MACs are the
    caller's to check: `Integrity.valid` on each row read by `rows`)."""
    found: dict[str, list[Member]] = defaultdict(list)
    best: dict[str, tuple[Any, Member]] = {}
    for row in await rows(tx, pinned.entry):
        if not pinned.live(row):
            continue
        member = (pinned.ident(row), str(row["mac"]))
        tenant = str(row["tenant_id"])
        if pinned.latest is None:
            found[tenant].append(member)
        elif tenant not in best or row[pinned.latest] > best[tenant][0]:
            best[tenant] = (row[pinned.latest], member)
    for tenant, (_, member) in best.items():
        found[tenant].append(member)
    return dict(found)


async def rows(tx: Tx, entry: Authenticated) -> list[Row]:
    """Every row of an authenticated table, by column name."""
    return [dict(r._mapping) for r in (await tx.execute(select(entry.table))).all()]
