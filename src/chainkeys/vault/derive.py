"""Keys derived from the master key (or the integrity key) for purposes other than sealing.

HKDF-SHA256 with a purpose label, so each use gets an independent key and
none of them is the master key itself. Cursors are made with the key that
seals now and opened with any key the barrier holds, so a page cursor made
before a rotation, or by another replica, still works.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from typing import Protocol

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from chainkeys.vault.providers import MasterKey


class Keys(Protocol):
    """What cursors ask of the barrier (vault/barrier.py): the key that seals now and
    every key held."""

    @property
    def current(self) -> MasterKey: ...

    def held(self) -> list[MasterKey]: ...


def derive(master: MasterKey, purpose: str) -> bytes:
    """A 32-byte key for `purpose`, derived from `master` (HKDF-SHA256)."""
    return subkey(master.material, purpose)


def subkey(material: bytes, purpose: str) -> bytes:
    """A 32-byte key for `purpose`, derived from the key `material` (HKDF-SHA256): one
    purpose's key tells nothing of `material` or of another purpose's."""
    hkdf = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=purpose.encode())
    return hkdf.derive(material)


class Cursors:
    """Opaque, scoped page cursors: one AES block over (row id, scope digest).

    A cursor reveals no row id, and one made for another tenant, family or list
    (or altered, or made up) does not decode: `open` returns None.
    """

    def __init__(self, keys: Keys) -> None:
        self._keys = keys
        self._ciphers: dict[str, Cipher[modes.ECB]] = {}

    def _aes(self, key: MasterKey) -> Cipher[modes.ECB]:
        found = self._ciphers.get(key.id)
        if found is None:
            material = derive(key, "chainkeys cursor v1")
            found = self._ciphers[key.id] = Cipher(algorithms.AES(material), modes.ECB())  # noqa: S305 - one block: a keyed permutation
        return found

    @staticmethod
    def _scope(scope: str) -> bytes:
        return hashlib.sha256(scope.encode()).digest()[:8]

    def make(self, row_id: int, scope: str) -> str:
        block = row_id.to_bytes(8, "big") + self._scope(scope)
        enc = self._aes(self._keys.current).encryptor()
        return base64.urlsafe_b64encode(enc.update(block) + enc.finalize()).decode().rstrip("=")

    def open(self, cursor: str, scope: str) -> int | None:
        try:
            raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        except (binascii.Error, ValueError):
            return None
        if len(raw) != 16:
            return None
        want = self._scope(scope)
        for key in self._keys.held():
            dec = self._aes(key).decryptor()
            block = dec.update(raw) + dec.finalize()
            if block[8:] == want:
                row_id = int.from_bytes(block[:8], "big")
                return row_id if row_id < 2**63 else None
        return None
