"""What every request passes through before and after the framework: an ASGI wrapper.

It sits outside the framework (Starlette) so that it sees every request, routing errors included:
- a server-made request id (`X-Request-ID` on every response, the access line,
  the audit log); a client's own id is kept apart as `client_request_id`;
- the body's bounds: its size (413; a declared size over the limit is refused
  by the route after authentication, before a byte is read, so a refused sign
  request is audited; a route may allow more than the server's limit, its own
  cap: `_Body.widen`), a deadline for all of it (408: an idle timer would let
  one byte every few seconds hold a connection forever), and a body that
  never fully arrives is a disconnect, never a complete request;
- `Connection: close` after a response that left part of a body unread, so a
  stalled or oversized upload cannot keep its connection;
- requests refused before any handler runs: two `Authorization` headers (a
  proxy checking the first would be fooled by the last), an encoded `/` in
  the path, WebSocket upgrades;
- one access line per request, every field escaped.
The request head's size and deadline are the HTTP server's (`api/serve.py`).
"""

from __future__ import annotations

import asyncio
import itertools
import os
import re
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from chainkeys import logs, metrics
from chainkeys.api.errors import ClientDisconnected, PayloadTooLarge, RequestTimeout, envelope
from chainkeys.errors import BadRequest, ChainkeysError

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Any, Any, Any], Awaitable[None]]

METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
CLIENT_REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")
# Scope keys the wrapper sets for the app (read by api/auth.py and the access line).
ARRIVED = "chainkeys.arrived"
TOKEN_ID = "chainkeys.token_id"  # noqa: S105 - a scope key, not a secret
AUTHORIZATION = "chainkeys.authorization"  # the one Authorization header's value (bytes)
# The request's body (`_Body`): its limit, and whether the declared size is over it (the
# first read then raises 413 before any byte is read). Left to the app, so that a refused
# sign request is audited, and so that a route can allow its own cap (`_Body.widen`).
BODY = "chainkeys.body"


class _RequestIds:
    """Unique ids without a getrandom() call per request: a random prefix per
    process (renewed in a forked child) and a counter."""

    def __init__(self) -> None:
        self._reseed()
        os.register_at_fork(after_in_child=self._reseed)

    def _reseed(self) -> None:
        self._prefix = os.urandom(8).hex()
        self._count = itertools.count()

    def next(self) -> str:
        return f"{self._prefix}{next(self._count):016x}"


request_ids = _RequestIds()


class _Body:
    """The request body as the app receives it: bounded in size and in time."""

    def __init__(
        self, receive: Receive, expected: bool, limit: int, timeout: float, declared: int | None
    ) -> None:
        self._receive = receive
        self.limit = limit
        self.timeout = timeout
        self.complete = not expected
        self.gone = False
        self.declared = declared
        self.oversize = declared is not None and declared > limit
        self._seen = 0
        self._deadline: float | None = None

    def widen(self, limit: int) -> None:
        """A route's own cap above the server's (a batch of sign requests), set before
        the route reads its body."""
        if limit > self.limit:
            self.limit = limit
            self.oversize = self.declared is not None and self.declared > limit

    async def receive(self) -> Message:
        if self.oversize:
            raise PayloadTooLarge(f"request body is larger than {self.limit} bytes")
        if self.complete or self.gone:
            return await self._receive()  # after the body: a disconnect, when it comes
        loop = asyncio.get_running_loop()
        if self._deadline is None:
            self._deadline = loop.time() + self.timeout
        try:
            async with asyncio.timeout_at(self._deadline):
                message = await self._receive()
        except TimeoutError:
            raise RequestTimeout(
                f"the request body did not arrive within {self.timeout:g}s"
            ) from None
        if message["type"] != "http.request":
            self.gone = True
            raise ClientDisconnected()
        self._seen += len(message.get("body", b""))
        if self._seen > self.limit:
            raise PayloadTooLarge(f"request body is larger than {self.limit} bytes")
        if not message.get("more_body", False):
            self.complete = True
        return message


class Transport:
    """Wraps the ASGI app (see the module docstring)."""

    def __init__(
        self, app: ASGIApp, *, max_body: int, body_timeout: float, access_log: bool = True
    ) -> None:
        self.app = app
        self.max_body = max_body
        self.body_timeout = body_timeout
        self.access_log = access_log
        self._children: dict[tuple[str, str, int], tuple[Any, Any]] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "http":
            await self.http(scope, receive, send)
        elif kind == "websocket":  # not offered: refuse the upgrade
            await send({"type": "websocket.close", "code": 1008})
        else:
            await self.app(scope, receive, send)

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = time.perf_counter()
        scope[ARRIVED] = started
        rid = request_ids.next()
        logs.request_id.set(rid)
        client_rid = None
        auth_headers = 0
        declared: int | None = None
        chunked = False
        for name, value in scope["headers"]:
            if name == b"authorization":
                auth_headers += 1
                scope[AUTHORIZATION] = value
            elif name == b"content-length":
                declared = int(value) if value.isdigit() else -1
            elif name == b"transfer-encoding":
                chunked = True
            elif name == b"x-request-id":
                text = value.decode("latin-1")
                client_rid = text if CLIENT_REQUEST_ID.fullmatch(text) else None
        logs.client_request_id.set(client_rid)
        expected = chunked or (declared is not None and declared != 0)
        body = scope[BODY] = _Body(receive, expected, self.max_body, self.body_timeout, declared)
        status = 500
        rid_header = (b"x-request-id", rid.encode())

        async def send_wrapped(message: Message) -> None:
            nonlocal status
            if body.gone:
                return  # nobody to answer
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = list(message.get("headers", ()))
                headers.append(rid_header)
                if not body.complete:  # a body is (partly) unread: do not reuse this connection
                    headers.append((b"connection", b"close"))
                message = {**message, "headers": headers}
            await send(message)

        path = scope["path"]
        if len(path) > 1 and path.endswith("/"):  # `/cosmos/` names the collection `/cosmos`
            scope["path"] = path[:-1]
        refusal = self.refuse(scope, auth_headers, declared)
        try:
            if refusal is not None:
                status = await self.answer(send_wrapped, refusal)
            else:
                await self.app(scope, body.receive, send_wrapped)
        finally:
            if body.gone:
                status = 499
            seconds = time.perf_counter() - started
            self.count(scope, status, seconds)
            if self.access_log:
                logs.access(scope, status, seconds * 1000, rid, client_rid, scope.get(TOKEN_ID))

    def count(self, scope: Scope, status: int, seconds: float) -> None:
        """Request metrics; the labelled children are looked up once per label set."""
        matched = scope.get("route")
        route = matched.path if matched is not None else "unmatched"
        method = scope["method"] if scope["method"] in METHODS else "other"
        key = (route, method, status)
        found = self._children.get(key)
        if found is None:
            found = self._children[key] = (
                metrics.REQUESTS.labels(route, method, str(status)),
                metrics.REQUEST_SECONDS.labels(route, method),
            )
        found[0].inc()
        found[1].observe(seconds)

    def refuse(
        self, scope: Scope, auth_headers: int, declared: int | None
    ) -> ChainkeysError | None:
        if auth_headers > 1:
            return BadRequest("send one Authorization header", code="duplicate_authorization")
        if declared is not None and declared < 0:
            return BadRequest("Content-Length is not a number", code="bad_http_request")
        raw = scope.get("raw_path") or b""
        if b"%2f" in raw.lower():
            return BadRequest("an encoded '/' is not allowed in the path", code="invalid_path")
        return None

    @staticmethod
    async def answer(send: Send, exc: ChainkeysError) -> int:
        status, payload, extra = envelope(exc)
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(payload)).encode()),
            *((k.lower().encode(), v.encode()) for k, v in extra.items()),
        ]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": payload})
        return status
