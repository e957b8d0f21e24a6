"""The `Chainkeys-Signature` header of every HTTP callback chainkeys makes or takes.

Stripe's scheme: `t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<raw body>")>`. The
approvals webhook signs each event with it (webhooks/delivery.py); the co-signer
(signing/cosigner.py) signs each question with it and must sign its answer the same
way. A receiver recomputes the MAC over the raw bytes it got and refuses an old (or
future) `t`, which stops a recorded message from being replayed. One place, so the
two can never drift apart.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Final

HEADER: Final = "Chainkeys-Signature"
TOLERANCE_SECONDS: Final = 300  # how far `t` may be from the receiver's clock


def signature(secret: bytes, body: bytes, at: int) -> str:
    """The header value for `body` sent at unix second `at`."""
    mac = hmac.new(secret, str(at).encode() + b"." + body, hashlib.sha256).hexdigest()
    return f"t={at},v1={mac}"


def verify(
    secret: bytes, header: str | None, body: bytes, now: int, tolerance: int = TOLERANCE_SECONDS
) -> str | None:
    """Why `header` does not sign `body` at unix second `now` (None: it does): missing,
    malformed, another MAC, or a `t` more than `tolerance` seconds away."""
    if not header:
        return "it is not signed (no Chainkeys-Signature header)"
    parts = dict(p.strip().split("=", 1) for p in header.split(",") if "=" in p)
    at, given = parts.get("t", ""), parts.get("v1", "")
    if not (at.isascii() and at.isdigit() and len(at) <= 12) or not given:
        return "its Chainkeys-Signature header is not t=…,v1=…"
    expected = signature(secret, body, int(at)).partition(",v1=")[2]
    if not hmac.compare_digest(expected.encode(), given.encode("utf-8", "replace")):
        return "its signature is not the shared secret's over this body"
    if abs(now - int(at)) > tolerance:
        return f"its signature's time is {int(at) - now:+d} s from ours (stale: a replay?)"
    return None
