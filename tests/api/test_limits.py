"""Size and shape limits: the request head (line + headers), account names, paging.

The request head's size and deadline are Granian's, as `chainkeys serve` configures
it (`api/serve.py`); the body's are the transport's. The head tests run the suite's
server with short deadlines; the name tests use the shared `client` fixture.
"""

from __future__ import annotations

import contextlib
import json
import socket
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from tests.conftest import Server, backend_settings

from chainkeys.accounts import repository as repositories
from chainkeys.api.serve import MAX_HEAD_BYTES

HEAD_TIMEOUT = 0.5
BODY_TIMEOUT = 1.0


class HeadServer(Server):
    """The suite's one test server (`conftest.Server`: Granian as `chainkeys serve`
    configures it) with short head and body deadlines, and raw socket access."""

    @property
    def port(self) -> int:
        return int(self.base_url.rsplit(":", 1)[1])

    def token(self) -> str:
        return self.new_token()

    def raw(self, data: bytes, wait: float = 10.0) -> tuple[int, dict[str, str], bytes, bool]:
        """Send bytes; (status, headers, body, whether the server closed the connection)."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=wait) as sock:
            # the server may answer and close before reading it all
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                sock.sendall(data)
            return read_response(sock)


def read_response(
    sock: socket.socket, then_closed: bool = True
) -> tuple[int, dict[str, str], bytes, bool]:
    """One response; with then_closed, also whether the server closed the connection."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = sock.recv(65536)
        if not chunk:
            return 0, {}, buf, True
        buf += chunk
    head, _, body = buf.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    while len(body) < int(headers.get("content-length", "0")):
        chunk = sock.recv(65536)
        if not chunk:
            break
        body += chunk
    if not then_closed:
        return int(lines[0].split()[1]), headers, body, False
    try:
        closed = sock.recv(1) == b""
    except (TimeoutError, ConnectionResetError):
        closed = True
    return int(lines[0].split()[1]), headers, body, closed


@pytest.fixture(scope="module")
def head_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HeadServer]:
    settings, _ = backend_settings(
        "sqlite",
        tmp_path_factory.mktemp("head"),
        head_timeout_seconds=HEAD_TIMEOUT,
        body_timeout_seconds=BODY_TIMEOUT,
    )
    srv = HeadServer(settings, "sqlite")
    srv.start()
    yield srv
    srv.stop()


def envelope(body: bytes, code: str) -> None:
    parsed = json.loads(body)
    assert parsed["success"] is False and parsed["message"] and parsed["code"] == code


def request(
    path: str = "/healthz",
    extra: bytes = b"",
    method: str = "GET",
    body: bytes = b"",
    keep_alive: bool = False,
) -> bytes:
    head = f"{method} {path} HTTP/1.1\r\nHost: x\r\n".encode() + extra
    if not keep_alive:
        head += b"Connection: close\r\n"
    if body:
        head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n".encode()
    return head + b"\r\n" + body


# ---- the request head ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "data",
    [
        request(extra=b"X-Big: " + b"a" * 1_000_000 + b"\r\n"),  # one huge header
        request(extra=b"".join(b"X-H%d: v\r\n" % i for i in range(4000))),  # very many
        request(path="/cosmos/" + "a" * 100_000),  # a huge request line
        request(extra=b"Authorization: " + b"t" * 200_000 + b"\r\n"),
    ],
    ids=["one-huge-header", "many-headers", "huge-url", "huge-authorization"],
)
def test_an_oversized_head_is_431_at_once(head_server: HeadServer, data: bytes) -> None:
    status, _, _, closed = head_server.raw(data)
    assert status == 431  # answered as it arrived (a head left to time out is never a 431)
    assert closed


def test_a_head_just_under_the_cap_and_a_body_in_the_same_packet_pass(
    head_server: HeadServer,
) -> None:
    filler = b"X-Pad: " + b"p" * (MAX_HEAD_BYTES - 400) + b"\r\n"
    status, _, body, _ = head_server.raw(request(extra=filler))
    assert status == 200, body
    # head + body arrive together and exceed the head cap; only the head counts
    status, _, body, _ = head_server.raw(
        request(method="POST", path="/cosmos", body=b"{" + b" " * 15_000 + b"}")
    )
    assert status == 401, body  # reached the app (no token), not refused as a huge head


def test_a_pipelined_oversized_head_is_431_too(head_server: HeadServer) -> None:
    """A big head right behind a small request in one write is held to the same cap:
    refused (431, or the connection closed before its answer), never served."""
    big = request(extra=b"X-Big: " + b"a" * 60_000 + b"\r\n")
    with socket.create_connection(("127.0.0.1", head_server.port), timeout=10) as sock:
        sock.sendall(request(keep_alive=True) + big)
        assert read_response(sock, then_closed=False)[0] == 200
        status, _, _, closed = read_response(sock)
    assert status in (0, 431) and closed


def test_keep_alive_connections_reset_the_count(head_server: HeadServer) -> None:
    filler = b"X-Pad: " + b"p" * (MAX_HEAD_BYTES // 2) + b"\r\n"
    with socket.create_connection(("127.0.0.1", head_server.port), timeout=10) as sock:
        for _ in range(4):  # 4 heads of half the cap each on one connection
            sock.sendall(request(extra=filler, keep_alive=True))
            assert read_response(sock, then_closed=False)[0] == 200


def test_a_malformed_request_is_400_and_closed(head_server: HeadServer) -> None:
    status, _, _, closed = head_server.raw(b"GET /healthz HTTP/1.1\r\nBad Header Line\r\n\r\n")
    assert status == 400
    assert closed


# Deadlines are asserted by state, never by elapsed time (a busy machine is slow): a
# connection is closed while the client is still sending, or the answer is a 408. Socket
# timeouts are only bounds for a server that never acts.
PATIENCE = 60.0


def test_a_head_that_never_finishes_is_cut_off_and_an_idle_connection_closes(
    head_server: HeadServer,
) -> None:
    with socket.create_connection(("127.0.0.1", head_server.port), timeout=PATIENCE) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ")  # and then nothing
        assert sock.recv(1) == b""
    with socket.create_connection(("127.0.0.1", head_server.port), timeout=PATIENCE) as sock:
        assert sock.recv(1) == b""  # connected, sent nothing: closed without a word


def drip_until_closed(sock: socket.socket, data: bytes, every: float, most: int) -> int:
    """Send `data` every `every` seconds until the server answers or closes the
    connection; the number of sends that went through (`most` when it never did)."""
    for sent in range(most):
        time.sleep(every)
        try:
            sock.sendall(data)
        except OSError:
            return sent
        sock.setblocking(False)
        try:
            sock.recv(1, socket.MSG_PEEK)  # an answer (a 408), or b"": closed
            return sent
        except BlockingIOError:
            pass  # nothing yet: the server still waits
        except OSError:
            return sent
        finally:
            sock.setblocking(True)
    return most


def test_a_head_dripping_bytes_is_cut_off_at_its_deadline(head_server: HeadServer) -> None:
    """A deadline, not an idle timer: a byte every so often does not keep it alive (the
    server closes the connection while the bytes still arrive)."""
    with socket.create_connection(("127.0.0.1", head_server.port), timeout=PATIENCE) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        most = 400  # 100 deadlines' worth of drips
        assert drip_until_closed(sock, b"X: y\r\n", HEAD_TIMEOUT / 4, most) < most
        with contextlib.suppress(OSError):
            assert sock.recv(1) == b""


def test_a_slow_head_after_a_kept_alive_request_is_cut_off(head_server: HeadServer) -> None:
    with socket.create_connection(("127.0.0.1", head_server.port), timeout=PATIENCE) as sock:
        for _ in range(3):  # answered requests on one connection
            sock.sendall(request(keep_alive=True))
            assert read_response(sock, then_closed=False)[0] == 200
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")  # then dripping, never done
        most = 400
        assert drip_until_closed(sock, b"X: y\r\n", HEAD_TIMEOUT / 4, most) < most


def test_a_slow_handler_is_not_cut_off_by_the_head_deadline(head_server: HeadServer) -> None:
    with socket.create_connection(("127.0.0.1", head_server.port), timeout=PATIENCE) as sock:
        sock.sendall(request(method="POST", path="/cosmos", body=b"{}")[:-2])  # head, not body
        time.sleep(HEAD_TIMEOUT * 1.5)  # past the head deadline (at least: sleeps run long)
        sock.sendall(b"{}")
        status, _, body, _ = read_response(sock)
    # answered by the app (401: no token; on a machine so busy that the body's deadline
    # passed too, its 408): a head deadline would have closed the connection unanswered
    assert status == 401 or (status == 408 and json.loads(body)["code"] == "request_timeout")


def test_a_body_dripping_bytes_is_cut_off_at_its_deadline(head_server: HeadServer) -> None:
    """A deadline for the whole body, not an idle timer: one byte now and then does not
    keep the request (or its connection) alive past BODY_TIMEOUT."""
    token = head_server.token()
    with socket.create_connection(("127.0.0.1", head_server.port), timeout=PATIENCE) as sock:
        sock.sendall(
            b"POST /cosmos HTTP/1.1\r\nHost: x\r\nAuthorization: "
            + token.encode()
            + b"\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"
        )
        # 98 drips would finish the body: the answer must come before they run out
        assert drip_until_closed(sock, b" ", BODY_TIMEOUT / 4, 98) < 98
        status, headers, body, closed = read_response(sock)
    assert status == 408 and json.loads(body)["code"] == "request_timeout"
    assert headers["connection"] == "close" and closed


# ---- account names and paging (before any storage work) --------------------------------------

FAMILIES = ["cosmos", "dogecoin", "eos", "litecoin"]
BAD_NAMES = {
    "unicode": "caf%C3%A9",
    "fullwidth": "%EF%BD%83%EF%BD%8F%EF%BD%93%EF%BD%8D%EF%BD%8F%EF%BD%93",
    "rtl-override": "abc%E2%80%AEdef",
    "emoji": "%F0%9F%94%91",
    "nul": "ab%00cd",
    "newline": "ab%0D%0Acd",
    "space": "ab%20cd",
    "backslash": "ab%5Ccd",
    "dotdot": "..",
    "encoded-dotdot": "%2E%2E",
    "encoded-slash": "a%2Fb",
    "dotdot-slash": "..%2F..%2Fetc",
    "percent": "%25",
    "very-long": "a" * 10_000,
    "long-valid-chars": "1" * 200,
}


@pytest.fixture
def no_account_queries(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Records every account lookup or delete that reaches the store."""
    seen: list[str] = []
    for name in ("get", "view", "delete"):
        original = getattr(repositories.Accounts, name)

        async def spy(*args: Any, _original: Any = original, _name: str = name) -> Any:
            seen.append(_name)
            return await _original(*args)

        monkeypatch.setattr(repositories.Accounts, name, staticmethod(spy))
    return seen


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("case", list(BAD_NAMES), ids=list(BAD_NAMES))
def test_bad_account_names_are_clean_4xx_before_the_store(
    client: httpx.Client, family: str, case: str, no_account_queries: list[str]
) -> None:
    methods = ["GET", "DELETE"] if family == "cosmos" else ["GET"]
    for method in methods:
        response = client.request(method, f"/{family}/{BAD_NAMES[case]}")
        assert response.status_code in (400, 404), response.text
        assert response.headers["content-type"].startswith("application/json")
        body = response.json()
        assert set(body) == {"success", "message", "code"} and body["success"] is False
        assert len(response.content) < 1000  # the name is not echoed back whole
    assert no_account_queries == []


def test_a_valid_name_does_reach_the_store(
    client: httpx.Client, no_account_queries: list[str]
) -> None:
    assert client.get("/eos/nosuchacct").status_code == 404
    assert no_account_queries == ["view"]


@pytest.mark.parametrize(
    "query",
    [
        "limit=" + "9" * 5000,
        "limit=1e3",
        "limit=-1",
        "limit=%201",
        "cursor=" + "A" * 10_000,
        "limit=1001",
        "limit=%C2%B9",  # '¹': str.isdigit() says yes, int() says no (was a 500)
        "limit=%D9%A3",  # Arabic-Indic 3: a digit to Python, not to this API
    ],
)
def test_paging_parameters_are_bounded(client: httpx.Client, query: str) -> None:
    response = client.get(f"/dogecoin?{query}")
    assert response.status_code == 400
    assert response.json()["code"] in ("invalid_limit", "invalid_cursor")


@pytest.mark.parametrize("since", ["%C2%B9", "%D9%A3", "-1", "1" * 16])
def test_audit_since_takes_ascii_digits_only(client: httpx.Client, since: str) -> None:
    response = client.get(f"/audit?since={since}")
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_since"
