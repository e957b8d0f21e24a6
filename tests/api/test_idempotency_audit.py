"""Idempotency-Key on creates, and the audit log (GET /audit), over real HTTP."""

from __future__ import annotations

import concurrent.futures
import json
import subprocess
import sys
import uuid
from typing import Any

import httpx
import pytest
from tests.api.tenants import Tenant
from tests.conftest import TLS

KEY_HEX = "0c28fca386c7a227600b2fe50b7cae11ec86d3bf1fbe471be89827e19d72aa1d"


def idem() -> dict[str, str]:
    return {"Idempotency-Key": uuid.uuid4().hex}


@pytest.mark.parametrize("family", ["cosmos", "dogecoin", "eos", "litecoin"])
def test_same_key_same_body_replays_the_first_response(client: httpx.Client, family: str) -> None:
    headers = idem()
    first = client.post(f"/{family}", json={}, headers=headers)
    assert first.status_code == 200
    assert "idempotent-replayed" not in first.headers
    second = client.post(f"/{family}", json={}, headers=headers)
    assert second.status_code == 200
    assert second.headers["idempotent-replayed"] == "true"
    assert second.json() == first.json()  # the one-time private key too
    assert "private_key" in json.dumps(second.json())
    listed = client.get(f"/{family}").json()
    keys = listed["data"]["data"]["keys"]
    assert len(keys) == 1  # acted once


def test_same_key_other_body_is_409(client: httpx.Client) -> None:
    headers = idem()
    assert client.post("/dogecoin", json={}, headers=headers).status_code == 200
    other = client.post("/dogecoin", json={"network": "testnet"}, headers=headers)
    assert other.status_code == 409
    assert other.json()["code"] == "idempotency_key_reused"
    # the same key on another family is another request too
    assert client.post("/litecoin", json={}, headers=headers).status_code == 409


def test_json_spelling_does_not_matter(client: httpx.Client) -> None:
    headers = {**idem(), "content-type": "application/json"}
    a = client.post(
        "/cosmos",
        content=b'{"network":"osmosis","private_key":"%s"}' % KEY_HEX.encode(),
        headers=headers,
    )
    b = client.post(
        "/cosmos",
        content=b'{ "private_key" : "%s", "network": "osmosis" }' % KEY_HEX.encode(),
        headers=headers,
    )
    assert a.status_code == b.status_code == 200
    assert b.headers["idempotent-replayed"] == "true"


def test_keys_are_per_tenant(server: Any) -> None:
    headers = idem()
    with server.client(server.new_token()) as a, server.client(server.new_token()) as b:
        ra = a.post("/eos", json={}, headers=headers).json()
        rb = b.post("/eos", json={}, headers=headers).json()
        assert ra["address"] != rb["address"]


def test_failed_request_is_not_remembered(client: httpx.Client) -> None:
    headers = idem()
    assert client.post("/dogecoin", json={"network": "nope"}, headers=headers).status_code == 400
    assert client.post("/dogecoin", json={}, headers=headers).status_code == 200


@pytest.mark.parametrize("bad", [b"", b"x" * 256, b"has space", "ключ".encode()])
def test_bad_idempotency_key_is_400(client: httpx.Client, bad: bytes) -> None:
    r = client.post("/cosmos", json={}, headers={b"Idempotency-Key": bad})
    assert r.status_code == 400
    assert r.json()["code"] == "invalid_idempotency_key"


def test_concurrent_repeats_act_once(server: Any) -> None:
    token = server.new_token()
    headers = {**idem(), "Authorization": token}

    def post(_: int) -> dict[str, Any]:
        r = httpx.post(
            f"{server.base_url}/cosmos", verify=TLS, json={}, headers=headers, timeout=30
        )
        assert r.status_code == 200, r.text
        return dict(r.json())

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        bodies = list(pool.map(post, range(16)))
    assert all(b == bodies[0] for b in bodies)
    with server.client(token) as c:
        assert len(c.get("/cosmos").json()["data"]["data"]["keys"]) == 1


# ---- audit ------------------------------------------------------------------------------------


def events(client: httpx.Client, **params: Any) -> list[dict[str, Any]]:
    """The caller's events, oldest first (the API lists them newest first)."""
    r = client.get("/audit", params=params)
    assert r.status_code == 200, r.text
    return list(reversed(r.json()["data"]["events"]))


def test_audit_records_creates_imports_deletes_and_failures(client: httpx.Client) -> None:
    response = client.post("/cosmos", json={}, headers={"X-Request-ID": "req-create-1"})
    made = response.json()
    address = made["data"]["data"]["address"]
    private_key = made["data"]["data"]["private_key"]
    client.post("/dogecoin", json={"private_key": KEY_HEX})
    client.post("/dogecoin", json={"private_key": KEY_HEX})  # 409
    client.delete(f"/cosmos/{address}")
    got = events(client)
    summary = [(e["action"], e["outcome"], e.get("family")) for e in got]
    assert summary[0] == ("token.create", "ok", None)
    assert summary[1:] == [
        ("create", "ok", "cosmos"),
        ("import", "ok", "dogecoin"),
        ("import", "account_exists", "dogecoin"),
        ("delete", "ok", "cosmos"),
    ]
    # the server's own request id, never the client's (which could copy another's)
    assert got[1]["request_id"] == response.headers["x-request-id"] != "req-create-1"
    assert got[1]["account_name"] == address
    text = json.dumps(got)
    assert private_key not in text and KEY_HEX not in text


def test_audit_is_scoped_and_paginated(server: Any) -> None:
    with server.client(server.new_token()) as a, server.client(server.new_token()) as b:
        for _ in range(3):
            a.post("/eos", json={})
        b.post("/eos", json={})
        assert len(events(b)) == 2  # its token and its one create; none of a's
        first = a.get("/audit", params={"limit": 2}).json()["data"]
        assert len(first["events"]) == 2
        rest = a.get("/audit", params={"limit": 2, "cursor": first["next_cursor"]}).json()["data"]
        ids = [e["id"] for e in first["events"] + rest["events"]]
        assert len(ids) == 4 == len(set(ids))
        assert "next_cursor" not in rest
        latest = max(e["time_ms"] for e in first["events"] + rest["events"])
        assert events(a, since=latest + 1) == []


def test_audit_needs_a_token(server: Any) -> None:
    assert httpx.get(f"{server.base_url}/audit", verify=TLS).status_code == 401


def test_idempotency_keys_are_stored_hashed(server: Any, client: httpx.Client) -> None:
    marker = f"marker-{uuid.uuid4().hex}"
    assert client.post("/cosmos", json={}, headers={"Idempotency-Key": marker}).status_code == 200
    if server.backend == "postgresql":  # every row of the database, as pg_dump writes them
        url = server.settings.database_url.get_secret_value().replace("+asyncpg", "")
        dump = subprocess.run(
            ["pg_dump", "--data-only", url], capture_output=True, text=True, check=True
        ).stdout
        assert "idempotency" in dump and marker not in dump
        return
    # Read in another process: closing a file descriptor of the database in this one
    # (where the test server runs) would drop the server's POSIX locks on it, and the
    # next process to open it would find a "disk I/O error".
    code = (
        "import pathlib, sys; d = pathlib.Path(sys.argv[1]); "
        "print(any(sys.argv[2].encode() in p.read_bytes() for p in d.glob('chainkeys.db*')))"
    )
    found = subprocess.run(
        [sys.executable, "-c", code, str(server.settings.data_dir), marker],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert found == "False"


def test_a_refusal_of_a_name_longer_than_its_column_is_audited(tenant: Tenant) -> None:
    """PostgreSQL enforces the audit columns' lengths (SQLite does not): a sign request
    with a 150-character name was refused without its audit row (a fuzzer's find). Now
    the row is written, the name cut to the column's 100 characters."""
    name = "cosmos1" + "q" * 143
    r = tenant.client.post(f"/cosmos/{name}/sign-message", json={"message": "aGk="})
    assert r.status_code == 400 and r.json()["code"] == "invalid_account_name", r.text
    event = tenant.sign_events()[-1]
    assert event["outcome"] == "invalid_account_name"
    assert event["account_name"] == name[:100]
