"""Regression tests for the storage-side defects of the attack (issue 12): replays
after delete, guessable fingerprints, file modes, cursors."""

from __future__ import annotations

import base64
import hashlib
import os
import sqlite3
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest
from tests.conftest import BACKENDS, Server, backend_settings, own_server

from chainkeys.accounts.models import CreateRequest

MNEMONIC = "abandon " * 11 + "about"


@pytest.fixture(params=BACKENDS)
def erasing_server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Server]:
    """A server with CHAINKEYS_DELETED_RETENTION_DAYS=0 (deletes erase at once)."""
    with own_server(request.param, tmp_path, deleted_retention_days=0) as srv:
        yield srv


@pytest.mark.parametrize("retained", [True, False], ids=["retained", "erased"])
def test_deleting_an_account_ends_its_idempotent_replay(
    server: Server, erasing_server: Server, retained: bool
) -> None:
    srv = server if retained else erasing_server
    with srv.client(srv.new_token()) as c:
        key = {"Idempotency-Key": "pay-1"}
        first = c.post("/cosmos", json={}, headers=key).json()["data"]["data"]
        again = c.post("/cosmos", json={}, headers=key)
        assert again.headers.get("idempotent-replayed") == "true"  # replays while it lives
        assert c.delete(f"/cosmos/{first['address']}").status_code == 200
        after = c.post("/cosmos", json={}, headers=key)
        assert after.status_code == 200
        assert "idempotent-replayed" not in after.headers
        fresh = after.json()["data"]["data"]
        assert fresh["private_key"] != first["private_key"]  # the deleted key never comes back
        assert fresh["address"] != first["address"]


def test_the_idempotency_fingerprint_cannot_confirm_a_guess(tmp_path: Path) -> None:
    """A database thief cannot test guesses of a mnemonic or passphrase against what is
    stored: the request's fingerprint is sealed with the response."""
    settings, _ = backend_settings("sqlite", tmp_path)
    srv = Server(settings, "sqlite")
    srv.start()
    try:
        body = {"mnemonic": MNEMONIC, "passphrase": "hunter2"}
        with srv.client(srv.new_token()) as c:
            assert (
                c.post("/cosmos", json=body, headers={"Idempotency-Key": "k1"}).status_code == 200
            )
    finally:
        srv.stop()
    req = CreateRequest(mnemonic=MNEMONIC, passphrase="hunter2")
    guess = hashlib.sha256(b"cosmos\x00" + msgspec.json.encode(req)).hexdigest()
    raw = settings.sqlite_path.read_bytes()
    with sqlite3.connect(settings.sqlite_path) as db:
        stored = [r[0] for r in db.execute("SELECT fingerprint FROM idempotency")]
    assert stored == ["sealed"]
    assert guess.encode() not in raw and b"hunter2" not in raw


@pytest.mark.parametrize("umask", [0o022, 0o000])
def test_database_files_are_private_whatever_the_umask(tmp_path: Path, umask: int) -> None:
    data = tmp_path / "data"
    data.mkdir(mode=0o755)
    data.chmod(0o755)
    old = os.umask(umask)
    try:
        settings, _ = backend_settings("sqlite", data)
        srv = Server(settings, "sqlite")
        srv.start()
        try:
            with srv.client(srv.new_token()) as c:
                assert c.post("/dogecoin", json={}).status_code == 200
            files = [data / "chainkeys.db", data / "chainkeys.db-wal", data / "chainkeys.db-shm"]
            modes = {f.name: stat.S_IMODE(f.stat().st_mode) for f in files if f.exists()}
        finally:
            srv.stop()
    finally:
        os.umask(old)
    assert "chainkeys.db" in modes and "chainkeys.db-wal" in modes
    assert set(modes.values()) == {0o600}, modes


@pytest.mark.parametrize(
    "cursor",
    [
        base64.urlsafe_b64encode(b"ck1:8").decode().rstrip("="),  # the old, readable form
        base64.urlsafe_b64encode(b"ck1:" + str(2**63).encode()).decode().rstrip("="),
        base64.urlsafe_b64encode((2**64 - 1).to_bytes(8, "big") * 2).decode().rstrip("="),
        "AAAAAAAAAAAAAAAAAAAAAA",
        "!!!",
    ],
)
def test_cursors_that_this_service_did_not_make_are_400(client: httpx.Client, cursor: str) -> None:
    for path in ("/cosmos", "/audit"):
        r = client.get(path, params={"cursor": cursor})
        assert r.status_code == 400, (path, r.text)
        assert r.json()["code"] == "invalid_cursor"


def test_cursors_are_opaque_and_belong_to_their_tenant_and_list(server: Server) -> None:
    with server.client(server.new_token()) as a, server.client(server.new_token()) as b:
        for _ in range(3):
            a.post("/eos", json={})
        page = a.get("/eos", params={"limit": 2}).json()["data"]
        cursor = page["next_cursor"]
        assert b"ck1" not in base64.urlsafe_b64decode(cursor + "==")
        assert len(a.get("/eos", params={"cursor": cursor}).json()["data"]["keys"]) == 1
        assert b.get("/eos", params={"cursor": cursor}).status_code == 400  # another tenant
        assert a.get("/dogecoin", params={"cursor": cursor}).status_code == 400  # another list


def test_not_found_does_not_echo_the_name(client: httpx.Client) -> Any:
    name = "DFpN6QqFfUm3gKNaxN6tNcab1FArL9cZLE"
    r = client.get(f"/dogecoin/{name}")
    assert r.status_code == 404 and name not in r.text
