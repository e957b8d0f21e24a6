"""Connecting to the primary of a highly available PostgreSQL: a URL naming several hosts.

`postgresql://user@db1:5432,db2:5432/chainkeys?target_session_attrs=read-write` names
every node of the cluster (pg_auto_failover, Patroni); each new connection goes to the
first one that takes writes, so chainkeys follows a failover without being told
(docs/deploy.md, "PostgreSQL failover"). Every PostgreSQL connection chainkeys opens,
the pool's, the change watch's and SQLAlchemy's (start-up lock, migrations, copies),
comes from `connect` here.

Two things asyncpg does otherwise than libpq, and why they matter in a failover:

- asyncpg's `timeout` bounds the whole list, not each host: a first host gone without
  a word (a machine powered off, a network that drops packets) would use it all and the
  primary further down would never be tried. Here each host gets the whole timeout,
  as libpq's `connect_timeout` does.
- A URL naming several hosts without `target_session_attrs` may land on a standby,
  where every write fails: chainkeys writes on every connection (and listens for
  other replicas' changes, which only the primary sends), so it asks for `read-write`
  unless the URL asks for something else.
"""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import asyncpg  # type: ignore[import-untyped]

from chainkeys.store.postgres.failures import LOST

# A host that cannot take this connection: the next one in the list is tried.
_NEXT_HOST = (*LOST, OSError, asyncpg.TargetServerAttributeNotMatched)


def per_host(dsn: str) -> list[str]:
    """The DSN once for each host its address part lists (user, database and
    parameters unchanged), in order. A DSN of one host, or whose hosts are in its
    parameters (`?host=…`), is left whole: asyncpg tries those within one timeout."""
    parts = urlsplit(dsn)
    userinfo, at, hostlist = parts.netloc.rpartition("@")
    hosts = hostlist.split(",")
    if len(hosts) < 2:
        return [dsn]
    query = parse_qsl(parts.query, keep_blank_values=True)
    if not any(k == "target_session_attrs" for k, _ in query) and not os.environ.get(
        "PGTARGETSESSIONATTRS"
    ):
        query.append(("target_session_attrs", "read-write"))
    return [
        urlunsplit(parts._replace(netloc=f"{userinfo}{at}{host}", query=urlencode(query)))
        for host in hosts
    ]


async def connect(dsn: str, *, timeout: float, **kwargs: Any) -> Any:
    """`asyncpg.connect` on the first host of `dsn` that answers as asked, each host
    given `timeout`; the last host's error when none does (an authentication error at
    once: every host has the same users, as in libpq)."""
    last: BaseException | None = None
    for one in per_host(dsn):
        try:
            return await asyncpg.connect(one, timeout=timeout, **kwargs)
        except _NEXT_HOST as exc:
            last = exc
    if last is None:
        raise RuntimeError("no host to connect to")  # (per_host returns at least one)
    raise last
