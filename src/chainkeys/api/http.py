"""The HTTP layer: a small ASGI core instead of a framework's router and middleware.

A framework's routing (a regex per route, tried in turn), middleware stack and
request objects cost more CPU than a lookup and an AES-GCM seal together. Here
a request is dispatched with one dict lookup on its first path segment, reads
only the headers it names, and every response, errors included, leaves as one
JSON envelope with an `X-Request-ID` and one access-log line.
"""

from __future__ import annotations

import itertools
import logging
import os
import re
import time
import traceback
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import parse_qsl

import msgspec

from chainkeys import logs
from chainkeys.api.schemas import ErrorBody
from chainkeys.errors import ChainkeysError, MethodNotAllowed, NotFound, PayloadTooLarge

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

log = logging.getLogger("chainkeys.api")
REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")
# A scope key chainkeys' own server protocol sets: time.perf_counter() when the
# request's head had arrived (earlier than the handler starts, when requests queue).
ARRIVED = "chainkeys.arrived"
_encoder = msgspec.json.Encoder()
JSON = b"application/json"


class _RequestIds:
    """Unique request ids without a getrandom() call per request: a random
    prefix per process (renewed in a forked child) and a counter."""

    def __init__(self) -> None:
        self._reseed()
        os.register_at_fork(after_in_child=self._reseed)

    def _reseed(self) -> None:
        self._prefix = os.urandom(8).hex()
        self._count = itertools.count()

    def next(self) -> str:
        return f"{self._prefix}{next(self._count):016x}"


request_ids = _RequestIds()


class Response:
    """A status, a finished body and any extra headers (names and values as bytes)."""

    __slots__ = ("body", "content_type", "headers", "status")

    def __init__(
        self,
        body: bytes,
        status: int = 200,
        headers: list[tuple[bytes, bytes]] | None = None,
        content_type: bytes = JSON,
    ) -> None:
        self.body = body
        self.status = status
        self.headers = headers
        self.content_type = content_type


def respond(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    """A msgspec struct as the JSON response."""
    extra = [(k.lower().encode(), v.encode()) for k, v in headers.items()] if headers else None
    return Response(_encoder.encode(body), status, extra)


def error_response(exc: ChainkeysError) -> Response:
    body = ErrorBody(message=exc.message, code=exc.code)
    return respond(body, exc.status, headers=getattr(exc, "headers", None))


def internal_error(exc: BaseException) -> Response:
    """Log the frames but not the exception text: it could quote a secret."""
    frames = "".join(traceback.format_tb(exc.__traceback__))
    log.error("unhandled %s\n%s", type(exc).__name__, frames)
    return error_response(ChainkeysError())


class Request:
    """What a handler may read of a request: method, path, named headers, query, body."""

    __slots__ = (
        "_query", "app", "arrived", "headers", "method", "name", "path", "receive", "scope",
    )  # fmt: skip

    def __init__(
        self,
        scope: Scope,
        headers: dict[bytes, bytes],
        receive: Receive,
        app: Any,
        name: str | None,
        arrived: float,
    ) -> None:
        self.scope = scope
        self.receive = receive
        self.app = app  # the App (its services and rate limiter)
        self.method: str = scope["method"]
        self.path: str = scope["path"]
        self.name = name  # the {accountName} segment, if the path has one
        # Names arrive lower-cased (ASGI); a repeated header keeps its last value.
        self.headers = headers
        self._query: dict[str, str] | None = None
        self.arrived = arrived  # perf_counter() when the request head was in (ARRIVED)

    def header(self, name: bytes) -> str | None:
        value = self.headers.get(name)
        return None if value is None else value.decode("latin-1")

    def query(self, name: str) -> str | None:
        if self._query is None:
            raw = self.scope.get("query_string", b"")
            self._query = dict(parse_qsl(raw.decode("latin-1"), keep_blank_values=True))
        return self._query.get(name)

    async def body(self, limit: int) -> bytes:
        """The whole body; 413 as soon as it (or its declared length) passes `limit`."""
        declared = self.headers.get(b"content-length")
        if declared and declared.isdigit() and int(declared) > limit:
            raise PayloadTooLarge(f"request body is larger than {limit} bytes")
        body = b""
        while True:
            message = await self.receive()
            if message["type"] != "http.request":  # the client went away
                break
            body += message.get("body", b"")
            if len(body) > limit:
                raise PayloadTooLarge(f"request body is larger than {limit} bytes")
            if not message.get("more_body", False):
                break
        return body


Handler = Callable[[Request], Awaitable[Response]]


class Resource:
    """One path: a handler per method (HEAD answers as GET; others get 405)."""

    __slots__ = ("allow", "handlers")

    def __init__(self, handlers: dict[str, Handler]) -> None:
        if "GET" in handlers:
            handlers = {**handlers, "HEAD": handlers["GET"]}
        self.handlers = handlers
        self.allow = ", ".join(handlers).encode()

    def handler(self, method: str, path: str) -> Handler:
        found = self.handlers.get(method)
        if found is None:
            exc = MethodNotAllowed(f"{method[:20]} is not allowed on {path[:100]}")
            exc.headers = {"Allow": self.allow.decode()}  # type: ignore[attr-defined]
            raise exc
        return found


class Router:
    """`/{segment}` and `/{segment}/{name}`: one dict lookup each.

    A trailing slash names the collection (`/cosmos/` is `/cosmos`).
    """

    def __init__(self) -> None:
        self.collections: dict[str, Resource] = {}
        self.items: dict[str, Resource] = {}

    def add(self, path: str, handlers: dict[str, Handler]) -> None:
        segment, _, rest = path.lstrip("/").partition("/")
        if rest == "{name}":
            self.items[segment] = Resource(handlers)
        elif not rest:
            self.collections[segment] = Resource(handlers)
        else:
            raise ValueError(f"unsupported route {path}")

    def match(self, method: str, path: str) -> tuple[Handler, str | None]:
        segment, slash, rest = path[1:].partition("/")
        name: str | None = None
        if not slash or not rest:
            resource = self.collections.get(segment)
        elif "/" in rest:
            resource = None
        else:
            resource, name = self.items.get(segment), rest
        if resource is None:
            raise NotFound("no such endpoint")
        return resource.handler(method, path), name


class App:
    """The ASGI application: lifespan, request id, dispatch, envelopes, access log."""

    def __init__(self, router: Router, lifespan: Any, access_log: bool = True) -> None:
        self.router = router
        self.lifespan = lifespan  # an async context manager factory taking the App
        self.log_access = access_log
        self.services: Any = None
        self.rate_limiter: Any = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "http":
            await self.http(scope, receive, send)
        elif kind == "lifespan":
            await self.run_lifespan(receive, send)

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The ASGI path (any ASGI server); `chainkeys serve` writes `handle`'s
        response itself instead (api/protocol.py)."""
        response, request_id, started = await self.handle(scope, receive)
        head = [
            (b"content-type", response.content_type),
            (b"content-length", str(len(response.body)).encode()),
            (b"x-request-id", request_id.encode()),
        ]
        if response.headers:
            head += response.headers
        try:
            await send({"type": "http.response.start", "status": response.status, "headers": head})
            await send({"type": "http.response.body", "body": response.body})
        finally:
            self.access(scope, response.status, started, request_id)

    async def handle(self, scope: Scope, receive: Receive) -> tuple[Response, str, float]:
        """A request's response (errors included), its request id and when it started."""
        started = time.perf_counter()
        headers: dict[bytes, bytes] = dict(scope["headers"])
        given = headers.get(b"x-request-id")
        request_id = given.decode("latin-1") if given is not None else ""
        if not request_id or REQUEST_ID.fullmatch(request_id) is None:
            request_id = request_ids.next()
        logs.request_id.set(request_id)
        try:
            handler, name = self.router.match(scope["method"], scope["path"])
            arrived = scope.get(ARRIVED, started)
            response = await handler(Request(scope, headers, receive, self, name, arrived))
        except ChainkeysError as exc:
            response = error_response(exc)
        except Exception as exc:
            response = internal_error(exc)
        return response, request_id, started

    def access(self, scope: Scope, status: int, started: float, request_id: str) -> None:
        if self.log_access:
            ms = (time.perf_counter() - started) * 1000
            logs.access(scope["method"], scope["path"][:200], status, ms, request_id)

    async def run_lifespan(self, receive: Receive, send: Send) -> None:
        message = await receive()
        assert message["type"] == "lifespan.startup"
        context = self.lifespan(self)
        try:
            await context.__aenter__()
        except BaseException as exc:
            # The type and our own message only: a driver's text may quote a URL.
            text = exc.message if isinstance(exc, ChainkeysError) else type(exc).__name__
            await send({"type": "lifespan.startup.failed", "message": text})
            if not isinstance(exc, Exception):
                raise
            return
        await send({"type": "lifespan.startup.complete"})
        message = await receive()
        try:
            await context.__aexit__(None, None, None)
        except Exception as exc:
            await send({"type": "lifespan.shutdown.failed", "message": type(exc).__name__})
            return
        await send({"type": "lifespan.shutdown.complete"})
