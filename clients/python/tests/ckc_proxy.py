"""A small HTTP proxy in front of the real server (a thread, real HTTP on both sides):
it forwards every request and answer as they are, unless a test rewrites the JSON
answers it chooses, as a compromised server or a proxy on the way could."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

# (method, path without the query, the answer's JSON body) -> a new body, or None: as is
Rewrite = Callable[[str, str, Any], Any]
HOP = frozenset({"connection", "keep-alive", "transfer-encoding", "content-length", "host",
                 "content-encoding", "proxy-connection", "te", "upgrade"})  # fmt: skip


class TamperProxy:
    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.rewrite: Rewrite | None = None
        self.rewritten: list[str] = []  # "METHOD path" of each answer changed
        self._http = httpx.Client(base_url=upstream, timeout=30)
        self._lock = threading.Lock()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self._thread.start()

    @contextmanager
    def rewriting(self, rewrite: Rewrite) -> Iterator[list[str]]:
        """Rewrite answers with `rewrite` inside the block; yields the list of what it changed."""
        self.rewrite, self.rewritten = rewrite, []
        try:
            yield self.rewritten
        finally:
            self.rewrite = None

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self._http.close()

    def _answer(self, method: str, target: str, headers: dict[str, str], body: bytes | None
                ) -> tuple[int, list[tuple[str, str]], bytes]:  # fmt: skip
        with self._lock:  # one upstream connection pool, used one request at a time
            r = self._http.request(method, target, headers=headers, content=body)
        content = r.content
        rewrite = self.rewrite
        if rewrite is not None and r.headers.get("content-type", "").startswith("application/json"):
            path = target.split("?", 1)[0]
            changed = rewrite(method, path, json.loads(content))
            if changed is not None:
                content = json.dumps(changed).encode()
                self.rewritten.append(f"{method} {path}")
        kept = [(k, v) for k, v in r.headers.multi_items() if k.lower() not in HOP]
        return r.status_code, kept, content

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def forward(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP}
                status, kept, content = proxy._answer(self.command, self.path, headers, body)
                self.send_response(status)
                for key, value in kept:
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(content)))
                self.end_headers()
                self.wfile.write(content)

            do_GET = do_POST = do_DELETE = forward

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet
                return

        return Handler
