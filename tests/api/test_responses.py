"""What a client sees of responses over raw sockets: keep-alive, HEAD, `Connection:
close` and pipelined requests, each answered whole and in order.

The shared `server` fixture serves the app with Granian configured as `chainkeys
serve` configures it (api/serve.py `options`).
"""

from __future__ import annotations

import json
import socket
from typing import Any

from tests.api.test_limits import read_response


def connect(server: Any) -> socket.socket:
    host, port = server.base_url.removeprefix("http://").split(":")
    return socket.create_connection((host, int(port)), timeout=10)


def get(path: str, token: str = "", extra: str = "", version: str = "1.1") -> bytes:
    auth = f"Authorization: Bearer {token}\r\n" if token else ""
    return f"GET {path} HTTP/{version}\r\nHost: x\r\n{auth}{extra}\r\n".encode()


def read_responses(sock: socket.socket, count: int) -> list[tuple[int, dict[str, str], bytes]]:
    """`count` responses from one connection, however the bytes are split between reads."""
    buf, out = b"", list[tuple[int, dict[str, str], bytes]]()
    while len(out) < count:
        head, sep, rest = buf.partition(b"\r\n\r\n")
        if sep:
            lines = head.decode("latin-1").split("\r\n")
            headers = {k.lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:])}
            length = int(headers["content-length"])
            if len(rest) >= length:
                out.append((int(lines[0].split()[1]), headers, rest[:length]))
                buf = rest[length:]
                continue
        chunk = sock.recv(65536)
        assert chunk, "the server closed the connection early"
        buf += chunk
    return out


def test_keep_alive_then_head_then_close(server: Any) -> None:
    token = server.new_token()
    with connect(server) as sock:
        sock.sendall(get("/cosmos", token))
        status, headers, body, _ = read_response(sock, then_closed=False)
        assert status == 200 and "connection" not in headers
        assert json.loads(body)["success"] is True

        sock.sendall(get("/cosmos", token).replace(b"GET", b"HEAD", 1))
        head = b""
        while not head.endswith(b"\r\n\r\n"):
            head += sock.recv(1)  # byte by byte: nothing may follow the head
        assert head.startswith(b"HTTP/1.1 200 ")
        assert b"\r\ncontent-length: 0\r\n" not in head  # the length GET would have sent
        assert b"\r\nx-request-id: " in head

        sock.sendall(get("/cosmos", token, extra="Connection: close\r\n"))
        status, headers, body, closed = read_response(sock)
        assert status == 200 and headers["connection"] == "close" and closed
        assert json.loads(body)["success"] is True


def test_http_1_0_gets_one_response_and_a_close(server: Any) -> None:
    with connect(server) as sock:
        sock.sendall(get("/healthz", version="1.0"))
        status, _, body, closed = read_response(sock)
        assert status == 200 and closed
        assert json.loads(body) == {"success": True, "message": "ok"}


def test_pipelined_requests_are_answered_in_order(server: Any) -> None:
    token = server.new_token()
    with connect(server) as sock:
        sock.sendall(
            get("/cosmos/nosuchaccount", token, extra="X-Request-ID: one\r\n")
            + get("/healthz", extra="X-Request-ID: two\r\n")
            + get("/eos", "not-a-token", extra="X-Request-ID: three\r\n")
        )
        answers = read_responses(sock, 3)
    assert [a[0] for a in answers] == [400, 200, 401]
    ids = [a[1]["x-request-id"] for a in answers]  # the server's own, one per request
    assert len(set(ids)) == 3 and not {"one", "two", "three"} & set(ids)
    assert json.loads(answers[0][2])["code"] == "invalid_account_name"
    assert json.loads(answers[2][2])["code"] == "unauthorized"


def test_error_headers_survive_the_single_write(server: Any) -> None:
    with connect(server) as sock:
        sock.sendall(b"PUT /cosmos/x HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
        status, headers, body, _ = read_response(sock, then_closed=False)
    assert status == 405
    assert headers["allow"] == "GET, DELETE, HEAD"
    assert headers["content-type"] == "application/json"
    assert json.loads(body)["code"] == "method_not_allowed"
