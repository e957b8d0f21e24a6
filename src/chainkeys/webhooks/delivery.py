"""The approvals webhook: every state change, POSTed from the durable outbox.

Events are written to `webhook_outbox` in the transaction of the change they
announce, so a restart loses none. Any process sends them: a row is claimed for
30 s by compare-and-set (a crashed sender's claim runs out), POSTed, and marked
delivered on a 2xx; otherwise it is retried with exponential backoff (1 s, 2 s,
4 s, … at most 5 min) until it is; a redirect is a failed delivery (following it
would send the event as a GET, without its body, somewhere else), and so is any
answer that is not HTTP at all. Delivered events are forgotten after
CHAINKEYS_WEBHOOK_RETENTION_DAYS. Sending never blocks a request. Each POST
carries `Chainkeys-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret,
"<t>.<raw body>")>` (Stripe's scheme, chainkeys/callbacks.py, which the co-signer's
calls use too: a receiver recomputes it and rejects an old `t`, which stops replays).
"""

from __future__ import annotations

import asyncio
import logging
import urllib.error
import urllib.request
from typing import Any, Final

from chainkeys.callbacks import HEADER, signature
from chainkeys.clock import now_ms
from chainkeys.store.backend import Backend
from chainkeys.webhooks.outbox import Outbox

log = logging.getLogger("chainkeys.webhook")
CLAIM_MS: Final = 30_000
TIMEOUT_SECONDS: Final = 10
MAX_BACKOFF_MS: Final = 300_000


def backoff_ms(attempts: int) -> int:
    return int(min(MAX_BACKOFF_MS, 1000 * 2 ** min(attempts, 20)))


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """A 3xx is an answer, not an instruction: the receiver gets the POST or nothing."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


_opener = urllib.request.build_opener(_NoRedirects)


class Webhook:
    def __init__(self, db: Backend, url: str, secret: bytes, retention_days: int = 7) -> None:
        self.db = db
        self.url = url
        self.secret = secret
        self.retention_days = retention_days

    async def purge_delivered(self) -> int:
        """Forget delivered events older than the retention period (a round of the
        supervised purge task)."""
        before = now_ms() - self.retention_days * 86_400_000
        async with self.db.write() as tx:
            return await Outbox.purge_delivered(tx, before)

    async def send_due(self) -> int:
        """Send every due event this process can claim; how many were delivered."""
        async with self.db.read() as tx:
            due, forged = await Outbox.due(tx, now_ms(), 50)
        if forged:  # written by someone without the master key: parked, never sent
            async with self.db.write() as tx:
                await Outbox.park(tx, forged)
        delivered = 0
        for event, body, attempts in due:
            now = now_ms()  # a slow receiver must not shorten the next row's claim
            async with self.db.write() as tx:
                claimed = await Outbox.claim(tx, event, now, now + CLAIM_MS)
            if not claimed:
                continue  # another process has it
            error = await asyncio.to_thread(self._post, body.encode())
            async with self.db.write() as tx:
                if error is None:
                    await Outbox.delivered(tx, event, now_ms())
                    delivered += 1
                else:
                    next_ms = now_ms() + backoff_ms(attempts)
                    await Outbox.retry(tx, event, attempts + 1, next_ms, error)
        return delivered

    def _post(self, body: bytes) -> str | None:
        """POST one event; None on a 2xx, else what went wrong (for the outbox row)."""
        # the clock every row is stamped with (the seam tests move), not time.time()
        sent = signature(self.secret, body, now_ms() // 1000)
        request = urllib.request.Request(  # noqa: S310 - http(s) only (settings check it)
            self.url,
            data=body,
            method="POST",
            headers={
                "Content-Type": "application/json",
                HEADER: sent,
                "User-Agent": "chainkeys-webhook",
            },
        )
        try:
            with _opener.open(request, timeout=TIMEOUT_SECONDS) as response:
                status = response.status
        except urllib.error.HTTPError as exc:  # 3xx (not followed), 4xx, 5xx
            return f"HTTP {exc.code}"
        except Exception as exc:  # refused, timed out, or not HTTP (a malformed status line)
            return f"{type(exc).__name__}"
        return None if 200 <= status < 300 else f"HTTP {status}"
