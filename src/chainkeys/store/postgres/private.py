"""Every private API of asyncpg that the PostgreSQL backend uses.

Each is listed, with the version it was read against, in chainkeys/private_apis.py;
tests/store/test_private_apis.py fails as soon as another version is installed, so
an upgrade means re-reading this module against the new library's source first.
"""

from __future__ import annotations

from typing import Any


async def release_inline(conn: Any) -> None:
    """Give a pool connection back without `Pool.release()`'s shielded task.

    The same steps asyncpg's release takes (the proxy's `_on_release`, then the
    holder's `release`), inline: the caller guarantees no reset query and no
    query in flight, so nothing here suspends.
    """
    con = conn._con
    if con is None:  # released already
        return
    con._on_release()
    await conn._holder.release(None)
