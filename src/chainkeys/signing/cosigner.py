"""The co-signer: the customer's own server approves or refuses each signature first.

With CHAINKEYS_COSIGNER_URL set, every signature the policy allows (and every approved
request when its quorum signs) is POSTed there before any key opens, as JSON
`{"id", "tenant", "family", "account", "network", "kind", "digest", "summary",
"request", "time", "approval"}` signed with the webhook's scheme (chainkeys/callbacks.py)
under CHAINKEYS_COSIGNER_SECRET. The answer must be a 200 whose body is
`{"id", "decision": "approve" | "reject", "reason"?}`, signed the same way with a `t`
within 5 minutes of ours, echoing the question's id. `approve` lets the signature
proceed; `reject` is CosignerRejected (403, its reason shown, sanitised and cut to
MAX_REASON characters); anything else, a timeout, a status other than 200 (a redirect
is never followed: it would move the question elsewhere), a missing or wrong
signature, a stale `t`, another id, malformed JSON or an answer over MAX_ANSWER bytes,
is CosignerUnavailable (503). Either way nothing is signed and no key opens.

The whole exchange, connection to last byte, is bounded by CHAINKEYS_COSIGNER_TIMEOUT.
httpx is imported at the first question (a process that never asks never pays for it).
"""

from __future__ import annotations

import asyncio
import secrets
from typing import TYPE_CHECKING, Any, Final, Literal

import msgspec

from chainkeys.callbacks import HEADER, signature, verify
from chainkeys.chains.tx.base import Summary, summary_record
from chainkeys.clock import iso, now_ms
from chainkeys.errors import CosignerRejected, CosignerUnavailable
from chainkeys.text import sanitised

if TYPE_CHECKING:
    import httpx

    from chainkeys.config import Settings

ID_PREFIX: Final = "cos_"
MAX_ANSWER: Final = 64 * 1024  # bytes of an answer read at most
MAX_REASON: Final = 200  # characters of a rejection's reason shown


class Answer(msgspec.Struct, kw_only=True):
    id: str
    decision: Literal["approve", "reject"]
    reason: str | None = None


def question(
    tenant: str,
    family: str,
    account: str,
    network: str,
    kind: str,
    summary: Summary,
    request: Any,
    approval: str | None,
) -> dict[str, Any]:
    """What the co-signer is asked: the request as the sign endpoint took it (a msgspec
    Struct, encoded as its JSON), decoded (the summary) and its digest, with a fresh id."""
    return {
        "id": ID_PREFIX + secrets.token_hex(12),
        "tenant": tenant,
        "family": family,
        "account": account,
        "network": network,
        "kind": kind,
        "digest": summary.digest,
        "summary": summary_record(summary),
        "request": request,
        "time": iso(now_ms()),
        "approval": approval,  # the approval request whose quorum signs (None: a plain sign)
    }


class Cosigner:
    """Asks the co-signer; one HTTP client, made at the first question."""

    def __init__(self, url: str, secret: bytes, timeout: float) -> None:
        self.url = url
        self._secret = secret
        self.timeout = timeout
        self._client: httpx.AsyncClient | None = None

    def __repr__(self) -> str:
        return "Cosigner(secret=***)"  # never the URL either: it may hold credentials

    @classmethod
    def of(cls, settings: Settings) -> Cosigner | None:
        if settings.cosigner_url is None or settings.cosigner_secret is None:
            return None
        secret = settings.cosigner_secret.get_secret_value().encode()
        return cls(settings.cosigner_url, secret, settings.cosigner_timeout)

    async def ask(self, asked: dict[str, Any]) -> None:
        """Return on `approve`; CosignerRejected on `reject`, CosignerUnavailable on any
        other answer or none."""
        body = msgspec.json.encode(asked)
        try:
            async with asyncio.timeout(self.timeout):
                status, header, data = await self._post(body)
        except TimeoutError:
            raise _unavailable(f"no answer within {self.timeout:g} s") from None
        if status != 200:
            redirect = " (a redirect is not followed)" if 300 <= status < 400 else ""
            raise _unavailable(f"it answered HTTP {status}{redirect}")
        wrong = verify(self._secret, header, data, now_ms() // 1000)
        if wrong is not None:
            raise _unavailable(wrong)
        try:
            answer = msgspec.json.decode(data, type=Answer)
        except msgspec.DecodeError:
            raise _unavailable(
                'its answer is not JSON {"id", "decision": "approve" or "reject", "reason"?}'
            ) from None
        if answer.id != asked["id"]:
            raise _unavailable("its answer is for another question (its id is not ours)")
        if answer.decision == "reject":
            why = sanitised(answer.reason or "", MAX_REASON) or "no reason given"
            raise CosignerRejected(f"the co-signer rejected it: {why}; nothing was signed")

    async def _post(self, body: bytes) -> tuple[int, str | None, bytes]:
        """POST the question: (status, its signature header, its body up to MAX_ANSWER)."""
        import httpx  # here: every process start (each CLI call too) would pay its import

        if self._client is None:
            self._client = httpx.AsyncClient(timeout=self.timeout, follow_redirects=False)
        headers = {
            "Content-Type": "application/json",
            HEADER: signature(self._secret, body, now_ms() // 1000),
            "User-Agent": "chainkeys-cosigner",
        }
        try:
            async with self._client.stream("POST", self.url, content=body, headers=headers) as r:
                if r.status_code != 200:
                    return r.status_code, None, b""
                data = bytearray()
                async for chunk in r.aiter_bytes():
                    data += chunk
                    if len(data) > MAX_ANSWER:
                        raise _unavailable(f"its answer is larger than {MAX_ANSWER} bytes")
                return r.status_code, r.headers.get(HEADER), bytes(data)
        except httpx.TimeoutException:
            raise TimeoutError from None
        except httpx.HTTPError as exc:  # refused, reset, not HTTP: never the URL or body
            raise _unavailable(f"it could not be reached ({type(exc).__name__})") from None

    async def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()


def _unavailable(why: str) -> CosignerUnavailable:
    return CosignerUnavailable(
        f"the co-signer gave no valid answer: {why}; nothing was signed, try again"
    )
