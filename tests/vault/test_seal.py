"""Sealing: AES-256-GCM bound to its record; keys from files and the environment."""

from __future__ import annotations

import asyncio
import base64
import os
from pathlib import Path

import pytest

from chainkeys.errors import StartupError
from chainkeys.vault.providers import EnvKeyProvider, FileKeyProvider, MasterKey
from chainkeys.vault.seal import Context, SealError, Vault

SECRET = bytes(range(32))
CTX = Context("tenant-a", "cosmos", "cosmos1abc")


def test_seal_opens_only_in_its_own_context() -> None:
    vault = Vault(MasterKey(os.urandom(32)))
    blob = vault.seal(SECRET, CTX)
    assert SECRET not in blob
    assert vault.open(blob, vault.key_id, CTX) == SECRET
    for other in (
        Context("tenant-b", "cosmos", "cosmos1abc"),  # a row copied to another tenant
        Context("tenant-a", "dogecoin", "cosmos1abc"),
        Context("tenant-a", "cosmos", "cosmos1xyz"),
        Context("tenant-a", "cosmos", "cosmos1abc", purpose="idempotency"),
    ):
        with pytest.raises(SealError):
            vault.open(blob, vault.key_id, other)


def test_every_seal_uses_a_fresh_nonce() -> None:
    vault = Vault(MasterKey(os.urandom(32)))
    blobs = {vault.seal(SECRET, CTX) for _ in range(100)}
    assert len(blobs) == 100
    assert len({b[1:13] for b in blobs}) == 100


def test_tampering_and_wrong_keys_are_refused() -> None:
    vault = Vault(MasterKey(os.urandom(32)))
    blob = bytearray(vault.seal(SECRET, CTX))
    blob[-1] ^= 1
    with pytest.raises(SealError):
        vault.open(bytes(blob), vault.key_id, CTX)
    other = Vault(MasterKey(os.urandom(32)))
    with pytest.raises(SealError, match="does not hold"):
        other.open(vault.seal(SECRET, CTX), vault.key_id, CTX)
    with pytest.raises(SealError, match="version"):
        vault.open(b"\x09" + bytes(blob[1:]), vault.key_id, CTX)


def test_a_vault_opens_with_older_keys_and_seals_with_the_current() -> None:
    old, new = MasterKey(os.urandom(32)), MasterKey(os.urandom(32))
    blob = Vault(old).seal(SECRET, CTX)
    ring = Vault(new, [old])
    assert ring.open(blob, old.id, CTX) == SECRET
    assert ring.key_id == new.id


def test_key_reprs_never_show_material() -> None:
    key = MasterKey(b"\x01" * 32)
    for text in (repr(key), str(key), repr(Vault(key))):
        assert "\\x01" not in text and base64.b64encode(b"\x01" * 32).decode() not in text


class NoBlobs:
    """`providers.Blobs` of a store that keeps no wrapped key."""

    async def get(self, name: str) -> bytes | None:
        return None

    async def put(self, name: str, blob: bytes) -> None:
        raise AssertionError("nothing is stored here")

    async def delete(self, name: str) -> None:
        raise AssertionError("nothing is stored here")


def test_key_file_is_created_0600_once(tmp_path: Path) -> None:
    provider = FileKeyProvider(tmp_path / "d" / "master.key", NoBlobs())
    with pytest.raises(StartupError, match="missing"):
        asyncio.run(provider.load(create=False))
    key = asyncio.run(provider.load(create=True))
    assert provider.path.stat().st_mode & 0o777 == 0o600
    assert asyncio.run(provider.load(create=True)) == key  # an existing file is never replaced
    provider.path.chmod(0o644)
    with pytest.raises(StartupError, match="chmod 600"):
        asyncio.run(provider.load(create=False))


@pytest.mark.parametrize(
    ("value", "needle"),
    [("not base64!", "base64"), (base64.b64encode(b"short").decode(), "32 bytes")],
)
def test_bad_environment_keys_say_why_without_echo(value: str, needle: str) -> None:
    with pytest.raises(StartupError, match=needle) as info:
        asyncio.run(EnvKeyProvider(value, "", NoBlobs()).load(create=False))
    assert value not in str(info.value)
