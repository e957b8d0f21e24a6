"""Free text that people read (a freeze's reason, a co-signer's), kept to what shows
as written: no control or format characters (a bidi override could make a reason read
as something else), no line breaks, bounded."""

from __future__ import annotations

import unicodedata

_BREAKS = frozenset("\u2028\u2029")


def printable(text: str) -> bool:
    """Whether every character of `text` shows as itself on one line (no Unicode
    category C: controls, format characters such as bidi overrides, surrogates,
    private use, unassigned; no line or paragraph separator)."""
    return all(unicodedata.category(c)[0] != "C" and c not in _BREAKS for c in text)


def sanitised(text: str, limit: int) -> str:
    """`text` with every character `printable` refuses as U+FFFD, runs of white space as
    one space, cut to `limit` characters (an ellipsis says so)."""
    shown = "".join(c if printable(c) else "\ufffd" for c in text[: limit * 4])
    shown = " ".join(shown.split())
    return shown if len(shown) <= limit else shown[: limit - 1] + "…"
