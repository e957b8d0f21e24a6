"""The heads that say which version of each authorizing row is the latest (vault/heads.py).

A row's MAC proves the service wrote it, not that it is the newest copy: a database
writer who puts back a token row from before its revocation holds a valid MAC. So
each tenant has one head, written in the transaction of every change to what must be
current (its live tokens, credentials, unused invites, open approvals, latest policy,
cap totals) and MACed itself: per pinned set, the number of rows and a keyed digest
of them. `scope` is "t" + the tenant id; the store's own head is "*".
"""

from __future__ import annotations

from sqlalchemy import BigInteger, Column, String, Table, Text

from chainkeys.store.tables.base import metadata

integrity_heads = Table(
    "integrity_heads",
    metadata,
    Column("scope", String(40), primary_key=True),
    Column("version", BigInteger, nullable=False),  # one more with every change
    Column("body", Text, nullable=False),  # JSON: {set: [rows, digest]}
    Column("mac", String(80), nullable=False),
)
