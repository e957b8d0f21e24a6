"""The HTTP protocol chainkeys serves with: uvicorn's httptools, with a bounded request head.

uvicorn's httptools protocol buffers a request line and headers of any size
(a 100 MB header costs ~100 MB and seconds of CPU) and waits for them forever.
`BoundedHttpTools` caps the head at `MAX_HEAD_BYTES` (431) and gives a client
`HEAD_TIMEOUT_SECONDS` to send it (408), both as the JSON error envelope; a
malformed request gets the envelope too (400).

Requests for chainkeys' own `App` skip the ASGI message round: `App.handle`
returns the finished response and `_Cycle` writes status line, headers and
body in one write (one send() call and one TCP segment instead of two, and
none of the per-message checks an arbitrary ASGI app needs; every header
chainkeys sends is its own, and an echoed request id is validated first).
Any other ASGI app is served by uvicorn's cycle unchanged.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import msgspec
from uvicorn.protocols.http.httptools_impl import (
    STATUS_LINE,
    HttpToolsProtocol,
    RequestResponseCycle,
)

from chainkeys.api.http import ARRIVED, App, Response
from chainkeys.api.schemas import ErrorBody

MAX_HEAD_BYTES = 16 * 1024  # request line + headers; the same default as uvicorn's h11 and Node
HEAD_TIMEOUT_SECONDS = 10.0
_END_OF_HEAD = b"\r\n\r\n"


def _raw_error(status: int, reason: str, message: str, code: str) -> bytes:
    body = msgspec.json.encode(ErrorBody(message=message, code=code))
    return (
        f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    ).encode() + body


HEAD_TOO_LARGE = _raw_error(
    431,
    "Request Header Fields Too Large",
    f"request line and headers are larger than {MAX_HEAD_BYTES} bytes",
    "headers_too_large",
)
HEAD_TOO_SLOW = _raw_error(
    408,
    "Request Timeout",
    f"request headers not sent within {HEAD_TIMEOUT_SECONDS:.0f}s",
    "request_timeout",
)
MALFORMED = _raw_error(400, "Bad Request", "malformed HTTP request", "bad_http_request")


class _Cycle(RequestResponseCycle):
    """uvicorn's request/response cycle; for chainkeys' App, one write per response."""

    async def run_asgi(self, app: Any) -> None:
        if not isinstance(app, App):
            await super().run_asgi(app)
            return
        try:
            scope: Any = self.scope
            response, request_id, started = await app.handle(scope, self.receive)  # type: ignore[arg-type]
            if self.flow.write_paused and not self.disconnected:
                await self.flow.drain()
            if not self.disconnected:
                self.write(response, request_id)
        except BaseException as exc:  # handle() answers every Exception; this is cancellation
            self.logger.error("request ended by %s", type(exc).__name__)
            if not self.response_started:
                await self.send_500_response()
            else:
                self.transport.close()
            return
        finally:
            self.on_response = lambda: None
        app.access(scope, response.status, started, request_id)

    def write(self, response: Response, request_id: str) -> None:
        """Status line, headers and body as one write; then what uvicorn's send does
        at the end of a response (keep-alive or close, the next pipelined request)."""
        self.response_started = True
        self.waiting_for_100_continue = False
        body = response.body
        out = [STATUS_LINE[response.status]]
        for name, value in self.default_headers:
            out += (name, b": ", value, b"\r\n")
        out += (
            b"content-type: ", response.content_type,
            b"\r\ncontent-length: ", str(len(body)).encode(),
            b"\r\nx-request-id: ", request_id.encode(), b"\r\n",
        )  # fmt: skip
        for name, value in response.headers or ():
            out += (name, b": ", value, b"\r\n")
        if not self.keep_alive:
            out.append(b"connection: close\r\n")
        out.append(b"\r\n")
        if self.scope["method"] != "HEAD":
            out.append(body)
        self.transport.write(b"".join(out))
        self.response_complete = True
        self.message_event.set()
        if not self.keep_alive:
            self.transport.close()
        self.on_response()


class BoundedHttpTools(HttpToolsProtocol):
    """uvicorn's httptools protocol with a size cap and a deadline on the request head.

    Bytes are counted as they arrive, before httptools buffers them, from the
    end of one request to the end of the next one's headers; the body is
    capped by the handlers (`max_body_bytes`). The deadline is one timer per
    connection that re-arms itself, not a timer per request: a head's start
    time is all a request pays for.
    """

    _in_head = True
    _head_bytes = 0
    _tail = b""
    _head_started: float | None = None  # when the current head began (or the connection)
    _check: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._head_started = self.loop.time()
        self._check = self.loop.call_later(HEAD_TIMEOUT_SECONDS, self._check_head)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._in_head:
            if self._head_started is None:
                self._head_started = self.loop.time()
            if self._head_bytes + len(data) > MAX_HEAD_BYTES:
                # Over the cap unless the head ends within it (the rest is body).
                end = (self._tail + data).find(_END_OF_HEAD)
                if end < 0 or self._head_bytes - len(self._tail) + end + 4 > MAX_HEAD_BYTES:
                    self._reject(HEAD_TOO_LARGE)
                    return
            self._head_bytes += len(data)
            self._tail = (self._tail + data)[-3:]
        super().data_received(data)

    def on_headers_complete(self) -> None:
        self._in_head, self._head_bytes, self._tail = False, 0, b""
        self._head_started = None
        self.scope[ARRIVED] = time.perf_counter()  # type: ignore[literal-required]
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._in_head = True
        super().on_message_complete()

    def send_400_response(self, msg: str) -> None:
        self._reject(MALFORMED)

    def _start_asgi_task(self, cycle: RequestResponseCycle, app: Any) -> None:
        # uvicorn built this cycle just now and has not started it.
        cycle.__class__ = _Cycle
        super()._start_asgi_task(cycle, app)

    def _disarm(self) -> None:
        if self._check is not None:
            self._check.cancel()
            self._check = None

    def _check_head(self) -> None:
        """Every HEAD_TIMEOUT_SECONDS: has a head been arriving for longer than that?"""
        self._check = None
        if self.transport.is_closing():
            return
        started = self._head_started
        waited = 0.0 if started is None or not self._in_head else self.loop.time() - started
        if waited < HEAD_TIMEOUT_SECONDS:
            self._check = self.loop.call_later(HEAD_TIMEOUT_SECONDS - waited, self._check_head)
        elif self._head_bytes:
            self._reject(HEAD_TOO_SLOW)
        else:
            self.transport.close()  # a new connection that never sent anything

    def _reject(self, response: bytes) -> None:
        self._disarm()
        self._in_head = False
        if not self.transport.is_closing():
            self.transport.write(response)
            self.transport.close()


# How uvicorn runs chainkeys (`chainkeys serve`, and the test suite's server).
UVICORN_OPTIONS: dict[str, Any] = {
    "http": f"{__name__}:BoundedHttpTools",
    "access_log": False,  # chainkeys writes its own access line
    "server_header": False,
    "proxy_headers": False,  # no client address is used or logged: one wrapper less
}
