"""Core's `signmessage`: the coin's magic, double SHA-256, a 65-byte compact signature.

The header byte says how to find the address from the recovered key: 27 + recid
(+4 for a compressed key) for P2PKH, and BIP137's 35 + recid for P2SH-P2WPKH and
39 + recid for P2WPKH addresses.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass

import msgspec

from chainkeys.chains.spec import Key
from chainkeys.chains.tx.base import Owner, Signed, SignKind, Summary, bounded_message
from chainkeys.chains.tx.ecdsa import sign_recoverable
from chainkeys.chains.tx.fields import MESSAGE_TEXT
from chainkeys.chains.tx.utxo.params import PARAMS

HEADER_BASE = {"p2pkh": 31, "p2sh-p2wpkh": 35, "p2wpkh": 39}  # compressed keys


def varint(n: int) -> bytes:
    if n < 0xFD:
        return bytes((n,))
    if n <= 0xFFFF:
        return b"\xfd" + n.to_bytes(2, "little")
    return b"\xfe" + n.to_bytes(4, "little")


def message_hash(magic: str, message: bytes) -> bytes:
    data = varint(len(magic)) + magic.encode() + varint(len(message)) + message
    return hashlib.sha256(hashlib.sha256(data).digest()).digest()


class UtxoMessageRequest(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    # Core signs any length; a custody service need not: the decoder refuses a longer
    # one before anything is hashed (the bound: what the default body cap carries)
    message: MESSAGE_TEXT


class UtxoMessageResponse(msgspec.Struct, kw_only=True):
    signature: str  # base64 of the 65-byte compact signature, as Core returns it


@dataclass(frozen=True, slots=True)
class _MessageDigest:
    summary: Summary
    digest: bytes
    header_base: int

    def sign(self, key: Key) -> Signed:
        rs, recid = sign_recoverable(key.secret, self.digest)
        signature = bytes((self.header_base + recid,)) + rs
        return Signed(UtxoMessageResponse(signature=base64.b64encode(signature).decode()))


def prepare_message(req: UtxoMessageRequest, owner: Owner) -> _MessageDigest:
    bounded_message(req.message)  # a request built without the decoder
    params = PARAMS[owner.family]
    digest = message_hash(params.magic, req.message.encode())
    compressed = len(owner.public_key) == 33
    header = HEADER_BASE[owner.address_type or "p2pkh"] if compressed else 27
    summary = Summary(
        owner.family,
        owner.network.name,
        "sign-message",
        None,
        (),
        (),
        digest.hex(),
        raw=True,
        message=req.message.encode(),
    )
    return _MessageDigest(summary, digest, header)


KIND = SignKind(
    "sign-message",
    ("dogecoin", "litecoin"),
    UtxoMessageRequest,
    UtxoMessageResponse,
    prepare_message,
    "sign a message (Core signmessage; BIP137 headers for segwit)",
    "The coin's message magic, double SHA-256; the base64 65-byte compact signature.",
    {"core": {"message": "I own this address"}},
)
