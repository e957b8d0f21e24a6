# mypy: disable-error-code="import-untyped"
"""Moon's Cosmos transfers: `sign-transfer` (bank MsgSend) and `sign-ibc-transfer`
(ibc-go MsgTransfer), built here and signed SIGN_MODE_DIRECT, ready to broadcast.

The request is Moon's `CosmosTransferInput` / `CosmosIBCTransferInput`; counts
are JSON integers (a float is refused) and amounts decimal strings. The answer
is Moon's `{signedTx, txHash}`: base64 TxRaw and its upper-case sha256.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Final

import msgspec
from cosmospy_protobuf.cosmos.bank.v1beta1 import tx_pb2 as bank
from cosmospy_protobuf.cosmos.base.v1beta1 import coin_pb2
from cosmospy_protobuf.cosmos.crypto.secp256k1 import keys_pb2
from cosmospy_protobuf.cosmos.tx.signing.v1beta1 import signing_pb2
from cosmospy_protobuf.cosmos.tx.v1beta1 import tx_pb2
from cosmospy_protobuf.ibc.applications.transfer.v1 import tx_pb2 as ibc
from msgspec import Meta

from chainkeys.chains.cosmos import FAMILY as COSMOS
from chainkeys.chains.spec import Key
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
    check_chain,
    denom,
    ibc_packet,
    integer,
    pack_any,
    recipient,
    sign_bytes,
)
from chainkeys.chains.tx.cosmos.common import (
    amount as amount_of,
)
from chainkeys.chains.tx.fields import DENOM, DIGITS, UINT64


class CosmosTransferInput(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    codes: ClassVar = dict.fromkeys(
        (
            "amount",
            "denom",
            "feeAmount",
            "feeDenom",
            "sequence",
            "accountNumber",
            "gasLimit",
            "timeoutHeight",
            "timeoutTimestamp",
        ),
        INVALID_AMOUNT,
    )

    fromAddress: Annotated[str, Meta(description="this account's address")]
    toAddress: Annotated[str, Meta(min_length=1, max_length=128)]
    amount: DIGITS
    denom: DENOM
    chainId: Annotated[str, Meta(description="the account's network's chain id")]
    sequence: UINT64
    accountNumber: UINT64
    feeDenom: DENOM
    feeAmount: DIGITS
    gasLimit: UINT64
    memo: str = ""
    timeoutHeight: UINT64 = 0


class CosmosIBCTransferInput(CosmosTransferInput, kw_only=True, forbid_unknown_fields=True):
    sourcePort: str = "transfer"
    sourceChannel: Annotated[str, Meta(pattern=r"^channel-[0-9]{1,20}\Z")]
    timeoutTimestamp: Annotated[
        int,
        Meta(
            ge=1,
            extra_json_schema={"maximum": 2**64 - 1},
            description="nanoseconds since the epoch",
        ),
    ]


class CosmosTransactionResponse(msgspec.Struct, kw_only=True):
    signedTx: str
    txHash: str


def _counts(req: CosmosTransferInput) -> None:
    for name in ("sequence", "accountNumber", "gasLimit", "timeoutHeight"):
        if not 0 <= getattr(req, name) < U64:
            raise refuse(f"{name} must be a whole number from 0 to 2^64-1", INVALID_AMOUNT)


@dataclass(frozen=True, slots=True)
class _TransferDoc:
    summary: Summary
    body: bytes
    auth: bytes
    sign_doc: bytes

    def sign(self, key: Key) -> Signed:
        raw = tx_pb2.TxRaw(
            body_bytes=self.body,
            auth_info_bytes=self.auth,
            signatures=[sign_bytes(key, self.sign_doc)],
        ).SerializeToString(deterministic=True)
        tx_hash = hashlib.sha256(raw).hexdigest().upper()
        return Signed(
            CosmosTransactionResponse(signedTx=base64.b64encode(raw).decode(), txHash=tx_hash),
            tx_hash,
        )


def _prepare(req: CosmosTransferInput, owner: Owner, kind: str) -> _TransferDoc:
    check_chain(req.chainId, owner)
    _counts(req)
    if req.fromAddress != owner.address:
        raise refuse("fromAddress is not this account's address", "not_owner")
    amount = integer(req.amount, "amount")
    fee = integer(req.feeAmount, "feeAmount")
    denom(req.denom, "denom")
    denom(req.feeDenom, "feeDenom")
    coin = coin_pb2.Coin(denom=req.denom, amount=str(amount))
    if isinstance(req, CosmosIBCTransferInput):
        if not 0 < len(req.toAddress) <= 128 or not req.sourceChannel.startswith("channel-"):
            raise refuse("an IBC transfer needs a receiver and a sourceChannel like channel-0")
        if not 0 < req.timeoutTimestamp < U64:
            raise refuse("timeoutTimestamp must be nanoseconds since the epoch", INVALID_AMOUNT)
        transfer = ibc.MsgTransfer(
            source_port=req.sourcePort,
            source_channel=req.sourceChannel,
            token=coin,
            sender=owner.address,
            receiver=req.toAddress,
            timeout_timestamp=req.timeoutTimestamp,
        )
        transfer.timeout_height.SetInParent()  # an empty Height, as cosmjs and Keplr send
        msg = pack_any(IBC, transfer)
        packet = ibc_packet(
            req.sourceChannel,
            req.sourcePort,
            req.toAddress,
            None,
            req.timeoutTimestamp,
            "the IBC transfer",
        )
        item = Item(
            IBC, recipient(req.toAddress, "toAddress"), (amount_of(req.denom, amount),), ibc=packet
        )
    else:
        try:
            to = COSMOS.check_address(req.toAddress, owner.network)
        except ValueError:
            raise refuse(
                f"toAddress is not an address of {owner.network.name} (prefix {owner.network.hrp})",
                "wrong_chain",
            ) from None
        msg = pack_any(SEND, bank.MsgSend(from_address=owner.address, to_address=to, amount=[coin]))
        item = Item(SEND, to, (amount_of(req.denom, amount),))
    body = tx_pb2.TxBody(messages=[msg], memo=req.memo, timeout_height=req.timeoutHeight)
    signer = tx_pb2.SignerInfo(
        public_key=pack_any(PUBKEY, keys_pb2.PubKey(key=owner.public_key)),
        mode_info=tx_pb2.ModeInfo(single=tx_pb2.ModeInfo.Single(mode=signing_pb2.SIGN_MODE_DIRECT)),
        sequence=req.sequence,
    )
    fee_coin = coin_pb2.Coin(denom=req.feeDenom, amount=str(fee))
    auth = tx_pb2.AuthInfo(
        signer_infos=[signer], fee=tx_pb2.Fee(amount=[fee_coin], gas_limit=req.gasLimit)
    )
    body_bytes = body.SerializeToString(deterministic=True)
    auth_bytes = auth.SerializeToString(deterministic=True)
    sign_doc = tx_pb2.SignDoc(
        body_bytes=body_bytes,
        auth_info_bytes=auth_bytes,
        chain_id=req.chainId,
        account_number=req.accountNumber,
    ).SerializeToString(deterministic=True)
    summary = Summary(
        "cosmos",
        owner.network.name,
        kind,
        req.chainId,
        (item,),
        (amount_of(req.feeDenom, fee),),
        hashlib.sha256(sign_doc).hexdigest(),
        memo=req.memo,
    )
    return _TransferDoc(summary, body_bytes, auth_bytes, sign_doc)


def prepare_transfer(req: CosmosTransferInput, owner: Owner) -> _TransferDoc:
    return _prepare(req, owner, "sign-transfer")


def prepare_ibc_transfer(req: CosmosIBCTransferInput, owner: Owner) -> _TransferDoc:
    return _prepare(req, owner, "sign-ibc-transfer")


# an approval request for a transfer, as the API shows one (the OpenAPI example)
APPROVAL_EXAMPLE: Final[dict[str, Any]] = {
    "account": "cosmos1w508d6qejxtdg4y5r3zarvary0c5xw7k6ah60c",
    "summary": {
        "family": "cosmos",
        "network": "cosmoshub",
        "kind": "sign-transfer",
        "chain_id": "cosmoshub-4",
        "memo": "payout 7",
        "raw": False,
        "digest": "1fb1a5dee5fcb6b2c2f6a38efea23ad623c57d50c5773b63434b8958b36780a1",
        "items": [
            {
                "type": "/cosmos.bank.v1beta1.MsgSend",
                "recipient": "cosmos1q6hag67dl53wl99vzg42z8eyzfz2xlkvsrxukv",
                "amounts": [
                    {
                        "denom": "uatom",
                        "amount": "1500000",
                        "base_unit": "uatom",
                        "display": "1.5 ATOM",
                    }
                ],
            }
        ],
        "fee": [
            {"denom": "uatom", "amount": "5000", "base_unit": "uatom", "display": "0.005 ATOM"}
        ],
    },
}


KINDS: tuple[SignKind, ...] = (
    SignKind(
        "sign-transfer",
        ("cosmos",),
        CosmosTransferInput,
        CosmosTransactionResponse,
        prepare_transfer,
        "build and sign a bank MsgSend (Moon's sign-transfer)",
        "SIGN_MODE_DIRECT; the answer is a base64 TxRaw ready to broadcast and its hash.",
        {
            "moon": {
                "fromAddress": "cosmos1…",
                "toAddress": "cosmos1…",
                "amount": "1000",
                "denom": "uatom",
                "chainId": "cosmoshub-4",
                "sequence": 0,
                "accountNumber": 12345,
                "feeDenom": "uatom",
                "feeAmount": "5000",
                "gasLimit": 200000,
                "memo": "",
                "timeoutHeight": 0,
            }
        },
        approval_example=APPROVAL_EXAMPLE,
    ),
    SignKind(
        "sign-ibc-transfer",
        ("cosmos",),
        CosmosIBCTransferInput,
        CosmosTransactionResponse,
        prepare_ibc_transfer,
        "build and sign an ibc-go MsgTransfer (Moon's sign-ibc-transfer)",
        "The timeout is timeoutTimestamp (ns); timeoutHeight is the transaction's own.",
        {
            "moon": {
                "fromAddress": "cosmos1…",
                "toAddress": "osmo1…",
                "amount": "1000",
                "denom": "uatom",
                "chainId": "cosmoshub-4",
                "sequence": 0,
                "accountNumber": 12345,
                "feeDenom": "uatom",
                "feeAmount": "5000",
                "gasLimit": 200000,
                "memo": "",
                "timeoutHeight": 0,
                "sourcePort": "transfer",
                "sourceChannel": "channel-141",
                "timeoutTimestamp": 1800000000000000000,
            }
        },
    ),
)
