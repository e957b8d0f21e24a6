# mypy: disable-error-code="import-untyped"
"""sign-direct: a cosmjs `SignDoc` (OfflineDirectSigner.signDirect), body and auth info
decoded strictly before anything is signed."""

from __future__ import annotations

import hashlib
from typing import Any, ClassVar

import msgspec
from cosmospy_protobuf.cosmos.bank.v1beta1 import tx_pb2 as bank
from cosmospy_protobuf.cosmos.crypto.secp256k1 import keys_pb2
from cosmospy_protobuf.cosmos.tx.v1beta1 import tx_pb2
from cosmospy_protobuf.ibc.applications.transfer.v1 import tx_pb2 as ibc

from chainkeys.chains.tx.base import (
    INVALID_AMOUNT,
    Item,
    Owner,
    Signed,
    SignKind,
    Summary,
    refuse,
)
from chainkeys.chains.tx.cosmos.common import (
    IBC,
    PUBKEY,
    SEND,
    U64,
    CosmosDoc,
    b64,
    check_chain,
    coin,
    coins,
    ibc_packet,
    integer,
    own,
    parse,
    recipient,
    std_signature,
    unb64,
)
from chainkeys.chains.tx.fields import BASE64, DIGITS


class CosmosDirectDoc(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """cosmjs `SignDoc` in proto3 JSON: bytes as base64, accountNumber a decimal string."""

    codes: ClassVar = {"accountNumber": INVALID_AMOUNT, "account_number": INVALID_AMOUNT}

    bodyBytes: BASE64 | None = None
    authInfoBytes: BASE64 | None = None
    chainId: str | None = None
    accountNumber: DIGITS | None = None
    body_bytes: BASE64 | None = None
    auth_info_bytes: BASE64 | None = None
    chain_id: str | None = None
    account_number: DIGITS | None = None

    def get(self, camel: str, snake: str) -> str:
        """The field in either casing; both at once is a refusal (one would go unread)."""
        first, second = getattr(self, camel), getattr(self, snake)
        if first is not None and second is not None:
            raise refuse(f"signDoc has both {camel} and {snake}: send one")
        value = first if first is not None else second
        if value is None:
            raise refuse(f"signDoc.{camel} is missing")
        return str(value)


class CosmosDirectRequest(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    codes: ClassVar = CosmosDirectDoc.codes

    signDoc: CosmosDirectDoc


class CosmosSignedDirectDoc(msgspec.Struct, kw_only=True):
    bodyBytes: str
    authInfoBytes: str
    chainId: str
    accountNumber: str


class CosmosDirectResponse(msgspec.Struct, kw_only=True):
    signed: CosmosSignedDirectDoc
    signature: dict[str, Any]


def body_items(body: Any, owner: Owner) -> tuple[Item, ...]:
    """Each message of a TxBody, decoded strictly when this signer knows its type."""
    if len(body.extension_options) or len(body.non_critical_extension_options):
        raise refuse("signDoc.bodyBytes carries extension options, which this signer does not read")
    items = []
    for n, any_msg in enumerate(body.messages):
        what = f"message {n} ({any_msg.type_url[:100]})"
        if any_msg.type_url == SEND:
            m = parse(bank.MsgSend, any_msg.value, what)
            own(m.from_address, owner, f"{what}: from_address")
            to = recipient(m.to_address, f"{what}: to_address")
            items.append(Item(SEND, to, coins(list(m.amount), f"{what}.amount")))
        elif any_msg.type_url == IBC:
            m = parse(ibc.MsgTransfer, any_msg.value, what)
            own(m.sender, owner, f"{what}: sender")
            height = (m.timeout_height.revision_number, m.timeout_height.revision_height)
            packet = ibc_packet(
                m.source_channel, m.source_port, m.receiver, height, m.timeout_timestamp, what
            )
            items.append(
                Item(
                    IBC,
                    recipient(m.receiver, f"{what}: receiver"),
                    (coin(m.token, f"{what}.token"),),
                    memo=m.memo,
                    ibc=packet,
                )
            )
        else:
            items.append(Item(any_msg.type_url, decoded=False))
    return tuple(items)


def signer_keys(auth: Any) -> list[bytes]:
    """The secp256k1 keys of every signer info; another key type is refused unread."""
    keys = []
    for n, info in enumerate(auth.signer_infos):
        type_url = info.public_key.type_url
        if type_url == PUBKEY:
            keys.append(parse(keys_pb2.PubKey, info.public_key.value, f"signer {n}'s key").key)
        elif type_url or info.public_key.value:
            raise refuse(
                f"signer {n}'s public key is a {type_url[:100]}, which this signer does not read"
            )
    return keys


def prepare_direct(req: CosmosDirectRequest, owner: Owner) -> CosmosDoc:
    doc = req.signDoc
    body_bytes = unb64(doc.get("bodyBytes", "body_bytes"), "signDoc.bodyBytes")
    auth_bytes = unb64(doc.get("authInfoBytes", "auth_info_bytes"), "signDoc.authInfoBytes")
    chain_id = doc.get("chainId", "chain_id")
    account_number = integer(doc.get("accountNumber", "account_number"), "accountNumber", U64)
    check_chain(chain_id, owner)
    body = parse(tx_pb2.TxBody, body_bytes, "signDoc.bodyBytes")
    auth = parse(tx_pb2.AuthInfo, auth_bytes, "signDoc.authInfoBytes")
    if owner.public_key not in signer_keys(auth):
        raise refuse("no signer info carries this account's public key", "not_owner")
    sign_doc = tx_pb2.SignDoc(
        body_bytes=body_bytes,
        auth_info_bytes=auth_bytes,
        chain_id=chain_id,
        account_number=account_number,
    ).SerializeToString(deterministic=True)
    summary = Summary(
        "cosmos",
        owner.network.name,
        "sign-direct",
        chain_id,
        body_items(body, owner),
        coins(list(auth.fee.amount), "fee.amount"),
        hashlib.sha256(sign_doc).hexdigest(),
        memo=body.memo,
    )
    signed = CosmosSignedDirectDoc(
        bodyBytes=b64(body_bytes),
        authInfoBytes=b64(auth_bytes),
        chainId=chain_id,
        accountNumber=str(account_number),
    )

    def respond(sig: bytes) -> Signed:
        return Signed(CosmosDirectResponse(signed=signed, signature=std_signature(owner, sig)))

    return CosmosDoc(summary, sign_doc, respond)


KIND = SignKind(
    "sign-direct",
    ("cosmos",),
    CosmosDirectRequest,
    CosmosDirectResponse,
    prepare_direct,
    "sign a SignDoc (cosmjs OfflineDirectSigner.signDirect)",
    "The body and auth info are decoded first: the chain id must be the account's "
    "network's, a signer info must carry this account's public key.",
    # a MsgSend of 1000 uatom from cosmos1w508…6ah60c (the key 1), fee 500 uatom
    {
        "cosmjs": {
            "signDoc": {
                "bodyBytes": (
                    "Co0BChwvY29zbW9zLmJhbmsudjFiZXRhMS5Nc2dTZW5kEm0KLWNvc21vczF3NTA4ZDZxZWp4dGRn"
                    "NHk1cjN6YXJ2YXJ5MGM1eHc3azZhaDYwYxItY29zbW9zMXF5cHF4cHE5cWNyc3N6ZzJwdnhxNnJz"
                    "MHpxZzN5eWM1bHp2N3h1Gg0KBXVhdG9tEgQxMDAw"
                ),
                "authInfoBytes": (
                    "Ck4KRgofL2Nvc21vcy5jcnlwdG8uc2VjcDI1NmsxLlB1YktleRIjCiECeb5mfvncu6xVoGKVzocL"
                    "BwKb/NstzijZWfKBWxb4F5gSBAoCCAESEgoMCgV1YXRvbRIDNTAwEMCaDA=="
                ),
                "chainId": "cosmoshub-4",
                "accountNumber": "12345",
            }
        }
    },
)
