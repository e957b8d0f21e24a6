"""What the sync and async clients share: a request as data (`Call`), how an
answer becomes a value or an exception, and when a request may be retried.

Every endpoint is a function that builds a `Call` (method, path, query, body,
headers, how to read the answer, whether a retry is safe). `SyncRunner` and
`AsyncRunner` are the only code that performs I/O, so an endpoint is written
once and both clients get it.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from typing import Any, Generic, TypeVar
from urllib.parse import quote

import httpx
import msgspec

from chainkeys_client._errors import (
    ApprovalPending,
    ChainkeysError,
    RateLimited,
    ServiceUnavailable,
    TransportError,
    error_class,
)
from chainkeys_client._models import Approval

T = TypeVar("T")

DEFAULT_TIMEOUT = 10.0
RETRY_STATUSES = frozenset({429, 503})
_encoder = msgspec.json.Encoder()


class _ErrorBody(msgspec.Struct):
    message: str = ""
    code: str = ""


class _Envelope(msgspec.Struct):
    success: bool = True
    message: str = ""
    data: Any = None


def segment(value: str, what: str = "an account name") -> str:
    """One path segment, escaped: a name can never reach another path."""
    if not isinstance(value, str) or not value or value in (".", ".."):
        raise ValueError(f"{what} is a non-empty string, not . or ..")
    return quote(value, safe="")


def family_segment(family: str) -> str:
    if not isinstance(family, str) or not family.isascii() or not family.isalpha():
        raise ValueError(f"not a family name: {family!r}")
    return family.lower()


@dataclass(frozen=True, slots=True)
class Answer:
    """A successful answer: the decoded JSON body, its status and headers."""

    status: int
    body: Any
    headers: httpx.Headers

    def data(self) -> Any:
        return self.body.get("data") if isinstance(self.body, dict) else None


@dataclass(frozen=True, slots=True)
class Call(Generic[T]):
    """One HTTP request and how to read its answer.

    `retry` is True only where a repeat cannot do anything twice: reads, and
    creates carrying an Idempotency-Key (the same key is sent on every try).
    """

    method: str
    path: str
    read: Callable[[Answer], T]
    params: Mapping[str, str | int] | None = None
    body: Any = None  # a Struct or JSON-able value; None: no body
    headers: Mapping[str, str] = field(default_factory=dict)
    retry: bool = False
    approvable: bool = False  # a sign request: 202 means ApprovalPending

    def content(self) -> bytes | None:
        return None if self.body is None else _encoder.encode(self.body)

    def query(self) -> dict[str, str | int] | None:
        if not self.params:
            return None
        return {k: v for k, v in self.params.items() if v is not None}


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Up to `retries` repeats of a safe request after a connection error, 429 or 503.

    The wait is the server's Retry-After when it gives one (at most
    `max_wait`), else `backoff * 2**attempt` with jitter.
    """

    retries: int = 2
    backoff: float = 0.25
    max_wait: float = 30.0

    def wait(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.max_wait)
        base: float = self.backoff * (2**attempt)
        return min(base * (0.5 + random.random()), self.max_wait)  # noqa: S311 - jitter


def retry_after(headers: httpx.Headers) -> float | None:
    raw = headers.get("retry-after")
    if raw is None:
        return None
    try:
        return float(raw)
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    return max(0.0, float(when.timestamp()) - time.time())


def _json(response: httpx.Response) -> Any:
    try:
        return msgspec.json.decode(response.content) if response.content else None
    except msgspec.DecodeError:
        return None


def error_of(call: Call[Any], response: httpx.Response) -> ChainkeysError:
    """The exception for an error answer, from the envelope (or the status alone)."""
    body = _json(response)
    code, message = f"http_{response.status_code}", response.reason_phrase or "error"
    if isinstance(body, dict):
        env = msgspec.convert(body, _ErrorBody, strict=False)
        code, message = env.code or code, env.message or message
    cls = error_class(response.status_code, code)
    kwargs: dict[str, Any] = {
        "method": call.method,
        "path": call.path,
        "request_id": response.headers.get("x-request-id"),
    }
    if issubclass(cls, RateLimited | ServiceUnavailable):
        kwargs["retry_after"] = retry_after(response.headers)
    return cls(response.status_code, code, message, **kwargs)


def pending_of(response: httpx.Response) -> ApprovalPending:
    body = _json(response)
    message = "approval required"
    obj: Any = body
    if isinstance(body, dict):
        message = str(body.get("message") or message)
        if isinstance(body.get("data"), dict):
            obj = body["data"]
        if isinstance(obj, dict) and isinstance(obj.get("approval"), dict):
            obj = obj["approval"]
    try:
        approval = msgspec.convert(obj, Approval, strict=False)
    except msgspec.ValidationError:
        approval = Approval(id="")
    return ApprovalPending(approval, message)


def outcome(call: Call[T], response: httpx.Response) -> T:
    """The answer's value, or the exception it stands for."""
    status = response.status_code
    if status == 202 and call.approvable:
        raise pending_of(response)
    if 200 <= status < 300:
        return call.read(Answer(status, _json(response), response.headers))
    raise error_of(call, response)


def should_retry(call: Call[Any], response: httpx.Response | None) -> bool:
    return call.retry and (response is None or response.status_code in RETRY_STATUSES)


def transport_error(call: Call[Any], exc: httpx.TransportError) -> TransportError:
    # The class name only: httpx messages can quote the request.
    what = type(exc).__name__
    return TransportError(
        None, "transport_error", f"no answer from chainkeys ({what})",
        method=call.method, path=call.path,
    )  # fmt: skip


def headers_for(token: str, user_agent: str) -> dict[str, str]:
    if not isinstance(token, str) or not token or any(c in token for c in "\r\n"):
        raise ValueError("token must be a non-empty single-line string")
    return {
        "Authorization": f"Bearer {token}",
        "Accept": "application/json",
        "User-Agent": user_agent,
    }


def _request(call: Call[Any]) -> dict[str, Any]:
    headers = dict(call.headers)
    content = call.content()
    if content is not None:
        headers["Content-Type"] = "application/json"
    return {
        "method": call.method,
        "url": call.path,
        "params": call.query(),
        "content": content,
        "headers": headers,
    }


class SyncRunner:
    def __init__(self, http: httpx.Client, policy: RetryPolicy) -> None:
        self.http = http
        self.policy = policy

    def __call__(self, call: Call[T]) -> T:
        attempt = 0
        while True:
            try:
                response = self.http.request(**_request(call))
            except httpx.TransportError as exc:
                if should_retry(call, None) and attempt < self.policy.retries:
                    time.sleep(self.policy.wait(attempt, None))
                    attempt += 1
                    continue
                raise transport_error(call, exc) from None
            if should_retry(call, response) and attempt < self.policy.retries:
                time.sleep(self.policy.wait(attempt, retry_after(response.headers)))
                attempt += 1
                continue
            return outcome(call, response)


class AsyncRunner:
    def __init__(self, http: httpx.AsyncClient, policy: RetryPolicy) -> None:
        self.http = http
        self.policy = policy

    async def __call__(self, call: Call[T]) -> T:
        attempt = 0
        while True:
            try:
                response = await self.http.request(**_request(call))
            except httpx.TransportError as exc:
                if should_retry(call, None) and attempt < self.policy.retries:
                    await asyncio.sleep(self.policy.wait(attempt, None))
                    attempt += 1
                    continue
                raise transport_error(call, exc) from None
            if should_retry(call, response) and attempt < self.policy.retries:
                await asyncio.sleep(self.policy.wait(attempt, retry_after(response.headers)))
                attempt += 1
                continue
            return outcome(call, response)


def data_as(type_: type[T]) -> Callable[[Answer], T]:
    """Read the envelope's `data` as `type_`."""

    def read(answer: Answer) -> T:
        return msgspec.convert(answer.data(), type_, strict=False)

    return read


def ignore(answer: Answer) -> None:
    return None
