"""One store's master key moved through every key service and back, online:
file → awskms (moto) → transit (OpenBao) → kmip (PyKMIP) → shamir → file, each move
run with the settings of where the key is and the target's, the account signing after
every restart (the shamir start sealed until 3 of the 5 shares the move printed), and
a start with the provider the key just left naming the one it went to.
"""

from __future__ import annotations

import itertools
import time
from pathlib import Path

import httpx
import pytest
from tests.api.test_sign_cosmos import TRANSFER
from tests.conftest import TLS
from tests.hsm.conftest import env_rows, refused_start, serve_and_check
from tests.masterkey.test_shamir import SHARE_LINE, cli_with_input
from tests.process.test_process import first_token, start
from tests.vault.kms_servers import (
    ROOT_TOKEN,
    moto_server,
    new_store,
    openbao_server,
    pykmip_server,
)
from tests.vault.test_awskms import awskms_env, make_key
from tests.vault.test_kmip import Kmip, kmip_env
from tests.vault.test_transit import Bao, transit_env

pytestmark = pytest.mark.long(95)  # seconds (busy run): scheduled first


# SQLite only: a move rewrites meta rows alone; each provider's own file starts and
# restarts on PostgreSQL too.
def test_file_awskms_transit_kmip_file(tmp_path: Path) -> None:
    import hvac  # type: ignore[import-untyped]

    servers = tmp_path / "servers"
    servers.mkdir()
    (servers / "pykmip").mkdir()
    with (
        moto_server(servers / "moto.log") as kms,
        openbao_server(servers / "bao.log") as addr,
        pykmip_server(servers / "pykmip") as (port, tls),
        new_store("sqlite", tmp_path, {}) as store,
    ):
        client = hvac.Client(url=addr, token=ROOT_TOKEN)
        deadline = time.monotonic() + 30
        while not client.sys.is_initialized() or client.sys.is_sealed():
            assert time.monotonic() < deadline, "OpenBao's dev server never unsealed"
            time.sleep(0.1)
        client.sys.enable_secrets_engine("transit", path="transit")
        alias, _ = make_key(kms, "moves")
        transit_key, token_file = Bao(addr, client).make_key(tmp_path)
        kmip = Kmip(port, tls)
        kmip_key = kmip.make_key()
        places = [
            ("file", {**store.env, "CHAINKEYS_MASTER_KEY_PROVIDER": "file"}),
            ("awskms", awskms_env(store, kms, alias)),
            ("transit", transit_env(store, addr, transit_key, token_file)),
            ("kmip", kmip_env(store, kmip, kmip_key)),
            ("shamir", {**store.env, "CHAINKEYS_MASTER_KEY_PROVIDER": "shamir"}),
            ("file", {**store.env, "CHAINKEYS_MASTER_KEY_PROVIDER": "file"}),
        ]
        every = {k: v for _, env in places for k, v in env.items()}  # every service's settings
        proc = start(places[0][1], store.log("file"))
        token = first_token(proc)
        proc.stop()
        serve_and_check(places[0][1], store.log("file-account"), token)
        key_file = Path(store.env["CHAINKEYS_DATA_DIR"]) / "master.key"
        original = key_file.read_text()
        shares: list[str] = []
        for (source, source_env), (target, target_env) in itertools.pairwise(places):
            args = ["key", "move", "--to", target]
            if target == "shamir":
                args += ["--shares", "5", "--threshold", "3"]
            given = "\n".join(shares[1:4]) + "\n" if source == "shamir" else ""
            moved = cli_with_input(args, given, {**every, **source_env})
            assert moved.returncode == 0, moved.stderr
            if source == "file":
                key_file.rename(tmp_path / "master.key.archived")  # the key in KMS only
                assert f"then delete {key_file}" in moved.stdout
            if target == "shamir":
                shares = [m[2] for m in map(SHARE_LINE.fullmatch, moved.stdout.splitlines()) if m]
                assert len(shares) == 5 and moved.stdout.index(shares[4]) < moved.stdout.index(
                    "is now kept by"
                )  # shown before the move wrote anything
                serve_sealed_and_check(target_env, store.log("shamir-moved"), token, shares)
            else:
                serve_and_check(target_env, store.log(f"{target}-moved"), token)  # a restart
            if target != "file":
                says = refused_start(source_env, store.log(f"refused-{source}"))
                assert f"CHAINKEYS_MASTER_KEY_PROVIDER={target}" in says
                (blob,) = env_rows(
                    store.env, "SELECT value FROM meta WHERE key = 'master_key_wrapped'"
                )
                assert f'"provider":"{target}"' in bytes(blob[0]).decode()
        assert key_file.read_text() == original  # the same master key all along
        assert not env_rows(store.env, "SELECT 1 FROM meta WHERE key = 'master_key_wrapped'")


def serve_sealed_and_check(env: dict[str, str], log: Path, token: str, shares: list[str]) -> None:
    """A shamir start: 503 `sealed` until 3 of the 5 shares, then the account signs."""
    proc = start(env, log)
    address = TRANSFER["fromAddress"]
    try:
        with httpx.Client(
            verify=TLS, base_url=proc.base_url, timeout=30, headers={"Authorization": token}
        ) as c:
            for share in shares[:3]:
                r = c.post(f"/cosmos/{address}/sign-transfer", json=TRANSFER)
                assert (r.status_code, r.json()["code"]) == (503, "sealed"), r.text
                assert c.post("/sys/unseal", json={"share": share}).status_code == 200
            assert c.get("/readyz").status_code == 200
            signed = c.post(f"/cosmos/{address}/sign-transfer", json=TRANSFER)
            assert signed.status_code == 200, signed.text
    finally:
        out = proc.stop()
    assert "Traceback" not in out and not any(share in out for share in shares)


def test_the_registry_and_the_setting_name_the_same_providers() -> None:
    """A provider is one row in PROVIDERS and its name in the setting's Literal; each
    row's factory exists (its module loads without its SDK: they load on first use)."""
    import importlib
    import typing

    from chainkeys.config import Settings
    from chainkeys.vault.providers import PROVIDERS

    (literal, _none) = typing.get_args(Settings.model_fields["master_key_provider"].annotation)
    assert set(typing.get_args(literal)) == set(PROVIDERS)
    for name, row in PROVIDERS.items():
        module, _, factory = row.factory.partition(":")
        assert callable(getattr(importlib.import_module(module), factory)), name
        assert row.key_setting is None or row.key_setting in Settings.model_fields, name
