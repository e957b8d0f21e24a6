"""Regression tests for the defects an attack on the running service found (issue 12).

Raw sockets where an HTTP client library would hide the problem (bodies that
never arrive, duplicate headers, pipelining, upgrades).
"""

from __future__ import annotations

import contextlib
import json
import socket
from typing import Any

import httpx
import pytest
from prometheus_client import REGISTRY
from tests.api.test_limits import read_response
from tests.conftest import wait_for


def connect(server: Any) -> socket.socket:
    host, port = server.base_url.removeprefix("http://").split(":")
    return socket.create_connection((host, int(port)), timeout=10)


def answered(status: str, route: str = "/cosmos", method: str = "POST") -> float:
    """Requests the server (in this process) has ended with `status`, from its metrics."""
    labels = {"route": route, "method": method, "status": status}
    return REGISTRY.get_sample_value("chainkeys_requests_total", labels) or 0.0


def accounts(server: Any, token: str, family: str = "cosmos") -> list[Any]:
    with server.client(token) as c:
        body = c.get(f"/{family}").json()
    data = body["data"]
    return list(data["data"]["keys"] if family == "cosmos" else data["keys"])


@pytest.mark.parametrize("sent", [b"{}", b"", b'{"network":"cosmoshub"'])
def test_a_body_that_never_fully_arrives_creates_nothing(server: Any, sent: bytes) -> None:
    """Content-Length 500, a few bytes (or none), then the client closes: no account."""
    token = server.new_token()
    before = answered("499")
    with connect(server) as sock:
        sock.sendall(
            b"POST /cosmos HTTP/1.1\r\nHost: x\r\nAuthorization: "
            + token.encode()
            + b"\r\nContent-Type: application/json\r\nContent-Length: 500\r\n\r\n"
            + sent
        )
    # the request is over once the server counted it as closed by the client (499)
    wait_for(lambda: answered("499") > before, "the server ending the unfinished request")
    assert accounts(server, token) == []
    with server.client(token) as c:
        events = c.get("/audit").json()["data"]["events"]
    assert [e["action"] for e in events] == ["token.create"]


def test_garbage_after_a_create_in_the_same_packet_still_delivers_the_create(
    server: Any,
) -> None:
    """The create is answered (with its one-time key) before the garbage is refused:
    nothing is committed that the client was not told about."""
    token = server.new_token()
    with connect(server) as sock:
        sock.sendall(
            b"POST /cosmos HTTP/1.1\r\nHost: x\r\nAuthorization: "
            + token.encode()
            + b"\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
            + b"GARBAGE\r\n\r\n"
        )
        data = b""
        while chunk := sock.recv(65536):  # until the server closes
            data += chunk
    first, second = data.split(b"HTTP/1.1 ")[1:]
    assert first.startswith(b"200 ") and second.startswith(b"400 ")
    created = json.loads(first.partition(b"\r\n\r\n")[2])["data"]["data"]
    assert len(created["private_key"]) == 64
    assert [k["address"] for k in accounts(server, token)] == [created["address"]]


def test_two_authorization_headers_are_refused(server: Any) -> None:
    good = server.new_token()
    with connect(server) as sock:
        sock.sendall(
            b"GET /cosmos HTTP/1.1\r\nHost: x\r\nAuthorization: bad\r\nAuthorization: "
            + good.encode()
            + b"\r\nConnection: close\r\n\r\n"
        )
        status, _, body, _ = read_response(sock)
    assert status == 400
    assert json.loads(body)["code"] == "duplicate_authorization"


@pytest.mark.parametrize(
    "body",
    [b'{"network":"\xff\xfe"}', b'{"private_key":"\xc3\x28"}', b"\xff"],
    ids=["bad-utf8-in-string", "overlong", "lone-byte"],
)
def test_invalid_utf8_is_a_400(client: httpx.Client, body: bytes) -> None:
    r = client.post("/cosmos", content=body, headers={"Content-Type": "application/json"})
    assert r.status_code == 400
    assert r.json()["code"] == "invalid_json"
    assert client.get("/cosmos").json()["data"]["data"]["keys"] == []


def test_a_websocket_upgrade_is_an_ordinary_refused_request(server: Any) -> None:
    with connect(server) as sock:
        sock.sendall(
            b"GET /cosmos HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
        )
        status, headers, body, _ = read_response(sock, then_closed=False)
    assert status == 401
    assert headers["content-type"] == "application/json"
    assert json.loads(body)["code"] == "unauthorized"


def test_an_error_that_leaves_a_body_unread_closes_the_connection(server: Any) -> None:
    """A 401 to a POST whose body never came: the connection is not kept for more bytes."""
    with connect(server) as sock:
        sock.sendall(b"POST /cosmos HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{")
        status, headers, _, closed = read_response(sock)
    assert status == 401
    assert headers["connection"] == "close" and closed


def test_an_oversized_declared_body_is_413_and_closed(server: Any) -> None:
    token = server.new_token()
    with connect(server) as sock:
        sock.sendall(
            b"POST /cosmos HTTP/1.1\r\nHost: x\r\nAuthorization: "
            + token.encode()
            + b"\r\nContent-Length: 99999999\r\n\r\n"
        )
        status, headers, body, closed = read_response(sock)
    assert status == 413 and json.loads(body)["code"] == "payload_too_large"
    assert headers["connection"] == "close" and closed


def test_an_encoded_slash_is_refused_not_routed(client: httpx.Client) -> None:
    r = client.get("/cosmos%2Fcosmos1abc")
    assert r.status_code == 400 and r.json()["code"] == "invalid_path"


def test_a_client_request_id_is_not_the_audit_id(client: httpx.Client) -> None:
    first = client.post("/cosmos", json={})
    copied = client.post(
        "/cosmos", json={}, headers={"X-Request-ID": first.headers["x-request-id"]}
    )
    assert copied.status_code == 200
    events = client.get("/audit", params={"action": "create"}).json()["data"]["events"]
    ids = [e["request_id"] for e in reversed(events)]  # newest first
    assert ids == [first.headers["x-request-id"], copied.headers["x-request-id"]]
    assert len(set(ids)) == 2


def test_stalled_connections_do_not_pile_up(server: Any) -> None:
    """Connections that stop mid-body are answered and closed, not held open."""
    socks = []
    try:
        for _ in range(20):
            s = connect(server)
            s.sendall(b"POST /cosmos HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
            socks.append(s)
        for s in socks:
            status, _, _, closed = read_response(s)
            assert status == 401 and closed
    finally:
        for s in socks:
            with contextlib.suppress(OSError):
                s.close()
