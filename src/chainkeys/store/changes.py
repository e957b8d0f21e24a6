"""Which table a write statement changes rows of: what lets a cache outlive this
process's own commits.

The token and account-view caches (store/cache.py) hold rows that were read, and only
rows that were found. A statement that only adds rows (a plain INSERT) cannot make such
a row stale; one that updates, deletes or replaces rows of a table can. The SQLite
writer records, per committed batch, the tables its statements changed in place
(`changed_by`), and a cache whose tables none of them touched keeps its values across
that commit (store/sqlite/counter.py explains how a commit is known to be this
process's own). Anything this cannot read is taken to change everything (`EVERYTHING`).
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Final

EVERYTHING: Final = "*"  # a statement of another kind: every cache is cleared
# what a change is while an own COMMIT that may explain it still runs (compared by identity)
PENDING: Final[frozenset[str]] = frozenset({"(pending)"})
_VERB = re.compile(r"\s*(\w+)", re.ASCII)
_UPDATE = re.compile(r'\s*UPDATE\s+(?:OR\s+\w+\s+)?"?(\w+)', re.ASCII | re.IGNORECASE)
_DELETE = re.compile(r'\s*DELETE\s+FROM\s+"?(\w+)', re.ASCII | re.IGNORECASE)
_INSERT = re.compile(
    r'\s*(?:INSERT|REPLACE)\s+(?:OR\s+(\w+)\s+)?INTO\s+"?(\w+)', re.ASCII | re.IGNORECASE
)
_DO_UPDATE = re.compile(r"\bDO\s+UPDATE\b", re.ASCII | re.IGNORECASE)
_CHANGES_ROWS = re.compile(r"\b(?:UPDATE|DELETE|REPLACE)\b", re.ASCII | re.IGNORECASE)


@lru_cache(maxsize=4096)
def changed_by(sql: str) -> str | None:
    """The table whose existing rows `sql` may change (EVERYTHING when it cannot be
    told), or None for a statement that changes no existing row (a read, a plain
    INSERT, INSERT OR IGNORE)."""
    verb = _VERB.match(sql)
    word = verb[1].upper() if verb else ""
    if word == "SELECT":
        return None
    if word == "WITH":  # a CTE: only adds rows when no part updates, deletes or upserts
        return EVERYTHING if _CHANGES_ROWS.search(sql) else None
    if word == "UPDATE" and (m := _UPDATE.match(sql)):
        return m[1].lower()
    if word == "DELETE" and (m := _DELETE.match(sql)):
        return m[1].lower()
    if word in ("INSERT", "REPLACE") and (m := _INSERT.match(sql)):
        conflict = (m[1] or "").upper()
        if word == "REPLACE" or conflict == "REPLACE" or _DO_UPDATE.search(sql):
            return m[2].lower()
        return None if conflict in ("", "IGNORE", "ABORT", "FAIL", "ROLLBACK") else EVERYTHING
    return EVERYTHING


def between(log: dict[int, frozenset[str] | None], since: int, now: int) -> frozenset[str] | None:
    """What a change counter's versions after `since` up to `now` changed, from its log of
    each version's tables: None where a step is unknown (or forgotten, or `since` is no
    version), PENDING where one is not known yet."""
    if not 0 <= since <= now:
        return None
    out: set[str] = set()
    for version in range(since + 1, now + 1):
        step = log.get(version)
        if step is None:
            return None
        if step is PENDING:
            return PENDING
        out |= step
    return frozenset(out)
