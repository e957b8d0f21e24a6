"""Every route against every kind of token, generated from the router's own table.

Each authenticated route declares its scope (one, or several any one of which will do:
`"approve|admin"`) and its family rule (`routes/common.py` `Op`). This test reads the
table, not a list of its own: for every route and method, a token of each single scope
and a token limited to one family (every scope) are tried, and the answer must be what
the declaration implies: 403 naming what is missing, or anything else but 401, 403 and
5xx. A route added to the table
is covered by the next run, and one added without a family rule does not build.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import Server

from chainkeys.api.app import api_routes
from chainkeys.api.auth import AUTHENTICATED, BY_REQUEST, EITHER, EVERY, NONE
from chainkeys.api.routes.common import Op, ops_of
from chainkeys.chains.registry import FAMILIES
from chainkeys.config import Settings
from chainkeys.tokens.service import SCOPES

pytestmark = pytest.mark.long(10)  # seconds (busy run): scheduled first

LIMITED_TO = "cosmos"
OTHER = "litecoin"


def table() -> list[tuple[str, str, str | None, str]]:
    """(method, path, scope, family rule) of every route that needs a token."""
    return [
        (method, route.path, op.scope, op.family)
        for route in api_routes(Settings())
        for method, op in ops_of(route).items()
        if op.scope is not None
    ]


def test_every_route_declares_its_family_rule() -> None:
    for method, path, _, family in table():
        assert family in (*FAMILIES, EVERY, BY_REQUEST, NONE), (method, path)
        first = path.strip("/").split("/")[0]
        if first in FAMILIES:  # a family's own paths name it as their rule
            assert family == first, (method, path, family)
        if first == "wallets" and method != "GET":
            assert family in (EVERY, BY_REQUEST), (method, path, family)


def test_a_scope_declared_wrongly_does_not_build() -> None:
    """A misspelt word, a repeated one, or `authenticated` beside a scope is a route
    that does not build, never one nobody (or anybody) may call."""

    async def handler(*_: Any) -> Any:
        raise AssertionError("never called")

    for scope in ("approve|admn", "approve|", "admin|admin", f"{AUTHENTICATED}|admin", ""):
        with pytest.raises(ValueError, match="unknown scope"):
            Op(handler, scope, NONE)
    assert Op(handler, "approve|admin", NONE).scope == "approve|admin"


def test_a_route_of_either_scope_is_in_the_table() -> None:
    """The matrix below covers a route of two scopes: POST /freezes is one."""
    either = {(m, p) for m, p, scope, _ in table() if scope and len(accepted(scope)) > 1}
    assert ("POST", "/freezes") in either


def request_for(method: str, path: str) -> tuple[str, dict[str, Any] | None]:
    """A concrete request for a route: placeholders filled, and where the family is in the
    request (BY_REQUEST), naming a family the limited token may not use."""
    url = path.replace("{accountName}", "x").replace("{wallet}", "w").replace("{id}", "apr_x")
    if path == "/wallets/{wallet}/accounts":
        return url, {"family": OTHER}
    if path == "/wallets/{wallet}/xpub":
        return f"{url}?family={OTHER}", None
    return url, {} if method == "POST" else None


FAMILY_IN_REQUEST = {"/wallets/{wallet}/accounts", "/wallets/{wallet}/xpub"}


def accepted(scope: str) -> set[str]:
    """The token scopes any one of which a declared scope lets through (read here from
    the declaration's words, not with the guard's own helper)."""
    return set(scope.split(EITHER))


def expected_refusal(
    scope: str | None, family: str, path: str, token_scopes: set[str], limited: bool
) -> bool:
    """Whether the declaration says this token is refused (403)."""
    if scope is not None and scope != AUTHENTICATED and not accepted(scope) & token_scopes:
        return True
    if not limited:
        return False
    if family == EVERY:
        return True
    if family in FAMILIES:
        return family != LIMITED_TO
    return family == BY_REQUEST and path in FAMILY_IN_REQUEST


def test_every_route_with_every_kind_of_token(export_server: Server) -> None:
    assert export_server.services is not None
    tenant = f"matrix-{uuid.uuid4().hex[:8]}"
    tokens: dict[str, tuple[set[str], bool]] = {}
    for only in SCOPES:
        _, token = export_server.call(
            export_server.services.tokens.create(
                tenant, f"only-{only}", frozenset({only}), group="g" if only == "approve" else None
            )
        )
        tokens[token] = ({only}, False)
    _, narrow = export_server.call(
        export_server.services.tokens.create(
            tenant, "limited", frozenset(SCOPES), families=frozenset({LIMITED_TO}), group="g"
        )
    )
    tokens[narrow] = (set(SCOPES), True)
    seen = 0
    for method, path, scope, family in table():
        url, body = request_for(method, path)
        for token, (scopes, is_limited) in tokens.items():
            with export_server.client(token) as c:
                r = c.request(method, url, json=body)
            case = (method, path, sorted(scopes), is_limited, r.status_code, r.text[:200])
            assert r.status_code < 500 and r.status_code != 401, case
            if expected_refusal(scope, family, path, scopes, is_limited):
                assert r.status_code == 403 and r.json()["code"] == "forbidden", case
                if scope is not None and not accepted(scope) & scopes:  # names each
                    assert all(f"'{w}'" in r.json()["message"] for w in accepted(scope)), case
            else:
                assert r.status_code != 403 or r.json()["code"] != "forbidden", case
            seen += 1
    assert seen == len(table()) * len(tokens)


def test_wallet_wide_operations_need_a_token_for_every_family(
    export_server: Server, tmp_path: Path
) -> None:
    """The attack: a token limited to cosmos exported the phrase of a wallet whose
    accounts include Litecoin keys, created wallets and deleted one backing them."""
    assert export_server.services is not None
    tenant = f"w-{uuid.uuid4().hex[:8]}"
    _, full = export_server.call(
        export_server.services.tokens.create(tenant, "ops", frozenset(SCOPES) - {"approve"})
    )
    _, narrow = export_server.call(
        export_server.services.tokens.create(
            tenant,
            "cosmos",
            frozenset({"read", "create", "delete", "export"}),
            families=frozenset({"cosmos"}),
        )
    )
    with export_server.client(full) as ops, export_server.client(narrow) as c:
        wallet = ops.post("/wallets", json={}).json()["data"]["id"]
        ltc = ops.post(f"/wallets/{wallet}/accounts", json={"family": "litecoin"}).json()
        address = ltc["data"]["accounts"][0]["address"]
        for r in (
            c.post(f"/wallets/{wallet}/export"),
            c.post("/wallets", json={}),
            c.delete(f"/wallets/{wallet}"),
            c.post(f"/wallets/{wallet}/accounts", json={"family": "litecoin"}),
        ):
            assert r.status_code == 403, r.text
            assert "mnemonic" not in r.text
        assert c.post(f"/wallets/{wallet}/accounts", json={"family": "cosmos"}).status_code == 200
        # one derived key exported is the wallet's export (BIP32: with the xpub, every key)
        cosmos = c.post(f"/wallets/{wallet}/accounts", json={"family": "cosmos"}).json()
        name = cosmos["data"]["accounts"][0]["address"]
        assert c.post(f"/cosmos/{name}/export").status_code == 403
        assert ops.get(f"/wallets/{wallet}").json()["data"]["exported"] is False
        assert ops.post(f"/litecoin/{address}/export").status_code == 200
        assert ops.get(f"/wallets/{wallet}").json()["data"]["exported"] is True
        events = ops.get("/audit", params={"action": "wallet.export"}).json()["data"]["events"]
        assert [e["account_name"] for e in events] == [wallet]
