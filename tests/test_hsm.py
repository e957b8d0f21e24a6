"""The master key wrapped by an HSM key, against a real SoftHSM2 token (PKCS#11).

Every refusal is one line and the service does not start; a restart unwraps the
same key; moves file → HSM → another HSM key → file keep every account, also when
killed with SIGKILL mid-way and run again; the unwrapped master key is never in
the database or the logs. Without SoftHSM2 these tests skip with the install
command (CI sets CHAINKEYS_TEST_REQUIRE_SOFTHSM=1: they must run there).
"""

from __future__ import annotations

import base64
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.api.test_sign_cosmos import PRIVATE, TRANSFER
from tests.conftest import chainkeys_cli, drop_pg_database, make_pg_database
from tests.test_process import first_token, start

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
            ["softhsm2-util", "--init-token", "--free", "--label", label, "--pin", PIN,
             "--so-pin", "13579135"],
            env={**os.environ, "SOFTHSM2_CONF": str(conf)}, check=True, capture_output=True,
        )  # fmt: skip
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
    """`chainkeys serve` must exit at once with one line on stderr."""
    done = subprocess.run(
        [sys.executable, "-m", "chainkeys.cli", "serve", "--port", "1"],
        env={**os.environ, **env}, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    log.write_text(done.stdout + done.stderr)
    assert done.returncode != 0, done.stdout
    assert "Traceback" not in done.stderr and "Listening" not in done.stderr
    lines = [ln for ln in done.stderr.splitlines() if ln.startswith("chainkeys: ")]
    assert len(lines) == 1 and " ERROR " not in done.stderr, done.stderr
    return lines[0]


UNWRAP = """
import sys
from chainkeys.config import Settings
from chainkeys.vault.pkcs11 import hsm_from_settings, unwrap
print(unwrap(hsm_from_settings(Settings()), bytes.fromhex(sys.argv[1])).material.hex())
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
    done = subprocess.run([sys.executable, "-c", code, *args], env={**os.environ, **hsm.env},
                          capture_output=True, text=True, check=True)  # fmt: skip
    return done.stdout.strip()


def master_key_forms(hsm: Hsm) -> list[bytes]:
    """The unwrapped master key, as the test itself unwraps it, in every printable form."""
    key = bytes.fromhex(in_subprocess(hsm, UNWRAP, stored_blob(hsm).hex()))
    return [key, key.hex().encode(), base64.b64encode(key), base64.b64encode(key).rstrip(b"=")]


def stored_blob(hsm: Hsm) -> bytes:
    url = hsm.env.get("CHAINKEYS_DATABASE_URL")
    if url is None:
        with sqlite3.connect(Path(hsm.env["CHAINKEYS_DATA_DIR"]) / "chainkeys.db") as db:
            row = db.execute("SELECT value FROM meta WHERE key = 'master_key_wrapped'").fetchone()
        return bytes(row[0])
    import asyncio

    import asyncpg  # type: ignore[import-untyped]

    async def read() -> bytes:
        conn = await asyncpg.connect(url)
        try:
            value = await conn.fetchval("SELECT value FROM meta WHERE key = 'master_key_wrapped'")
        finally:
            await conn.close()
        return bytes(value)

    return asyncio.run(read())


def serve_and_check(env: dict[str, str], log: Path, token: str | None = None) -> str:
    """Start, create (first time) or read back the account, sign with it, stop."""
    proc = start(env, log)
    try:
        token = token or first_token(proc.stdout)
        with httpx.Client(base_url=proc.base_url, headers={"Authorization": token}) as c:
            made = c.post("/cosmos", json={"private_key": PRIVATE})
            assert made.status_code in (200, 409), made.text
            assert c.get(f"/cosmos/{TRANSFER['fromAddress']}").status_code == 200
            signed = c.post(f"/cosmos/{TRANSFER['fromAddress']}/sign-transfer", json=TRANSFER)
            assert signed.status_code == 200, signed.text
    finally:
        out = proc.stop()
    assert "Traceback" not in out
    return token


@pytest.mark.parametrize("hsm", ["sqlite"], indirect=True)  # the token's business only
def test_hsm_init_creates_a_non_extractable_sensitive_key_once(hsm: Hsm) -> None:
    first = hsm.cli("hsm", "init")
    assert first.returncode == 0, first.stderr
    assert first.stdout.startswith("created HSM key 'chainkeys-master' in token 'chainkeys-a'")
    again = hsm.cli("hsm", "init")
    assert again.stdout.startswith("already present: HSM key 'chainkeys-master'")
    assert in_subprocess(hsm, ATTRIBUTES) == "False True True True"


def test_first_start_restart_and_the_key_never_in_the_store_or_logs(hsm: Hsm) -> None:
    assert hsm.cli("hsm", "init").returncode == 0
    token = serve_and_check(hsm.env, hsm.tmp / "first.log")
    serve_and_check(hsm.env, hsm.tmp / "second.log", token)  # unwrapped again on restart
    forms = master_key_forms(hsm)
    logs = b"".join(p.read_bytes() for p in hsm.tmp.glob("*.log*"))
    data = b""
    if "CHAINKEYS_DATABASE_URL" not in hsm.env:
        data = b"".join(p.read_bytes() for p in (hsm.tmp / "data").iterdir() if p.is_file())
        assert not (hsm.tmp / "data" / "master.key").exists()
    else:
        dump = subprocess.run(["pg_dump", "--data-only", hsm.env["CHAINKEYS_DATABASE_URL"]],
                              capture_output=True, check=True)  # fmt: skip
        data = dump.stdout
    assert b"master_key_wrapped" in data or "CHAINKEYS_DATABASE_URL" not in hsm.env
    for form in forms:
        assert form not in logs and form not in data


@pytest.mark.parametrize("hsm", ["sqlite"], indirect=True)  # the store's part: next test
def test_each_refusal_is_one_line_and_nothing_starts(hsm: Hsm) -> None:
    log = hsm.tmp / "refused.log"
    says = refused_start({**hsm.env, "CHAINKEYS_PKCS11_MODULE": "/nowhere/libpkcs11.so"}, log)
    assert "CHAINKEYS_PKCS11_MODULE /nowhere/libpkcs11.so: cannot load it" in says
    says = refused_start({**hsm.env, "CHAINKEYS_PKCS11_TOKEN_LABEL": "vault-9"}, log)
    assert "no PKCS#11 token labelled 'vault-9'" in says and "chainkeys-a" in says
    says = refused_start({**hsm.env, "CHAINKEYS_PKCS11_KEY_LABEL": "absent"}, log)
    assert "holds no AES key labelled 'absent'" in says and "chainkeys hsm init" in says
    wrong = hsm.tmp / "wrong-pin"
    wrong.write_text("999999")
    says = refused_start({**hsm.env, "CHAINKEYS_PKCS11_PIN_FILE": str(wrong)}, log)
    assert says == "chainkeys: the PIN was refused by PKCS#11 token 'chainkeys-a'"
    assert hsm.cli("hsm", "init").returncode == 0
    token = serve_and_check(hsm.env, hsm.tmp / "ok.log")
    # Another token's key with the same label is not the key that wrapped this store.
    other = {**hsm.env, "CHAINKEYS_PKCS11_TOKEN_LABEL": "chainkeys-b"}
    assert chainkeys_cli("hsm", "init", env=other).returncode == 0
    says = refused_start(other, log)
    assert "is not the HSM key that wrapped this store's master key" in says
    says = refused_start({**hsm.env, "CHAINKEYS_MASTER_KEY_PROVIDER": "file"}, log)
    assert "master key is wrapped by HSM key 'chainkeys-master' in token 'chainkeys-a'" in says
    serve_and_check(hsm.env, hsm.tmp / "still.log", token)
    for line in (hsm.tmp / "refused.log").read_text().splitlines():
        assert PIN not in line and "999999" not in line


def test_a_file_key_store_refuses_the_hsm_until_moved(hsm: Hsm) -> None:
    file_env = {**hsm.env, "CHAINKEYS_MASTER_KEY_PROVIDER": "file"}
    token = serve_and_check(file_env, hsm.tmp / "file.log")
    assert hsm.cli("hsm", "init").returncode == 0
    says = refused_start(hsm.env, hsm.tmp / "refused.log")
    assert "not in an HSM" in says and "chainkeys key move --to pkcs11" in says
    moved = chainkeys_cli("key", "move", "--to", "pkcs11", env=file_env)
    assert moved.returncode == 0, moved.stderr
    serve_and_check(hsm.env, hsm.tmp / "hsm.log", token)


def run_killed(env: dict[str, str], *args: str, after: float) -> None:
    """Start `chainkeys <args>` and SIGKILL it `after` seconds in (if still running)."""
    proc = subprocess.Popen([sys.executable, "-m", "chainkeys.cli", *args],
                            env={**os.environ, **env}, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)  # fmt: skip
    time.sleep(after)
    if proc.poll() is None:
        proc.send_signal(signal.SIGKILL)
    proc.wait(30)


def test_moves_both_ways_survive_sigkill_and_keep_every_account(hsm: Hsm) -> None:
    file_env = {**hsm.env, "CHAINKEYS_MASTER_KEY_PROVIDER": "file"}
    token = serve_and_check(file_env, hsm.tmp / "file.log")
    key_file = Path(hsm.env["CHAINKEYS_DATA_DIR"]) / "master.key"
    original = key_file.read_text()
    assert hsm.cli("hsm", "init").returncode == 0
    b_env = {**hsm.env, "CHAINKEYS_PKCS11_KEY_LABEL": "chainkeys-next"}
    assert chainkeys_cli("hsm", "init", env=b_env).returncode == 0
    steps = [
        (file_env, ("key", "move", "--to", "pkcs11"), hsm.env),  # file → HSM key A
        (hsm.env, ("key", "move", "--to", "pkcs11", "--key-label", "chainkeys-next"), b_env),
        (b_env, ("key", "move", "--to", "file"), file_env),  # HSM key B → file
    ]
    for n, (source, args, target) in enumerate(steps):
        for delay in (0.4, 0.8):  # interrupted at various points, then run again
            run_killed(source, *args, after=delay)
        done = chainkeys_cli(*args, env=source)
        assert done.returncode == 0, done.stderr
        again = chainkeys_cli(*args, env=source)  # a re-run finds it done
        assert again.returncode == 0 and "there already" in again.stdout, again.stdout
        serve_and_check(target, hsm.tmp / f"step{n}.log", token)
        if n == 0:
            key_file.rename(hsm.tmp / "master.key.archived")  # the key lives in the HSM only
    assert key_file.read_text() == original  # the same master key all along
    assert key_file.stat().st_mode & 0o777 == 0o600
