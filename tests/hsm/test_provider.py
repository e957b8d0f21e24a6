"""The master key wrapped by an HSM key, against a real SoftHSM2 token (PKCS#11).

`hsm init` makes a non-extractable, sensitive key once; every refusal is one line
and the service does not start; a restart unwraps the same key; the unwrapped
master key is never in the database or the logs.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import subprocess
from pathlib import Path

import pytest

from tests.conftest import chainkeys_cli
from tests.hsm.conftest import (
    ATTRIBUTES,
    PIN,
    Hsm,
    assert_refusal_log,
    in_subprocess,
    master_key_forms,
    refused_start,
    serve_and_check,
    stored_blob,
)

pytestmark = pytest.mark.long(105)  # seconds (busy run): scheduled first

WRONG_PIN = "999999"


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
    # stderr (*.log, never empty: the start-up lines) and stdout (*.out) of both runs
    stderr, stdout = sorted(hsm.tmp.glob("*.log")), sorted(hsm.tmp.glob("*.out"))
    assert len(stderr) == len(stdout) == 2 and all(p.stat().st_size for p in stderr)
    logs = [p.read_bytes() for p in (*stderr, *stdout)]
    # Every file in the data directory, read back after the servers stopped: on SQLite
    # the database file and its WAL, byte for byte (freed pages included).
    data_dir = hsm.tmp / "data"
    data = b"".join(p.read_bytes() for p in data_dir.iterdir() if p.is_file())
    assert not (data_dir / "master.key").exists()
    blob = stored_blob(hsm)
    if "CHAINKEYS_DATABASE_URL" in hsm.env:
        dump = subprocess.run(
            ["pg_dump", "--data-only", hsm.env["CHAINKEYS_DATABASE_URL"]],
            capture_output=True,
            check=True,
        )
        data += dump.stdout
        seen = blob.hex().encode()  # pg_dump writes bytea as hex
    else:
        assert (data_dir / "chainkeys.db").exists()
        seen = blob
    # What is searched does hold the store's rows, on both backends: the wrapped blob
    # (so the unwrapped key would be found there too, were it written beside it).
    assert b"master_key_wrapped" in data and seen in data
    for form in forms:
        assert form not in data, "the unwrapped master key is in the store"
        assert all(form not in log for log in logs), "the unwrapped master key is in a log"


@pytest.mark.parametrize("hsm", ["sqlite"], indirect=True)  # the store's part: next test
def test_each_refusal_is_one_line_and_nothing_starts(hsm: Hsm) -> None:
    refusals: list[tuple[Path, str]] = []  # each run's own log, and what it said

    def refused(name: str, env: dict[str, str]) -> str:
        log = hsm.tmp / f"refused-{name}.log"
        says = refused_start(env, log)
        refusals.append((log, says))
        return says

    says = refused("module", {**hsm.env, "CHAINKEYS_PKCS11_MODULE": "/nowhere/libpkcs11.so"})
    assert "CHAINKEYS_PKCS11_MODULE /nowhere/libpkcs11.so: cannot load it" in says
    says = refused("token", {**hsm.env, "CHAINKEYS_PKCS11_TOKEN_LABEL": "vault-9"})
    assert "no PKCS#11 token labelled 'vault-9'" in says and "chainkeys-a" in says
    says = refused("key", {**hsm.env, "CHAINKEYS_PKCS11_KEY_LABEL": "absent"})
    assert "holds no AES key labelled 'absent'" in says and "chainkeys hsm init" in says
    wrong = hsm.tmp / "wrong-pin"
    wrong.write_text(WRONG_PIN)
    says = refused("pin", {**hsm.env, "CHAINKEYS_PKCS11_PIN_FILE": str(wrong)})
    assert says == "chainkeys: the PIN was refused by PKCS#11 token 'chainkeys-a'"
    assert hsm.cli("hsm", "init").returncode == 0
    token = serve_and_check(hsm.env, hsm.tmp / "ok.log")
    # Another token's key with the same label is not the key that wrapped this store.
    other = {**hsm.env, "CHAINKEYS_PKCS11_TOKEN_LABEL": "chainkeys-b"}
    assert chainkeys_cli("hsm", "init", env=other).returncode == 0
    says = refused("other-token", other)
    assert says.startswith(
        "chainkeys: HSM key 'chainkeys-master' in token 'chainkeys-b' did "
        "not wrap this store's master key: HSM key 'chainkeys-master' in "
        "token 'chainkeys-a' did"
    )
    says = refused("file-provider", {**hsm.env, "CHAINKEYS_MASTER_KEY_PROVIDER": "file"})
    assert "master key is wrapped by HSM key 'chainkeys-master' in token 'chainkeys-a'" in says
    assert "CHAINKEYS_MASTER_KEY_PROVIDER=pkcs11" in says
    serve_and_check(hsm.env, hsm.tmp / "still.log", token)
    # A blob from before the provider registry (no provider, where nor store) is pkcs11's.
    fields = json.loads(stored_blob(hsm))
    legacy = {k: v for k, v in fields.items() if k not in ("provider", "where", "store")}
    db = sqlite3.connect(hsm.tmp / "data" / "chainkeys.db")
    with contextlib.closing(db), db:
        db.execute(
            "UPDATE meta SET value = ? WHERE key = 'master_key_wrapped'",
            (json.dumps(legacy).encode(),),
        )
    says = refused("file-provider-legacy", {**hsm.env, "CHAINKEYS_MASTER_KEY_PROVIDER": "file"})
    assert "master key is wrapped by HSM key 'chainkeys-master' in token 'chainkeys-a'" in says
    serve_and_check(hsm.env, hsm.tmp / "legacy.log", token)
    # Read back at the end: each log is still its own run's, and no PIN is in any.
    assert len({log for log, _ in refusals}) == len(refusals) == 7
    for log, says in refusals:
        assert_refusal_log(log, says, {PIN, WRONG_PIN})


def test_a_file_key_store_refuses_the_hsm_until_moved(hsm: Hsm) -> None:
    file_env = {**hsm.env, "CHAINKEYS_MASTER_KEY_PROVIDER": "file"}
    token = serve_and_check(file_env, hsm.tmp / "file.log")
    assert hsm.cli("hsm", "init").returncode == 0
    says = refused_start(hsm.env, hsm.tmp / "refused.log")
    assert "not wrapped by HSM key 'chainkeys-master'" in says
    assert "chainkeys key move --to pkcs11" in says
    moved = chainkeys_cli("key", "move", "--to", "pkcs11", env=file_env)
    assert moved.returncode == 0, moved.stderr
    serve_and_check(hsm.env, hsm.tmp / "hsm.log", token)
