"""The master key wrapped by AWS KMS, against moto's KMS in server mode (a real HTTP
endpoint in a subprocess, not an in-process mock).

Start, restart and sign with the same account; a KMS that is down at start, and a key
KMS reports disabled (moto still decrypts with a disabled key, so a small proxy answers
KMS's own DisabledException), are one-line refusals naming KMS; a rotation of the data
master key under KMS; a move file → awskms → file.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import free_port
from tests.hsm.conftest import env_rows, refused_start, serve_and_check
from tests.process.test_process import first_token, start
from tests.vault.kms_servers import Store, moto_server, new_store

pytestmark = pytest.mark.long(130)  # seconds (busy run): scheduled first

SECRET_KEY = "moto-test-secret-access-key-0123456789"
AWS = {
    "AWS_REGION": "eu-west-1",
    "AWS_ACCESS_KEY_ID": "AKIATESTCHAINKEYS00",
    "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
}


@pytest.fixture(scope="module")
def kms(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """moto's server, once for the module; yields its endpoint."""
    with moto_server(tmp_path_factory.mktemp("moto") / "moto.log") as url:
        yield url


def kms_client(url: str) -> Any:
    import boto3  # type: ignore[import-untyped]

    return boto3.client(
        "kms",
        endpoint_url=url,
        region_name=AWS["AWS_REGION"],
        aws_access_key_id=AWS["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=SECRET_KEY,
    )


def make_key(url: str, name: str) -> tuple[str, str]:
    """A new symmetric KMS key with an alias of its own (alias/<name>-<random>): the
    alias and the key's ARN."""
    client = kms_client(url)
    alias = f"alias/{name}-{uuid.uuid4().hex[:8]}"
    try:
        arn = str(client.create_key(Description=f"chainkeys test {name}")["KeyMetadata"]["Arn"])
        client.create_alias(AliasName=alias, TargetKeyId=arn)
    finally:
        client.close()
    return alias, arn


def awskms_env(store: Store, url: str, key: str) -> dict[str, str]:
    return {
        **store.env,
        **AWS,
        "AWS_ENDPOINT_URL": url,
        "CHAINKEYS_MASTER_KEY_PROVIDER": "awskms",
        "CHAINKEYS_AWSKMS_KEY_ID": key,
    }


def refused(store: Store, env: dict[str, str], name: str) -> str:
    """A one-line refusal (tests/hsm/conftest.py refused_start) holding no AWS secret."""
    log = store.log(f"refused-{name}")
    says = refused_start(env, log)
    assert SECRET_KEY not in log.read_text()
    return says


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    with new_store(request.param, tmp_path, {}) as made:
        yield made


def test_start_restart_sign_and_the_blob_names_kms_and_the_store(kms: str, store: Store) -> None:
    alias, arn = make_key(kms, "start")
    env = awskms_env(store, kms, alias)
    token = serve_and_check(env, store.log("first"))
    serve_and_check(env, store.log("restart"), token)  # unwrapped again: the same account
    fields = store.wrapped_blob()
    assert fields["provider"] == "awskms" and fields["key_arn"] == arn
    assert fields["where"] == f"AWS KMS key {alias}"
    ((store_id,),) = env_rows(store.env, "SELECT value FROM meta WHERE key = 'store_id'")
    assert fields["store"] == bytes(store_id).decode() and len(fields["store"]) == 32
    # The same key by its ARN is the same place; the file provider names KMS.
    serve_and_check({**env, "CHAINKEYS_AWSKMS_KEY_ID": arn}, store.log("by-arn"), token)
    says = refused(store, {**store.env, "CHAINKEYS_MASTER_KEY_PROVIDER": "file"}, "file")
    assert says == (
        f"chainkeys: this store's master key is wrapped by AWS KMS key {alias}: "
        "start with CHAINKEYS_MASTER_KEY_PROVIDER=awskms (or move it out with "
        "`chainkeys key move --to file`)"
    )


class DisabledKms(BaseHTTPRequestHandler):
    """Answers every KMS call as KMS does for a disabled key (400, DisabledException)."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        body = json.dumps(
            {
                "__type": "DisabledException",
                "message": "arn:aws:kms:eu-west-1:123456789012:key/x is disabled.",
            }
        )
        self.send_response(400)
        self.send_header("Content-Type", "application/x-amz-json-1.1")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, format: str, *args: Any) -> None:
        return None


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)  # KMS's answers, not the store's
def test_kms_down_or_the_key_disabled_at_start_is_a_clear_refusal(kms: str, store: Store) -> None:
    alias, _ = make_key(kms, "down")
    env = awskms_env(store, kms, alias)
    token = serve_and_check(env, store.log("first"))
    closed = f"http://127.0.0.1:{free_port()}"
    says = refused(store, {**env, "AWS_ENDPOINT_URL": closed}, "down")
    assert says.startswith(
        f"chainkeys: AWS KMS at {closed} is unreachable, so AWS KMS key "
        f"{alias} cannot unwrap this store's master key"
    )
    proxy = ThreadingHTTPServer(("127.0.0.1", 0), DisabledKms)
    threading.Thread(target=proxy.serve_forever, daemon=True).start()
    try:
        disabled = {**env, "AWS_ENDPOINT_URL": f"http://127.0.0.1:{proxy.server_address[1]}"}
        says = refused(store, disabled, "disabled")
    finally:
        proxy.shutdown()
        proxy.server_close()
    assert says == (
        f"chainkeys: AWS KMS: AWS KMS key {alias} is disabled: enable "
        "it (aws kms enable-key), or start with the key this store was moved from "
        "(DisabledException)"
    )
    # A key that is not the one that wrapped the store: named, with the one that did.
    other, _ = make_key(kms, "other")
    says = refused(store, awskms_env(store, kms, other), "other-key")
    assert says.startswith(
        f"chainkeys: AWS KMS key {other} did not wrap this store's master "
        f"key: AWS KMS key {alias} did"
    )
    serve_and_check(env, store.log("back"), token)  # KMS back: it starts


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_rotating_the_master_key_under_kms(kms: str, store: Store) -> None:
    alias, _ = make_key(kms, "rotate")
    env = awskms_env(store, kms, alias)
    token = serve_and_check(env, store.log("first"))
    before = store.wrapped_blob()["master_key_id"]
    proc = start(env, store.log("running"))  # rotated online, under a running server
    try:
        rotated = store.cli("key", "rotate", **env)
        assert rotated.returncode == 0, rotated.stderr
    finally:
        assert "Traceback" not in proc.stop()
    after = store.wrapped_blob()
    assert after["master_key_id"] != before and after["master_key_id"] in rotated.stdout
    rows = env_rows(store.env, "SELECT key FROM meta WHERE key = 'master_key_wrapped_next'")
    assert rows == []
    serve_and_check(env, store.log("after"), token)


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_move_file_to_awskms_and_back(kms: str, store: Store) -> None:
    alias, _ = make_key(kms, "move")
    env = awskms_env(store, kms, alias)
    file_env = {**store.env, "CHAINKEYS_MASTER_KEY_PROVIDER": "file"}
    proc = start(file_env, store.log("file"))
    token = first_token(proc)
    proc.stop()
    serve_and_check(file_env, store.log("file-account"), token)
    key_file = Path(store.env["CHAINKEYS_DATA_DIR"]) / "master.key"
    original = key_file.read_text()
    says = refused(store, env, "not-moved-yet")
    assert f"not wrapped by AWS KMS key {alias}" in says
    assert "chainkeys key move --to awskms" in says
    # From the file settings, the target's key named on the command line.
    file_kms = {**file_env, **AWS, "AWS_ENDPOINT_URL": kms}
    moved = store.cli("key", "move", "--to", "awskms", "--key", alias, **file_kms)
    assert moved.returncode == 0, moved.stderr
    assert f"is now kept by AWS KMS key {alias}" in moved.stdout
    key_file.rename(store.tmp / "master.key.archived")  # the key lives in KMS only
    serve_and_check(env, store.log("awskms"), token)
    back = store.cli("key", "move", "--to", "file", **env)
    assert back.returncode == 0, back.stderr
    assert env_rows(store.env, "SELECT key FROM meta WHERE key = 'master_key_wrapped'") == []
    assert key_file.read_text() == original and key_file.stat().st_mode & 0o777 == 0o600
    serve_and_check(file_env, store.log("file-again"), token)


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_signing_needs_no_kms_once_started(store: Store) -> None:
    """KMS is asked once, at start: with its own moto stopped under a running server,
    the account still signs."""
    import httpx
    from tests.api.test_sign_cosmos import PRIVATE, TRANSFER
    from tests.conftest import TLS

    with moto_server(store.tmp / "own-moto.log") as own:
        alias, _ = make_key(own, "no-calls")
        proc = start(awskms_env(store, own, alias), store.log("running"))
    try:  # moto is stopped from here on
        token = first_token(proc)
        with httpx.Client(
            verify=TLS, base_url=proc.base_url, headers={"Authorization": token}
        ) as c:
            assert c.post("/cosmos", json={"private_key": PRIVATE}).status_code == 200
            for _ in range(3):
                signed = c.post(f"/cosmos/{TRANSFER['fromAddress']}/sign-transfer", json=TRANSFER)
                assert signed.status_code == 200, signed.text
    finally:
        assert "Traceback" not in proc.stop()
