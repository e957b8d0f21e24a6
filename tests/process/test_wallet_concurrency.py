"""Next-index derivation under concurrency: 50 calls at once over `serve --workers 2`
(two processes, one database) on both backends get 50 distinct indices, 0 to 49."""

from __future__ import annotations

import concurrent.futures
import os
from pathlib import Path

import httpx
import pytest
from tests.conftest import BACKENDS, TLS, chainkeys_cli, drop_pg_database, make_pg_database
from tests.process.test_process import start

pytestmark = [pytest.mark.slow, pytest.mark.long(55)]


@pytest.mark.parametrize("backend", BACKENDS)
def test_fifty_next_index_calls_at_once_get_fifty_indices(backend: str, tmp_path: Path) -> None:
    os.environ.pop("CHAINKEYS_DATABASE_URL", None)
    pg_url = make_pg_database() if backend == "postgresql" else None
    env = {"CHAINKEYS_DATA_DIR": str(tmp_path / "d")}
    if pg_url:
        env["CHAINKEYS_DATABASE_URL"] = pg_url
    proc = start(env, tmp_path / "s.log", "--workers", "2")
    try:
        made = chainkeys_cli("token", "create", "--tenant", "hd", "--scope", "read,create", env=env)
        token = made.stdout.strip().splitlines()[-1]
        headers = {"Authorization": token}
        wallet = httpx.post(
            f"{proc.base_url}/wallets", verify=TLS, json={"words": 12}, headers=headers
        ).json()["data"]["id"]

        def derive(_: int) -> tuple[int, str]:
            with httpx.Client(verify=TLS, base_url=proc.base_url, headers=headers, timeout=60) as c:
                r = c.post(f"/wallets/{wallet}/accounts", json={"family": "litecoin"})
                assert r.status_code == 200, r.text
                [acct] = r.json()["data"]["accounts"]
                return acct["index"], acct["address"]

        with concurrent.futures.ThreadPoolExecutor(25) as pool:
            got = list(pool.map(derive, range(50)))
        assert sorted(i for i, _ in got) == list(range(50))
        assert len({a for _, a in got}) == 50
        with httpx.Client(verify=TLS, base_url=proc.base_url, headers=headers) as c:
            listed = c.get("/litecoin", params={"limit": 100}).json()["data"]["keys"]
            assert sorted(listed) == sorted(a for _, a in got)
            logged = proc.stop()
            assert " 500 " not in logged
    finally:
        proc.stop()
        if pg_url:
            drop_pg_database(pg_url)


@pytest.mark.parametrize("backend", BACKENDS)
def test_ten_imports_of_one_phrase_at_once_make_one_wallet(backend: str, tmp_path: Path) -> None:
    """One wallet per phrase per tenant, held by a unique keyed fingerprint in the
    database: ten imports at once over two processes, one 200 and nine 409s naming it."""
    import threading

    os.environ.pop("CHAINKEYS_DATABASE_URL", None)
    pg_url = make_pg_database() if backend == "postgresql" else None
    env = {"CHAINKEYS_DATA_DIR": str(tmp_path / "d")}
    if pg_url:
        env["CHAINKEYS_DATABASE_URL"] = pg_url
    proc = start(env, tmp_path / "s.log", "--workers", "2")
    phrase = "legal winner thank year wave sausage worth useful legal winner thank yellow"
    try:
        made = chainkeys_cli("token", "create", "--tenant", "hd", "--scope", "read,create", env=env)
        headers = {"Authorization": made.stdout.strip().splitlines()[-1]}
        gate = threading.Barrier(10)

        def importing(_: int) -> httpx.Response:
            with httpx.Client(verify=TLS, base_url=proc.base_url, headers=headers, timeout=60) as c:
                gate.wait()
                return c.post("/wallets", json={"mnemonic": phrase})

        with concurrent.futures.ThreadPoolExecutor(10) as pool:
            answers = list(pool.map(importing, range(10)))
        codes = sorted(r.status_code for r in answers)
        assert codes == [200] + [409] * 9, [r.text for r in answers]
        wallet = next(r for r in answers if r.status_code == 200).json()["data"]["id"]
        assert all(wallet in r.json()["message"] for r in answers if r.status_code == 409)
        listed = httpx.get(f"{proc.base_url}/wallets", verify=TLS, headers=headers).json()["data"]
        assert [w["id"] for w in listed["wallets"]] == [wallet]
        stored = b"".join(p.read_bytes() for p in (tmp_path / "d").rglob("*") if p.is_file())
        assert phrase.encode() not in stored
        import hashlib

        assert hashlib.sha256(phrase.encode()).hexdigest().encode() not in stored
    finally:
        proc.stop()
        if pg_url:
            drop_pg_database(pg_url)
