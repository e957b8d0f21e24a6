"""The master key wrapped by a KMIP server's AES key, against PyKMIP's own server (a
subprocess with a config file and TLS certificates the test makes, once per module).

The KMIP server does the encryption (AES-CBC, PKCS#5 padding; its key never leaves
it). Start, restart and sign with the same account; a server that is down, a client
certificate it does not trust, a revoked key and another key are one-line refusals;
a rotation of the data master key and a move file → kmip → file.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import free_port
from tests.hsm.conftest import refused_start, serve_and_check
from tests.process.test_process import first_token, start
from tests.vault.kms_servers import Store, Tls, make_tls, new_store, pykmip_server

pytestmark = pytest.mark.long(140)  # seconds (busy run): scheduled first


@dataclass
class Kmip:
    port: int
    tls: Tls

    def client(self) -> Any:
        with warnings.catch_warnings():  # PyKMIP's SQLAlchemy 1.x idioms, on first import
            warnings.simplefilter("ignore")
            from kmip.pie.client import ProxyKmipClient  # type: ignore[import-untyped]

        return ProxyKmipClient(
            hostname="127.0.0.1",
            port=self.port,
            cert=str(self.tls.client_cert),
            key=str(self.tls.client_key),
            ca=str(self.tls.ca),
            config_file=os.devnull,
        )

    def make_key(self) -> str:
        """A new active AES-256 key owned by the client certificate chainkeys uses."""
        client = self.client()
        from kmip import enums

        with warnings.catch_warnings():  # its ssl.PROTOCOL_TLS context
            warnings.simplefilter("ignore", DeprecationWarning)
            client.open()
        try:
            uid = str(
                client.create(
                    enums.CryptographicAlgorithm.AES,
                    256,
                    cryptographic_usage_mask=[
                        enums.CryptographicUsageMask.ENCRYPT,
                        enums.CryptographicUsageMask.DECRYPT,
                    ],
                )
            )
            client.activate(uid)
        finally:
            client.close()
        return uid

    def revoke(self, uid: str) -> None:
        client = self.client()
        from kmip import enums

        with warnings.catch_warnings():  # its ssl.PROTOCOL_TLS context
            warnings.simplefilter("ignore", DeprecationWarning)
            client.open()
        try:
            client.revoke(
                enums.RevocationReasonCode.KEY_COMPROMISE, uid, compromise_occurrence_date=1
            )
        finally:
            client.close()


@pytest.fixture(scope="module")
def kmip(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kmip]:
    with pykmip_server(tmp_path_factory.mktemp("pykmip")) as (port, tls):
        yield Kmip(port, tls)


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    with new_store(request.param, tmp_path, {}) as made:
        yield made


def kmip_env(store: Store, kmip: Kmip, key_id: str) -> dict[str, str]:
    return {
        **store.env,
        "CHAINKEYS_MASTER_KEY_PROVIDER": "kmip",
        "CHAINKEYS_KMIP_HOST": "127.0.0.1",
        "CHAINKEYS_KMIP_PORT": str(kmip.port),
        "CHAINKEYS_KMIP_CERT": str(kmip.tls.client_cert),
        "CHAINKEYS_KMIP_KEY": str(kmip.tls.client_key),
        "CHAINKEYS_KMIP_CA": str(kmip.tls.ca),
        "CHAINKEYS_KMIP_KEY_ID": key_id,
    }


def refused(store: Store, env: dict[str, str], name: str) -> str:
    """A one-line refusal holding no private key (tests/hsm/conftest.py refused_start)."""
    log = store.log(f"refused-{name}")
    says = refused_start(env, log)
    text = log.read_text()
    for key in store.tmp.rglob("*.key"):
        assert key.read_text() not in text
    return says


def test_start_restart_sign_and_the_blob(kmip: Kmip, store: Store) -> None:
    key_id = kmip.make_key()
    env = kmip_env(store, kmip, key_id)
    token = serve_and_check(env, store.log("first"))
    serve_and_check(env, store.log("restart"), token)
    fields = store.wrapped_blob()
    assert fields["provider"] == "kmip" and fields["key_id"] == key_id
    assert fields["mode"] == "AES-CBC-PKCS5"
    assert fields["where"] == f"KMIP key {key_id} at 127.0.0.1:{kmip.port}"
    says = refused(store, {**store.env, "CHAINKEYS_MASTER_KEY_PROVIDER": "file"}, "file")
    assert f"wrapped by KMIP key {key_id} at 127.0.0.1:{kmip.port}" in says
    assert "CHAINKEYS_MASTER_KEY_PROVIDER=kmip" in says


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_refusals_name_the_kmip_server(kmip: Kmip, store: Store) -> None:
    key_id = kmip.make_key()
    env = kmip_env(store, kmip, key_id)
    token = serve_and_check(env, store.log("first"))
    closed = free_port()
    says = refused(store, {**env, "CHAINKEYS_KMIP_PORT": str(closed)}, "down")
    assert says.startswith(
        f"chainkeys: the KMIP server at 127.0.0.1:{closed} is unreachable "
        "or refused our TLS certificate"
    )
    strangers = store.tmp / "strangers"
    strangers.mkdir()
    other_ca = make_tls(strangers)  # a client certificate from a CA the server does not trust
    says = refused(
        store,
        {
            **env,
            "CHAINKEYS_KMIP_CERT": str(other_ca.client_cert),
            "CHAINKEYS_KMIP_KEY": str(other_ca.client_key),
        },
        "stranger",
    )
    assert f"the KMIP server at 127.0.0.1:{kmip.port} is unreachable or refused our TLS" in says
    other = kmip.make_key()
    says = refused(store, {**env, "CHAINKEYS_KMIP_KEY_ID": other}, "other-key")
    assert says.startswith(
        f"chainkeys: KMIP key {other} at 127.0.0.1:{kmip.port} did not wrap "
        f"this store's master key: KMIP key {key_id}"
    )
    serve_and_check(env, store.log("still"), token)
    kmip.revoke(key_id)
    says = refused(store, env, "revoked")
    assert says.startswith(
        f"chainkeys: KMIP key {key_id} at 127.0.0.1:{kmip.port}: the KMIP server refused to decrypt"
    )


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_rotation_and_a_move_file_to_kmip_and_back(kmip: Kmip, store: Store) -> None:
    key_id = kmip.make_key()
    env = kmip_env(store, kmip, key_id)
    file_env = {**store.env, "CHAINKEYS_MASTER_KEY_PROVIDER": "file"}
    proc = start(file_env, store.log("file"))
    token = first_token(proc)
    proc.stop()
    serve_and_check(file_env, store.log("file-account"), token)
    key_file = Path(store.env["CHAINKEYS_DATA_DIR"]) / "master.key"
    original = key_file.read_text()
    moved = store.cli("key", "move", "--to", "kmip", **{**env, **file_env})
    assert moved.returncode == 0, moved.stderr
    assert f"is now kept by KMIP key {key_id}" in moved.stdout
    key_file.rename(store.tmp / "master.key.archived")
    serve_and_check(env, store.log("kmip"), token)
    # The data master key rotates under the KMIP key (no server running: nothing to wait).
    before = store.wrapped_blob()["master_key_id"]
    rotated = store.cli("key", "rotate", **env)
    assert rotated.returncode == 0, rotated.stderr
    assert store.wrapped_blob()["master_key_id"] != before
    serve_and_check(env, store.log("rotated"), token)
    back = store.cli("key", "move", "--to", "file", **env)
    assert back.returncode == 0, back.stderr
    assert key_file.read_text() != original  # the rotated key, now in the file
    serve_and_check(file_env, store.log("file-again"), token)
