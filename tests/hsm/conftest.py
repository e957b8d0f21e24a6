"""SoftHSM2 tokens for the HSM tests: a fresh token directory per test, the pkcs11
provider's settings for it, and helpers that start the service or read the store.

PKCS#11 libraries read their configuration once per process, so every use of the
token from a test runs in a subprocess. Without SoftHSM2 these tests skip with the
install command (CI sets CHAINKEYS_TEST_REQUIRE_SOFTHSM=1: they must run there).
"""

from __future__ import annotations

import base64
import contextlib
import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.api.test_sign_cosmos import PRIVATE, TRANSFER
from tests.conftest import TLS, chainkeys_cli, drop_pg_database, free_port, make_pg_database
from tests.process.test_process import first_token, start

MODULES = ("/usr/lib/softhsm/libsofthsm2.so", "/usr/lib/x86_64-linux-gnu/softhsm/libsofthsm2.so")
INSTALL = "apt-get install softhsm2"
PIN = "246810"


def softhsm_module() -> str:
    module = next((m for m in MODULES if Path(m).exists()), None)
    if module is None or shutil.which("softhsm2-util") is None:
        why = f"SoftHSM2 is not installed; install it with: {INSTALL}"
        if os.environ.get("CHAINKEYS_TEST_REQUIRE_SOFTHSM"):
            pytest.fail(why)
        pytest.skip(why)
    return module


@dataclass
class Hsm:
    env: dict[str, str]  # the pkcs11 provider's settings, and SOFTHSM2_CONF
    tmp: Path

    def cli(self, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
        return chainkeys_cli(*args, env={**self.env, **extra})


@pytest.fixture(params=["sqlite", "postgresql"])
def hsm(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Hsm]:
    module = softhsm_module()
    tokens = tmp_path / "tokens"
    tokens.mkdir()
    conf = tmp_path / "softhsm2.conf"
    conf.write_text(f"directories.tokendir = {tokens}\nobjectstore.backend = file\n")
    for label in ("chainkeys-a", "chainkeys-b"):
        subprocess.run(
            [
                "softhsm2-util",
                "--init-token",
                "--free",
                "--label",
                label,
                "--pin",
                PIN,
                "--so-pin",
                "13579135",
            ],
            env={**os.environ, "SOFTHSM2_CONF": str(conf)},
            check=True,
            capture_output=True,
        )
    (tmp_path / "pin").write_text(PIN + "\n")
    for var in ("CHAINKEYS_MASTER_KEY", "CHAINKEYS_DATABASE_URL"):
        os.environ.pop(var, None)
    env = {
        "SOFTHSM2_CONF": str(conf),
        "CHAINKEYS_DATA_DIR": str(tmp_path / "data"),
        "CHAINKEYS_MASTER_KEY_PROVIDER": "pkcs11",
        "CHAINKEYS_PKCS11_MODULE": module,
        "CHAINKEYS_PKCS11_TOKEN_LABEL": "chainkeys-a",
        "CHAINKEYS_PKCS11_PIN_FILE": str(tmp_path / "pin"),
    }
    url = make_pg_database() if request.param == "postgresql" else None
    if url:
        env["CHAINKEYS_DATABASE_URL"] = url
    yield Hsm(env, tmp_path)
    if url:
        drop_pg_database(url)


def refused_start(env: dict[str, str], log: Path) -> str:
    """`chainkeys serve` must exit at once with one line on stderr. The run's stdout and
    stderr go to `log`, a new file (a second run into the same log fails here), which
    must name the refusal and hold no PIN: the test's own nor the one in the PIN file."""
    done = subprocess.run(
        [sys.executable, "-m", "chainkeys.cli", "serve", "--port", str(free_port())],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    with log.open("x") as out:  # "x": never another run's log overwritten
        out.write(f"--- stdout\n{done.stdout}--- stderr\n{done.stderr}")
    assert done.returncode != 0, done.stdout
    assert "Traceback" not in done.stderr and "Listening" not in done.stderr
    lines = [ln for ln in done.stderr.splitlines() if ln.startswith("chainkeys: ")]
    assert len(lines) == 1 and " ERROR " not in done.stderr, done.stderr
    assert_refusal_log(log, lines[0], pins(env))
    return lines[0]


def pins(env: dict[str, str]) -> set[str]:
    """The PINs a run could leak: the test's, and whatever its PIN file holds."""
    pin_file = Path(env.get("CHAINKEYS_PKCS11_PIN_FILE", "/nonexistent"))
    found = {PIN}
    if pin_file.exists():
        found.add(pin_file.read_text().strip())
    return {p for p in found if p}


def assert_refusal_log(log: Path, says: str, secrets: set[str]) -> None:
    """`log` is this refusal's own: not empty, naming `says`, and holding no PIN."""
    text = log.read_text()
    assert text.strip() and says in text, f"{log} is not the log of the run that said {says!r}"
    for secret in secrets:
        assert secret not in text, f"a PIN is in {log}"


UNWRAP = """
import json, sys
from chainkeys.config import Settings
from chainkeys.vault.pkcs11 import hsm_from_settings, unwrap
print(unwrap(hsm_from_settings(Settings()), json.loads(bytes.fromhex(sys.argv[1]))).hex())
"""
ATTRIBUTES = """
import os, pkcs11
from pkcs11 import Attribute, KeyType
token = pkcs11.lib(os.environ["CHAINKEYS_PKCS11_MODULE"]).get_token(token_label="chainkeys-a")
with token.open(user_pin=open(os.environ["CHAINKEYS_PKCS11_PIN_FILE"]).read().strip()) as s:
    key = s.get_key(label="chainkeys-master", key_type=KeyType.AES)
    print(*(key[a] for a in (Attribute.EXTRACTABLE, Attribute.SENSITIVE,
                             Attribute.NEVER_EXTRACTABLE, Attribute.TOKEN)))
"""


def in_subprocess(hsm: Hsm, code: str, *args: str) -> str:
    """PKCS#11 libraries read their configuration once per process: a fresh one each time."""
    done = subprocess.run(
        [sys.executable, "-c", code, *args],
        env={**os.environ, **hsm.env},
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def master_key_forms(hsm: Hsm) -> list[bytes]:
    """The unwrapped master key, as the test itself unwraps it, in every printable form."""
    key = bytes.fromhex(in_subprocess(hsm, UNWRAP, stored_blob(hsm).hex()))
    return [key, key.hex().encode(), base64.b64encode(key), base64.b64encode(key).rstrip(b"=")]


def stored_blob(hsm: Hsm) -> bytes:
    rows = store_rows(hsm, "SELECT value FROM meta WHERE key = 'master_key_wrapped'")
    assert len(rows) == 1, rows
    return bytes(rows[0][0])


def store_rows(hsm: Hsm, sql: str) -> list[tuple[Any, ...]]:
    return env_rows(hsm.env, sql)


def env_rows(env: dict[str, str], sql: str) -> list[tuple[Any, ...]]:
    """Rows of `sql` in the store `env` names, read from this process (not the one that
    wrote them), on either backend."""
    url = env.get("CHAINKEYS_DATABASE_URL")
    if url is None:
        path = Path(env["CHAINKEYS_DATA_DIR"]) / "chainkeys.db"
        with contextlib.closing(sqlite3.connect(path)) as db:
            return [tuple(row) for row in db.execute(sql).fetchall()]
    import asyncio

    import asyncpg  # type: ignore[import-untyped]

    async def read() -> list[tuple[Any, ...]]:
        conn = await asyncpg.connect(url)
        try:
            return [tuple(row) for row in await conn.fetch(sql)]
        finally:
            await conn.close()

    return asyncio.run(read())


def serve_and_check(env: dict[str, str], log: Path, token: str | None = None) -> str:
    """Start, create (first time) or read back the account, sign with it, stop."""
    proc = start(env, log)
    try:
        token = token or first_token(proc)
        with httpx.Client(
            verify=TLS, base_url=proc.base_url, headers={"Authorization": token}
        ) as c:
            made = c.post("/cosmos", json={"private_key": PRIVATE})
            assert made.status_code in (200, 409), made.text
            assert c.get(f"/cosmos/{TRANSFER['fromAddress']}").status_code == 200
            signed = c.post(f"/cosmos/{TRANSFER['fromAddress']}/sign-transfer", json=TRANSFER)
            assert signed.status_code == 200, signed.text
    finally:
        out = proc.stop()
    assert "Traceback" not in out
    return token
