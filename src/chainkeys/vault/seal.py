"""AES-256-GCM sealing of secrets, bound to the record they belong to.

Format (version 1): 0x01 || nonce (12 bytes) || ciphertext+tag. The key id is
stored beside the blob so a master-key rotation can find what to re-seal.
The associated data names tenant, family and account, so a sealed key copied
into another row does not open.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from chainkeys.vault.providers import MasterKey

VERSION = 1
NONCE_BYTES = 12


class SealError(Exception):
    """A blob did not open: wrong key, wrong context, or tampered."""


@dataclass(frozen=True, slots=True)
class Context:
    """What a sealed secret belongs to; becomes the AES-GCM associated data."""

    tenant_id: str
    family: str
    name: str
    purpose: str = "account"

    def aad(self) -> bytes:
        parts = (f"chainkeys/v{VERSION}", self.purpose, self.tenant_id, self.family, self.name)
        return "\x00".join(parts).encode()


class Vault:
    """Seals with the current master key; opens with any key it holds.

    A running process's vault grows: a rotation adds the new key (`add`) and makes
    it the one that seals (`use`), without a restart (vault/barrier.py).
    """

    def __init__(self, current: MasterKey, others: Iterable[MasterKey] = ()) -> None:
        self.current = current
        self.root = current  # the key this process started from (its file, env or HSM)
        self._material: dict[str, MasterKey] = {}
        self._keys: dict[str, AESGCM] = {}
        for key in (current, *others):
            self.add(key)

    def __repr__(self) -> str:
        return f"Vault(current={self.current.id!r}, keys={sorted(self._keys)!r})"

    @property
    def key_id(self) -> str:
        return self.current.id

    def holds(self, key_id: str) -> bool:
        return key_id in self._keys

    def key(self, key_id: str) -> MasterKey:
        """A held key (KeyError if not held)."""
        return self._material[key_id]

    def held(self) -> list[MasterKey]:
        """Every key held, the current one first."""
        return [self.current, *(k for i, k in self._material.items() if i != self.current.id)]

    def add(self, key: MasterKey) -> None:
        if key.id not in self._keys:
            self._material[key.id] = key
            self._keys[key.id] = AESGCM(key.material)

    def use(self, key_id: str) -> None:
        """Seal with a held key from now on."""
        self.current = self._material[key_id]

    def seal(self, plaintext: bytes, context: Context) -> bytes:
        """Encrypt `plaintext` under the current key.

        Args:
            plaintext: the secret (e.g. a 32-byte private key).
            context: the record it is bound to.

        Returns:
            The versioned blob; store it with `self.key_id`.
        """
        nonce = os.urandom(NONCE_BYTES)
        sealed = self._keys[self.current.id].encrypt(nonce, plaintext, context.aad())
        return bytes((VERSION,)) + nonce + sealed

    def open(self, blob: bytes, key_id: str, context: Context) -> bytes:
        """Decrypt a blob sealed by `seal`.

        Raises:
            SealError: unknown key id, unknown version, wrong context or tampered data.
        """
        aes = self._keys.get(key_id)
        if aes is None:
            raise SealError(f"sealed with master key {key_id}, which this service does not hold")
        if not blob or blob[0] != VERSION:
            raise SealError("unknown sealed-data version")
        nonce, sealed = blob[1 : 1 + NONCE_BYTES], blob[1 + NONCE_BYTES :]
        try:
            return aes.decrypt(nonce, sealed, context.aad())
        except InvalidTag:
            raise SealError("sealed data does not open with this key and context") from None
