# mypy: disable-error-code="import-untyped"
"""What the Cosmos signers share: strict protobuf and amount reading, the chain check,
the signature shape, and the document each signer prepares (`CosmosDoc`)."""

from __future__ import annotations

import base64
import binascii
import hashlib
import json  # the standard library's on purpose: JSON.stringify's escapes; a lenient read
import re
from dataclasses import dataclass
from typing import Any, Final

from cosmospy_protobuf.cosmos.tx.v1beta1 import tx_pb2
from google.protobuf import any_pb2
from google.protobuf.message import DecodeError, Message

from chainkeys.chains.encoding import is_bech32
from chainkeys.chains.spec import Key, Unit, Units
from chainkeys.chains.tx.base import (
    INVALID_AMOUNT,
    MAX_AMOUNT,
    Amount,
    Ibc,
    Owner,
    Signed,
    Summary,
    refuse,
)
from chainkeys.chains.tx.ecdsa import sign_compact

SEND = "/cosmos.bank.v1beta1.MsgSend"
IBC = "/ibc.applications.transfer.v1.MsgTransfer"
PUBKEY = "/cosmos.crypto.secp256k1.PubKey"
U64 = 2**64
MAX_DEPTH = 32  # JSON nesting an amino document may have (a deeper one is refused unread)
# The SDK's denom rule (types/coin.go): a letter, then 2-127 of letters, digits, /:._-
DENOM = re.compile(r"[a-zA-Z][a-zA-Z0-9/:._-]{2,127}")


def pack_any(type_url: str, msg: Any) -> any_pb2.Any:
    """A protobuf message in an Any, serialised deterministically (the bytes signed)."""
    return any_pb2.Any(type_url=type_url, value=msg.SerializeToString(deterministic=True))


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def unb64(text: str, what: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise refuse(f"{what} is not standard base64") from None


def parse(kind: type[Message], data: bytes, what: str) -> Any:
    """Protobuf bytes read strictly: canonical encoding, and no field (at any depth)
    that the compiled type does not know. `Any` values inside stay bytes: callers
    unpack each one with this function too."""
    msg = kind()
    try:
        msg.ParseFromString(data)
    except (DecodeError, RecursionError, ValueError):
        raise refuse(f"{what} is not a valid protobuf message") from None
    if msg.SerializeToString(deterministic=True) != data:
        raise refuse(f"{what} is not canonically encoded (fields out of order or repeated)")
    msg.DiscardUnknownFields()  # recursive: what is left is what this decoder reads
    if msg.SerializeToString(deterministic=True) != data:
        raise refuse(
            f"{what} holds a protobuf field this signer does not read; it is "
            "refused rather than signed unread"
        )
    return msg


def integer(text: Any, what: str, bound: int = MAX_AMOUNT) -> int:
    """An exact non-negative integer below `bound`, given as a decimal string."""
    if not isinstance(text, str) or not text.isascii() or not text.isdigit() or len(text) > 80:
        raise refuse(f"{what} must be a whole number as a decimal string", INVALID_AMOUNT)
    value = int(text)
    if value >= bound:
        raise refuse(f"{what} is out of range", INVALID_AMOUNT)
    return value


def denom(text: Any, what: str) -> str:
    if not isinstance(text, str) or not DENOM.fullmatch(text):
        raise refuse(f"{what} is not a valid denom", INVALID_AMOUNT)
    return text


# The display units of the networks' staking denoms (as their chain registries list them);
# a Cosmos denom names its own smallest unit (uatom), and another denom (an IBC voucher,
# a token factory's) is shown in that unit only.
UNITS: Final = Units(
    {
        denom: Unit(denom, display, 6)
        for denom, display in (
            ("uatom", "ATOM"),
            ("uosmo", "OSMO"),
            ("ujuno", "JUNO"),
            ("uakt", "AKT"),
            ("ustars", "STARS"),
            ("utia", "TIA"),
        )
    }
)


def amount(denom_: str, value: int) -> Amount:
    """An exact Amount, with its display unit when the denom is a known one."""
    return Amount.of(denom_, value, UNITS.of(denom_))


def coin(c: Any, what: str) -> Amount:
    """A Coin (protobuf or amino JSON) as an exact Amount."""
    if isinstance(c, dict):
        if set(c) != {"denom", "amount"}:
            raise refuse(f"{what} must be exactly {{denom, amount}}")
        return amount(denom(c["denom"], f"{what}.denom"), integer(c["amount"], f"{what}.amount"))
    return amount(denom(c.denom, f"{what}.denom"), integer(c.amount, f"{what}.amount"))


# ICS-024 identifiers: a port of 2-128 of these; a transfer channel is channel-<n>.
PORT = re.compile(r"[A-Za-z0-9.\_+\-#\[\]<>]{2,128}")
CHANNEL = re.compile(r"channel-(0|[1-9][0-9]{0,18})")


def recipient(text: str, what: str) -> str:
    """A bech32 address (of any chain: an IBC receiver is the other chain's) in the one
    form every chain compares: lower case. BIP-173 reads an all-upper-case address as
    the same address and a mixed-case one as none, so a policy's allow-list and its
    conditions see one spelling of a recipient, whichever the request used."""
    if not is_bech32(text):
        raise refuse(f"{what} is not a bech32 address", "invalid_recipient")
    return text.lower()


def ibc_packet(
    channel: str,
    port: str,
    receiver: str,
    height: tuple[int, int] | None,
    timestamp: int | None,
    what: str,
) -> Ibc:
    """Where an IBC transfer sends funds, checked: an ICS-024 channel and port, and a
    receiver that is a bech32 address (of any chain: the prefix is the other chain's)."""
    if CHANNEL.fullmatch(channel) is None:
        raise refuse(f"{what}: the source channel is not channel-<number>", "invalid_ibc")
    if PORT.fullmatch(port) is None:
        raise refuse(f"{what}: the source port is not an ICS-024 identifier", "invalid_ibc")
    if not is_bech32(receiver):
        raise refuse(f"{what}: the receiver is not a bech32 address", "invalid_recipient")
    shown = None if height is None or height == (0, 0) else f"{height[0]}-{height[1]}"
    return Ibc(channel, port, shown, timestamp or None)


def coins(items: Any, what: str) -> tuple[Amount, ...]:
    if not isinstance(items, list):
        raise refuse(f"{what} must be a list of {{denom, amount}}")
    return tuple(coin(c, f"{what}[{i}]") for i, c in enumerate(items))


def cosmos_sign_bytes(data: bytes) -> bool:
    """Whether `data` reads as what a Cosmos transaction signature signs: a SignDoc
    with a body, or an amino StdSignDoc. Lenient on purpose: another family's raw
    message signer refuses anything that might be one (`never_sign`)."""
    if data[:1] == b"{":
        try:
            doc = json.loads(data)
        except (ValueError, RecursionError):
            return False
        return isinstance(doc, dict) and "msgs" in doc and "chain_id" in doc
    doc = tx_pb2.SignDoc()
    body = tx_pb2.TxBody()
    try:
        doc.ParseFromString(data)
        body.ParseFromString(doc.body_bytes)
    except (DecodeError, RecursionError, ValueError):
        return False
    return bool(doc.chain_id) and len(body.messages) > 0


def never_sign(data: bytes) -> str | None:
    """What a raw message signer must never sign (spec.py `NeverSign`): a Cosmos
    transaction signature is over sha256 of its sign document, so a signer that signs
    sha256(data) would sign the transaction when handed the document."""
    if cosmos_sign_bytes(data):
        return "data is a Cosmos sign document: its signature would sign that transaction"
    return None


def check_chain(chain_id: str, owner: Owner) -> None:
    if chain_id != owner.network.chain_id:
        raise refuse(
            f"chain id does not match the account's network {owner.network.name} "
            f"(expected {owner.network.chain_id})",
            "wrong_chain",
        )


def std_signature(owner: Owner, signature: bytes) -> dict[str, Any]:
    return signature_of(owner.public_key, signature)


def signature_of(public_key: bytes, signature: bytes) -> dict[str, Any]:
    """The amino StdSignature: the signer's key and its 64-byte signature, base64."""
    return {
        "pub_key": {"type": "tendermint/PubKeySecp256k1", "value": b64(public_key)},
        "signature": b64(signature),
    }


def sign_bytes(key: Key, message: bytes) -> bytes:
    return sign_compact(key.secret, hashlib.sha256(message).digest())


def own(sender: str, owner: Owner, what: str) -> None:
    if sender != owner.address:
        raise refuse(f"{what} is not this account", "not_owner")


@dataclass(frozen=True, slots=True)
class CosmosDoc:
    summary: Summary
    message: bytes  # the exact bytes signed (their sha256 is the ECDSA digest)
    respond: Any  # (signature) -> Signed

    cosigned: Any = None  # (the members' StdSignatures) -> Signed; None: no multisig here

    def sign(self, key: Key) -> Signed:
        result: Signed = self.respond(sign_bytes(key, self.message))
        return result

    def cosign(self, keys: list[Key]) -> Signed:
        """A multisig's held members each sign the same bytes."""
        if self.cosigned is None or not keys:
            raise refuse(
                "this request is not signed by a multisig's members", "multisig_unsupported"
            )
        sigs = [signature_of(k.public, sign_bytes(k, self.message)) for k in keys]
        result: Signed = self.cosigned(sigs)
        return result
