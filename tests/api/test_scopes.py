"""Scoped tokens (issue 14): every endpoint with a token of each single scope, expiry,
family restriction, export on and off, delete and restore on every family."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.conftest import Server

from chainkeys import clock
from chainkeys.tokens.service import SCOPES

FAMILIES = ("cosmos", "dogecoin", "eos", "litecoin")
KEY_HEX = "0c28fca386c7a227600b2fe50b7cae11ec86d3bf1fbe471be89827e19d72aa1d"


def token(srv: Server, tenant: str, scopes: str | None = None, **kw: Any) -> str:
    from chainkeys.tokens.service import parse_families, parse_scopes

    assert srv.services is not None
    families = parse_families(kw.pop("families", None))
    coro = srv.services.tokens.create(tenant, "test", parse_scopes(scopes), families=families, **kw)
    return srv.call(coro)[1]


def name_of(family: str, body: dict[str, Any]) -> str:
    data = body["data"]
    return str(data["data"]["address"] if family == "cosmos" else data["address"])


def names(c: httpx.Client, family: str) -> list[str]:
    data = c.get(f"/{family}").json()["data"]
    if family == "cosmos":
        return [k["address"] for k in data["data"]["keys"]]
    return list(data["keys"])


CALLS = {
    # what: (scope it needs, method, path template, body)
    "list": ("read", "GET", "/{family}", None),
    "get": ("read", "GET", "/{family}/{name}", None),
    "audit": ("read", "GET", "/audit", None),
    "create": ("create", "POST", "/{family}", {}),
    "import": ("create", "POST", "/{family}", {"private_key": KEY_HEX}),
    "delete": ("delete", "DELETE", "/{family}/{name}", None),
    "delete-moon": ("delete", "POST", "/{family}/{name}/delete", None),
    "export": ("export", "POST", "/{family}/{name}/export", None),
    "sign": ("sign", "POST", "/{family}/{name}/sign-message", {"message": "scoped"}),
}


@pytest.mark.parametrize(
    "scope", [s for s in SCOPES if s != "approve"]
)  # approve: test_approvals.py
@pytest.mark.parametrize("family", FAMILIES)
def test_each_single_scope_allows_only_its_calls(
    export_server: Server, scope: str, family: str
) -> None:
    tenant = f"s-{scope}-{family}-{time.monotonic_ns()}"
    admin = token(export_server, tenant, "read,create,delete,sign,export")
    single = token(export_server, tenant, scope)
    with export_server.client(admin) as a, export_server.client(single) as c:
        for what, (needs, method, path, body) in CALLS.items():
            made = name_of(family, a.post(f"/{family}", json={}).json())
            before = sorted(names(a, family))
            r = c.request(method, path.format(family=family, name=made), json=body)
            if needs == scope:
                assert r.status_code == 200, (what, r.text)
            else:
                assert r.status_code == 403, (what, r.text)
                assert r.json()["code"] == "forbidden"
                assert f"'{needs}' scope" in r.json()["message"]
                assert sorted(names(a, family)) == before  # nothing changed
            if what == "import" and r.status_code == 200:
                a.delete(f"/{family}/{name_of(family, r.json())}")
        denied = [
            e
            for e in a.get("/audit?limit=1000").json()["data"]["events"]
            if e["action"] == "denied"
        ]
        assert len(denied) == sum(1 for needs, *_ in CALLS.values() if needs != scope)


def test_export_needs_both_the_server_switch_and_the_scope(server: Server) -> None:
    """On a server without CHAINKEYS_EXPORT_ENABLED, even an export token is refused."""
    tenant = f"x-{time.monotonic_ns()}"
    with server.client(token(server, tenant, "create,export")) as c:
        made = name_of("dogecoin", c.post("/dogecoin", json={}).json())
        r = c.post(f"/dogecoin/{made}/export")
    assert r.status_code == 403
    assert "CHAINKEYS_EXPORT_ENABLED" in r.json()["message"]
    assert "'export' scope" not in r.json()["message"]
    with server.client(token(server, tenant, "create")) as c:
        r = c.post(f"/dogecoin/{made}/export")
    assert "CHAINKEYS_EXPORT_ENABLED" in r.json()["message"]
    assert "'export' scope" in r.json()["message"]


IMPORTS = [
    ("cosmos", {"private_key": KEY_HEX}),
    ("cosmos", {"mnemonic": "abandon " * 11 + "about"}),
    ("dogecoin", {"private_key": KEY_HEX}),
    # an uncompressed-key wallet keeps its uncompressed WIF and address
    ("dogecoin", {"private_key": "6J8csdv3eDrnJcpSEb4shfjMh2JTiG9MKzC1Yfge4Y4GyUsjdM6"}),
    (
        "dogecoin",
        {
            "private_key": "95UQWtAhNXzaVi3yUhaosHVdhVR4fi62e34wo6n3ZvcTw67if2k",
            "network": "testnet",
        },
    ),
    ("litecoin", {"private_key": KEY_HEX, "address_type": "p2sh-p2wpkh"}),
    ("litecoin", {"mnemonic": "abandon " * 11 + "about", "address_type": "p2pkh"}),
    ("eos", {"private_key": KEY_HEX}),
    ("eos", {"private_key": KEY_HEX, "network": "jungle4"}),
]


@pytest.mark.parametrize(("family", "body"), IMPORTS)
def test_an_export_reimports_to_the_same_address(
    export_server: Server, family: str, body: dict[str, Any]
) -> None:
    first = token(export_server, f"a-{time.monotonic_ns()}", "read,create,export")
    fresh = token(export_server, f"b-{time.monotonic_ns()}", "read,create")
    with export_server.client(first) as a, export_server.client(fresh) as b:
        made = a.post(f"/{family}", json=body)
        assert made.status_code == 200, made.text
        name = name_of(family, made.json())
        r = a.post(f"/{family}/{name}/export")
        assert r.status_code == 200
        assert r.headers["cache-control"] == "no-store"
        inner = r.json()["data"]["data"] if family == "cosmos" else r.json()["data"]
        if "mnemonic" in body:
            assert inner["path"].startswith("m/")
        again = {"private_key": inner["private_key"]}
        for option in ("network", "address_type"):
            if option in body:
                again[option] = body[option]
        reimported = b.post(f"/{family}", json=again)
        assert reimported.status_code == 200, reimported.text
        assert name_of(family, reimported.json()) == name
        if family == "eos":
            assert inner["private_key_k1"].startswith("PVT_K1_")
            k1 = b.post(
                f"/{family}",
                json={**again, "private_key": inner["private_key_k1"], "name": "k1reimport12"},
            )
            assert k1.status_code == 200 and k1.json()["data"]["public_key"] == inner["public_key"]
        if body.get("private_key", "").startswith(("6", "9")):
            assert inner["private_key"] == body["private_key"]  # still the uncompressed WIF


def test_an_expired_token_is_401(server: Server) -> None:
    """Time moved through the clock seam (the server runs in this process)."""
    short = token(server, f"e-{time.monotonic_ns()}", None, expires_in_ms=60_000)
    with server.client(short) as c:
        assert c.get("/cosmos").status_code == 200  # cached from here on
        with clock.shift(59_000):
            assert c.get("/cosmos").status_code == 200  # not yet
        with clock.shift(60_000):
            r = c.get("/cosmos")
    assert r.status_code == 401 and r.json()["code"] == "unauthorized"


def test_a_token_limited_to_families(server: Server) -> None:
    with server.client(token(server, f"f-{time.monotonic_ns()}", families="cosmos,eos")) as c:
        assert c.post("/cosmos", json={}).status_code == 200
        assert c.get("/eos").status_code == 200
        r = c.post("/dogecoin", json={})
        assert r.status_code == 403 and "dogecoin" in r.json()["message"]
        assert c.get("/litecoin").status_code == 403


@pytest.mark.parametrize("family", FAMILIES)
def test_delete_and_restore_on_every_family(server: Server, tmp_path: Path, family: str) -> None:
    tenant = f"d-{family}-{time.monotonic_ns()}"
    with server.client(token(server, tenant)) as c:
        name = name_of(family, c.post(f"/{family}", json={}).json())
        assert c.delete(f"/{family}/{name}").status_code == 200
        assert c.get(f"/{family}/{name}").status_code == 404
        assert server.services is not None
        server.call(server.services.accounts.restore(tenant, family, name))
        assert c.get(f"/{family}/{name}").status_code == 200
        assert c.post(f"/{family}/{name}/delete").status_code == 200  # Moon's path
        assert c.get(f"/{family}/{name}").status_code == 404


def test_a_token_reads_its_own_description(server: Any) -> None:
    assert server.services is not None
    tenant = f"self-{uuid.uuid4().hex[:8]}"
    _, token = server.call(
        server.services.tokens.create(
            tenant, "payouts", frozenset({"sign"}), 3_600_000, frozenset({"dogecoin", "eos"})
        )
    )
    with server.client(token) as c:
        r = c.get("/tokens/self")
        assert r.status_code == 200, r.text
        data = r.json()["data"]
        assert data["tenant"] == tenant and data["label"] == "payouts"
        assert data["scopes"] == ["sign"] and data["families"] == ["dogecoin", "eos"]
        assert data["expires_ms"] > data["created_ms"]
        assert token not in r.text
    with server.client("ck_unknown") as c:
        assert c.get("/tokens/self").status_code == 401


def test_unknown_paths_name_the_families(client: Any) -> None:
    r = client.get("/bitcoin/abc")
    assert r.status_code == 404
    assert "cosmos, dogecoin, eos, litecoin" in r.json()["message"]
