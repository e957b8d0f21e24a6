# mypy: disable-error-code="import-untyped"
"""Cosmos multisig: a `LegacyAminoPubKey` threshold key, and the transaction its
members' amino signatures make.

The members are sorted as cosmjs `createMultisigThresholdPubkey` sorts them by
default (by the address bytes of each key, as `keys add --multisig` does), so the
same keys in any order are the same account; its address is the first 20 bytes
of the sha256 of the key's amino encoding (cosmjs `pubkeyToRawAddress`). A
multisig signs SIGN_MODE_LEGACY_AMINO_JSON (what cosmjs and the SDK CLI use for
it): each member signs the same StdSignDoc, and `combine` assembles the TxRaw as
cosmjs `makeMultisignedTx` does: the body from the document's messages, one
signer info with the threshold key and a bit array of who signed, and one
`MultiSignature` holding the signatures in the key's order. Every signature is
verified before it goes in; a transaction the chain would reject is not built.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from cosmospy_protobuf.cosmos.bank.v1beta1 import tx_pb2 as bank
from cosmospy_protobuf.cosmos.base.v1beta1 import coin_pb2
from cosmospy_protobuf.cosmos.crypto.multisig import keys_pb2 as multisig_keys
from cosmospy_protobuf.cosmos.crypto.multisig.v1beta1 import multisig_pb2
from cosmospy_protobuf.cosmos.crypto.secp256k1 import keys_pb2
from cosmospy_protobuf.cosmos.tx.signing.v1beta1 import signing_pb2
from cosmospy_protobuf.cosmos.tx.v1beta1 import tx_pb2
from cosmospy_protobuf.ibc.applications.transfer.v1 import tx_pb2 as ibc
from google.protobuf import any_pb2

from chainkeys.chains import encoding
from chainkeys.chains.spec import ChainError, Network
from chainkeys.chains.tx.base import refuse
from chainkeys.chains.tx.cosmos.common import IBC, PUBKEY, SEND, pack_any
from chainkeys.chains.tx.ecdsa import verify_compact
from chainkeys.chains.tx.threshold import INVALID, members

LEGACY_AMINO_PUBKEY: Final = "/cosmos.crypto.multisig.LegacyAminoPubKey"
_SECP_PREFIX: Final = bytes.fromhex("eb5ae987")
_MULTISIG_PREFIX: Final = bytes.fromhex("22c1f7e2")


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


@dataclass(frozen=True, slots=True)
class CosmosMultisig:
    threshold: int
    keys: tuple[bytes, ...]  # compressed, in cosmjs' order
    address_type: str = "multisig"

    def amino(self) -> bytes:
        """cosmjs `encodeAminoPubkey` of the threshold key."""
        out = _MULTISIG_PREFIX + b"\x08" + _uvarint(self.threshold)
        for key in self.keys:
            member = _SECP_PREFIX + b"\x21" + key
            out += b"\x12" + _uvarint(len(member)) + member
        return out

    def address(self, network: Network) -> str:
        hrp = encoding.network_param(network.hrp, network, "bech32 prefix")
        return encoding.bech32_encode(hrp, hashlib.sha256(self.amino()).digest()[:20])

    def pubkey_json(self) -> dict[str, Any]:
        """The amino JSON of the key (`tendermint/PubKeyMultisigThreshold`)."""
        members = [
            {"type": "tendermint/PubKeySecp256k1", "value": base64.b64encode(k).decode()}
            for k in self.keys
        ]
        return {
            "type": "tendermint/PubKeyMultisigThreshold",
            "value": {"threshold": str(self.threshold), "pubkeys": members},
        }

    def descriptor(self) -> str | None:
        return None  # output descriptors are a Bitcoin notion

    def public_json(self) -> dict[str, Any]:
        return self.pubkey_json()

    def proto(self) -> any_pb2.Any:
        keys = [pack_any(PUBKEY, keys_pb2.PubKey(key=k)) for k in self.keys]
        return pack_any(
            LEGACY_AMINO_PUBKEY,
            multisig_keys.LegacyAminoPubKey(threshold=self.threshold, public_keys=keys),
        )


def parse_cosmos_multisig(threshold: object, public_keys: Sequence[object]) -> CosmosMultisig:
    """The threshold key of these members, or a refusal that says why.

    Raises:
        ChainError: code "invalid_multisig".
    """
    m, keys = members(threshold, public_keys)
    return CosmosMultisig(m, tuple(sorted(keys, key=encoding.hash160)))


def register(
    threshold: object, public_keys: Sequence[object], address_type: str | None, network: Network
) -> CosmosMultisig:
    """A registration's threshold key; it has one form, so no address type is named."""
    if address_type is not None:
        raise ChainError("a Cosmos multisig is a LegacyAminoPubKey: no address_type", INVALID)
    return parse_cosmos_multisig(threshold, public_keys)


def build(threshold: int, keys: Sequence[bytes], address_type: str) -> CosmosMultisig:
    """The threshold key of checked members, in cosmjs' order."""
    return CosmosMultisig(threshold, tuple(sorted(keys, key=encoding.hash160)))


def _bits(signed: Sequence[bool]) -> multisig_pb2.CompactBitArray:
    """cosmjs `makeCompactBitArray`: bit i is byte i/8's bit 7 - i%8."""
    elems = bytearray((len(signed) + 7) // 8)
    for i, on in enumerate(signed):
        if on:
            elems[i // 8] |= 1 << (7 - i % 8)
    return multisig_pb2.CompactBitArray(extra_bits_stored=len(signed) % 8, elems=bytes(elems))


def _message(msg: dict[str, Any]) -> any_pb2.Any:
    """An amino message as its protobuf (the kinds the amino signer reads in full)."""
    v = msg["value"]
    coins = [coin_pb2.Coin(denom=c["denom"], amount=c["amount"]) for c in v.get("amount", [])]
    if msg["type"] == "cosmos-sdk/MsgSend":
        return pack_any(
            SEND,
            bank.MsgSend(from_address=v["from_address"], to_address=v["to_address"], amount=coins),
        )
    if msg["type"] == "cosmos-sdk/MsgTransfer":
        t = ibc.MsgTransfer(
            source_port=v["source_port"],
            source_channel=v["source_channel"],
            token=coin_pb2.Coin(denom=v["token"]["denom"], amount=v["token"]["amount"]),
            sender=v["sender"],
            receiver=v["receiver"],
            timeout_timestamp=int(v.get("timeout_timestamp", "0")),
            memo=v.get("memo", ""),
        )
        height = v.get("timeout_height", {})
        t.timeout_height.revision_number = int(height.get("revision_number", "0"))
        t.timeout_height.revision_height = int(height.get("revision_height", "0"))
        return pack_any(IBC, t)
    raise refuse(
        "combine builds MsgSend and MsgTransfer only; assemble other messages with "
        "the coordinator (simd tx multisign, cosmjs)",
        "multisig_unsupported",
    )


def combine(
    ms: CosmosMultisig,
    doc: dict[str, Any],
    message: bytes,
    signatures: Sequence[tuple[bytes, bytes]],
) -> bytes:
    """The TxRaw of `doc` (an amino StdSignDoc the amino signer has read in full, whose
    sign bytes are `message`) signed by these (member key, signature) pairs.

    Raises:
        ChainError: "invalid_signature" for a key that is not a member, a signature that
            does not verify, or fewer valid signatures than the threshold.
    """
    by_key: dict[bytes, bytes] = {}
    for n, (key, sig) in enumerate(signatures):
        if key not in ms.keys:
            raise ChainError(
                f"signatures[{n}] is by a key that is not in this multisig", "invalid_signature"
            )
        if not verify_compact(key, sig, hashlib.sha256(message).digest()):
            raise ChainError(
                f"signatures[{n}] does not verify over the document's sign bytes",
                "invalid_signature",
            )
        by_key[key] = sig
    if len(by_key) < ms.threshold:
        raise ChainError(
            f"{len(by_key)} member signatures; this multisig needs {ms.threshold}",
            "invalid_signature",
        )
    body = tx_pb2.TxBody(
        messages=[_message(m) for m in doc["msgs"]],
        memo=doc["memo"],
        timeout_height=int(doc.get("timeout_height", "0")),
    )
    single = tx_pb2.ModeInfo.Single(mode=signing_pb2.SIGN_MODE_LEGACY_AMINO_JSON)
    signer = tx_pb2.SignerInfo(
        public_key=ms.proto(),
        mode_info=tx_pb2.ModeInfo(
            multi=tx_pb2.ModeInfo.Multi(
                bitarray=_bits([k in by_key for k in ms.keys]),
                mode_infos=[tx_pb2.ModeInfo(single=single) for _ in by_key],
            )
        ),
        sequence=int(doc["sequence"]),
    )
    fee = doc["fee"]
    paid = [coin_pb2.Coin(denom=c["denom"], amount=c["amount"]) for c in fee["amount"]]
    auth = tx_pb2.AuthInfo(
        signer_infos=[signer],
        fee=tx_pb2.Fee(
            amount=paid,
            gas_limit=int(fee["gas"]),
            payer=fee.get("payer", ""),
            granter=fee.get("granter", ""),
        ),
    )
    multi = multisig_pb2.MultiSignature(signatures=[by_key[k] for k in ms.keys if k in by_key])
    raw: bytes = tx_pb2.TxRaw(
        body_bytes=body.SerializeToString(deterministic=True),
        auth_info_bytes=auth.SerializeToString(deterministic=True),
        signatures=[multi.SerializeToString(deterministic=True)],
    ).SerializeToString(deterministic=True)
    return raw
