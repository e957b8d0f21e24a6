"""The one clock every domain stamps its rows with (milliseconds since the epoch)."""

from __future__ import annotations

import time


def now_ms() -> int:
    return int(time.time() * 1000)


def iso(ms: int) -> str:
    """Milliseconds since the epoch as UTC ISO 8601 (`2026-11-25T15:03:00.000Z`)."""
    from datetime import UTC, datetime

    when = datetime.fromtimestamp(ms / 1000, UTC)
    return when.isoformat(timespec="milliseconds").replace("+00:00", "Z")
