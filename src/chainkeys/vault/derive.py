"""Keys derived from the master key for purposes other than sealing.

HKDF-SHA256 with a purpose label, so each use gets an independent key and
none of them is the master key itself. They change when the master key is
rotated (what they protect is short-lived: list cursors).
"""

from __future__ import annotations

import base64
import binascii
import hashlib

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from chainkeys.vault.providers import MasterKey


def derive(master: MasterKey, purpose: str) -> bytes:
    """A 32-byte key for `purpose`, derived from `master` (HKDF-SHA256)."""
    hkdf = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=purpose.encode())
    return hkdf.derive(master.material)


class Cursors:
    """Opaque, scoped page cursors: one AES block over (row id, scope digest).

    A cursor reveals no row id, and one made for another tenant, family or list
    (or altered, or made up) does not decode: `open` returns None.
    """

    def __init__(self, master: MasterKey) -> None:
        self._aes = Cipher(algorithms.AES(derive(master, "chainkeys cursor v1")), modes.ECB())  # noqa: S305 - one block: a keyed permutation

    @staticmethod
    def _scope(scope: str) -> bytes:
        return hashlib.sha256(scope.encode()).digest()[:8]

    def make(self, row_id: int, scope: str) -> str:
        block = row_id.to_bytes(8, "big") + self._scope(scope)
        enc = self._aes.encryptor()
        return base64.urlsafe_b64encode(enc.update(block) + enc.finalize()).decode().rstrip("=")

    def open(self, cursor: str, scope: str) -> int | None:
        try:
            raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        except (binascii.Error, ValueError):
            return None
        if len(raw) != 16:
            return None
        dec = self._aes.decryptor()
        block = dec.update(raw) + dec.finalize()
        if block[8:] != self._scope(scope):
            return None
        row_id = int.from_bytes(block[:8], "big")
        return row_id if row_id < 2**63 else None
