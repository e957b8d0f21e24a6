"""The one clock every domain stamps its rows with (milliseconds since the epoch).

It is also the seam through which tests move time: `shift` adds an offset to what
every caller of `now_ms` reads in this process (token expiry, approval ttls, the
24 h cap windows, key-ring liveness), so an expiry is tested by moving the clock,
never by sleeping and hoping the machine kept up.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

_offset_ms = 0


def now_ms() -> int:
    return int(time.time() * 1000) + _offset_ms


def monotonic() -> float:
    """Seconds for measuring intervals (rate-limit buckets), moved by `shift` too."""
    return time.monotonic() + _offset_ms / 1000


@contextlib.contextmanager
def shift(ms: int) -> Iterator[None]:
    """Within the block, `now_ms` reads `ms` later than the wall clock (tests)."""
    global _offset_ms
    _offset_ms += ms
    try:
        yield
    finally:
        _offset_ms -= ms


def iso(ms: int) -> str:
    """Milliseconds since the epoch as UTC ISO 8601 (`2026-11-25T15:03:00.000Z`)."""
    from datetime import UTC, datetime

    when = datetime.fromtimestamp(ms / 1000, UTC)
    return when.isoformat(timespec="milliseconds").replace("+00:00", "Z")
