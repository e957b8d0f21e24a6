"""The edges of every route: text no engine stores, deep nesting, input quoted back,
static pages' headers. Through real HTTP on both engines."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.conftest import TLS, Server

from chainkeys.api.app import api_routes
from chainkeys.api.routes.common import ops_of
from chainkeys.config import Settings

# What no engine stores as text: PostgreSQL refuses NUL; lone surrogates are no UTF-8.
NUL, SURROGATE = "\u0000", "\ud800"


def concrete(path: str, value: str) -> str:
    """A route's path with every parameter set to `value`."""
    out = path
    for name in ("accountName", "wallet", "id"):
        out = out.replace("{" + name + "}", value)
    return out


def every_route() -> list[tuple[str, str]]:
    return [
        (m, r.path)
        for r in api_routes(Settings())
        for m in ops_of(r)
        if m in ("GET", "POST", "DELETE")
    ]


@pytest.fixture
def everything(server: Server) -> Iterator[httpx.Client]:
    """A token of every scope (export and approve included) of a fresh tenant."""
    from chainkeys.tokens.service import SCOPES

    assert server.services is not None
    _, token = server.call(
        server.services.tokens.create(
            f"edge-{uuid.uuid4().hex[:8]}", "edge", frozenset(SCOPES), group="g"
        )
    )
    with server.client(token) as c:
        yield c


@pytest.mark.parametrize(("method", "path"), every_route())
def test_a_nul_in_a_path_or_query_is_a_400_on_every_route(
    everything: httpx.Client, method: str, path: str
) -> None:
    """Never a 503 "storage unavailable" for a NUL (PostgreSQL refuses to store one):
    the API boundary refuses it first, saying so, without quoting it."""
    for url in (
        concrete(path, "%00"),
        f"{concrete(path, 'x')}?action=%00&family=%00&state=%00",
        concrete(path, "%ED%A0%80"),
    ):
        if "{" not in path and "?" not in url:
            continue
        r = everything.request(method, url)
        if "%ED" in url:  # no UTF-8: the server's decoding keeps it storable (then a 404)
            assert r.status_code in (400, 403, 404), (method, url, r.text)
            continue
        assert r.status_code == 400 and r.json()["code"] == "invalid_text", (method, url, r.text)
        assert NUL not in r.text and "\\u0000" not in r.text


@pytest.mark.parametrize("bad", [NUL, SURROGATE])
def test_text_no_engine_stores_in_a_body_is_a_400_and_changes_nothing(
    everything: httpx.Client, bad: str
) -> None:
    bodies: list[tuple[str, dict[str, Any]]] = [
        ("/wallets", {"name": f"w{bad}"}),
        ("/eos", {"name": f"abc{bad}"}),
        ("/cosmos", {"network": f"cosmoshub{bad}"}),
        ("/approvals/apr_x/reject", {"reason": f"no{bad}"}),
    ]
    for path, body in bodies:
        raw = json.dumps(body).encode()  # \\u escapes: valid JSON text for any string
        r = everything.post(path, content=raw, headers={"Content-Type": "application/json"})
        assert r.status_code == 400, (path, r.text)
        assert r.json()["code"] in ("invalid_text", "invalid_json"), r.text
        assert bad not in r.text
    assert everything.get("/wallets").json()["data"]["wallets"] == []


def test_deep_nesting_is_a_400_before_any_decoder(everything: httpx.Client) -> None:
    made = everything.post("/cosmos", json={}).json()["data"]["data"]["address"]
    deep = "[" * 5000 + "]" * 5000
    for path in ("/cosmos", f"/cosmos/{made}/sign-amino", "/wallets", "/approvals/a/reject"):
        r = everything.post(
            path, content=f'{{"x": {deep}}}'.encode(), headers={"Content-Type": "application/json"}
        )
        assert r.status_code == 400 and r.json()["code"] == "invalid_json", (path, r.text)
    memo = "[" * 1000 + "]" * 1000  # a memo that is deep JSON text (a string here)
    doc = {
        "chain_id": "cosmoshub-4",
        "account_number": "1",
        "sequence": "0",
        "fee": {"amount": [], "gas": "200000"},
        "msgs": [],
        "memo": memo,
    }
    r = everything.post(f"/cosmos/{made}/sign-amino", json={"signDoc": doc})
    assert r.status_code < 500, r.text
    events = everything.get("/audit", params={"action": "sign"}).json()["data"]["events"]
    assert events, "the refusal (or signature) is audited"


def test_errors_never_quote_the_callers_input(everything: httpx.Client) -> None:
    marker = "QUOTEDINPUTMARKER" * 40
    checks = [
        everything.post("/wallets", json={"name": marker}),
        everything.post("/wallets", json={"words": 13, "name": marker}),
        everything.post("/wallets/nope/accounts", json={"family": marker}),
        everything.get("/wallets/nope/xpub", params={"family": marker}),
        everything.get("/wallets/nope/xpub", params={"family": "litecoin", "format": marker}),
        everything.get("/audit", params={"family": marker}),
        everything.get("/approvals", params={"state": marker}),
        everything.post("/cosmos", json={"network": marker}),
    ]
    for r in checks:
        assert r.status_code in (400, 404), r.text
        assert "QUOTEDINPUT" not in r.text, r.text


@pytest.mark.parametrize(
    "path",
    [
        "/docs",
        "/docs/init.js",
        "/docs/static/swagger-ui.css",
        "/docs/static/swagger-ui-bundle.js",
        "/ui/approvals",
    ],
)
def test_every_static_page_has_the_csp_and_no_framing(server: Server, path: str) -> None:
    r = httpx.get(server.base_url + path, verify=TLS)
    assert r.status_code == 200, path
    assert "frame-ancestors 'none'" in r.headers["content-security-policy"]
    assert r.headers.get("x-frame-options") == "DENY"


@pytest.mark.parametrize("path", ["/docs/static/index.html", "/docs/static/oauth2-redirect.html"])
def test_assets_the_docs_page_does_not_use_are_not_served(server: Server, path: str) -> None:
    assert httpx.get(server.base_url + path, verify=TLS).status_code == 404


POSTS = [path for method, path in every_route() if method == "POST"]


@settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    st.sampled_from(POSTS),
    st.integers(min_value=33, max_value=20_000),
    st.sampled_from(["[", '{"a":']),
)
def test_any_deep_nesting_on_any_route_is_a_400(
    everything: httpx.Client, path: str, depth: int, opener: str
) -> None:
    closer = "]" if opener == "[" else "}"
    body = (opener * depth + "1" + closer * depth).encode()
    r = everything.post(
        concrete(path, "x"), content=body, headers={"Content-Type": "application/json"}
    )
    assert 400 <= r.status_code < 500, (path, depth, r.text)  # refused, never a 5xx


def test_a_trailing_newline_is_outside_every_pattern(client: httpx.Client) -> None:
    """Python's `$` matches before a final newline, JSON Schema's does not: the patterns
    the document states are the ones checked (found by the fuzz run: `outcome=%0A` was a
    200 on GET /audit)."""
    made = client.post("/eos", json={"name": "newline1"})
    assert made.status_code == 200, made.text
    for path in (
        "/audit?outcome=ok%0A",
        "/audit?action=sign%0A",
        "/cosmos?prefix=cosmos%0A",
        "/eos?cursor=%0A",
        "/wallets/main%0A",
    ):
        r = client.get(path)
        assert r.status_code == 400, (path, r.text)
    assert client.post("/eos", json={"name": "newline2\n"}).status_code == 400
    r = client.post(
        "/eos/newline1/sign-transaction",
        json={"chainId": "aa" * 32 + "\n", "serializedTransaction": "00"},
    )
    assert (r.status_code, r.json()["code"]) == (400, "invalid_field"), r.text
    assert "newline2" not in client.get("/eos").text  # nothing was made of it
