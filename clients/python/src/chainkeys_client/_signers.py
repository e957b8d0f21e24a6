"""The sign calls and their signers, one per sign endpoint: a `Call` (method, path,
body, the answer's type) and a `Signer` (the call plus the check of its answer:
_check_cosmos, _check_utxo, _check_eos). `Signing` (_signing.py) sends one at a time,
`sign_batch` (_batch.py) many in one request; both build on these, so an item of a
batch is checked exactly as its single request is."""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, TypeVar

from chainkeys_client import _check_cosmos as cosmos
from chainkeys_client import _check_eos as eos
from chainkeys_client import _check_utxo as utxo
from chainkeys_client._core import Call, data_as, family_segment, segment
from chainkeys_client._models import (
    CosmosAminoSigned,
    CosmosDirectSigned,
    CosmosIbcTransfer,
    CosmosMessageSigned,
    CosmosSignDoc,
    CosmosTransfer,
    CosmosTx,
    EosTransactionSigned,
    MessageSignature,
    PrevTx,
    PsbtSigned,
    RawTransactionSigned,
)
from chainkeys_client._signer import (
    Check,
    Signer,
    eos_key_call,
    no_key,
    with_key,
)

UtxoFamily = Literal["dogecoin", "litecoin"]
UTXO = ("dogecoin", "litecoin")
Json = Mapping[str, Any]
T = TypeVar("T")


def _sign(family: str, name: str, kind: str, body: Any, answer: type[Any]) -> Call[Any]:
    path = f"/{family_segment(family)}/{segment(name)}/{kind}"
    return Call("POST", path, data_as(answer), body=body, approvable=True)


def _hex(value: str | bytes) -> str:
    return value.hex() if isinstance(value, bytes | bytearray) else value


def _utxo(family: str) -> str:
    fam = family_segment(family)
    if fam not in UTXO:
        raise ValueError(f"{family} has no PSBT or raw-transaction signer (dogecoin, litecoin)")
    return fam


# ---- the calls ------------------------------------------------------------------------


def direct_call(name: str, sign_doc: CosmosSignDoc | Json) -> Call[CosmosDirectSigned]:
    return _sign("cosmos", name, "sign-direct", {"signDoc": sign_doc}, CosmosDirectSigned)


def amino_call(name: str, sign_doc: Json) -> Call[CosmosAminoSigned]:
    return _sign("cosmos", name, "sign-amino", {"signDoc": sign_doc}, CosmosAminoSigned)


def message_call(
    family: str, name: str, message: str | None, data: bytes | str | None
) -> Call[Any]:
    fam = family_segment(family)
    body: dict[str, Any]
    if (message is None) == (data is None):
        raise ValueError("give message (text) or data (bytes), one of them")
    if fam == "cosmos":
        if isinstance(data, bytes | bytearray):
            data = base64.b64encode(data).decode()
        body = {"message": message} if message is not None else {"data": data}
        return _sign(fam, name, "sign-message", body, CosmosMessageSigned)
    if fam == "eos":
        body = {"message": message} if message is not None else {"data": _hex(data or "")}
        return _sign(fam, name, "sign-message", body, MessageSignature)
    if data is not None:
        raise ValueError(f"{fam} signs text messages only (Core signmessage)")
    return _sign(fam, name, "sign-message", {"message": message}, MessageSignature)


def transfer_call(name: str, transfer: CosmosTransfer | Json) -> Call[CosmosTx]:
    return _sign("cosmos", name, "sign-transfer", transfer, CosmosTx)


def ibc_transfer_call(name: str, transfer: CosmosIbcTransfer | Json) -> Call[CosmosTx]:
    return _sign("cosmos", name, "sign-ibc-transfer", transfer, CosmosTx)


def psbt_call(family: str, name: str, psbt: str | bytes, finalize: bool) -> Call[PsbtSigned]:
    if isinstance(psbt, bytes | bytearray):
        psbt = base64.b64encode(psbt).decode()
    body = {"psbt": psbt, "finalize": finalize}
    return _sign(_utxo(family), name, "sign-psbt", body, PsbtSigned)


def raw_call(
    family: str, name: str, hex: str | bytes, prevtxs: Sequence[PrevTx | Json], sighashtype: str
) -> Call[RawTransactionSigned]:
    body = {"hex": _hex(hex), "prevtxs": list(prevtxs), "sighashtype": sighashtype}
    return _sign(_utxo(family), name, "sign-raw-transaction", body, RawTransactionSigned)


def eos_tx_call(
    name: str,
    chain_id: str,
    serialized_transaction: str | bytes,
    serialized_context_free_data: str | bytes | None,
) -> Call[EosTransactionSigned]:
    body: dict[str, Any] = {"chainId": chain_id,
                            "serializedTransaction": _hex(serialized_transaction)}  # fmt: skip
    if serialized_context_free_data is not None:
        body["serializedContextFreeData"] = _hex(serialized_context_free_data)
    return _sign("eos", name, "sign-transaction", body, EosTransactionSigned)


# ---- the signers: a call and the check of its answer -----------------------------------


def _eos_signer(
    call: Call[T], answer: type[T], name: str, public_key: str | None,
    make: Callable[[bytes], Check[T]],
) -> Signer[T]:  # fmt: skip
    if public_key is not None:
        return Signer(call, answer, with_key(make), key=eos.parse_public_key(public_key))
    return Signer(call, answer, with_key(make), lookup=eos_key_call(name))


def direct_signer(name: str, sign_doc: CosmosSignDoc | Json) -> Signer[CosmosDirectSigned]:
    check = cosmos.check_direct(name, sign_doc)
    return Signer(direct_call(name, sign_doc), CosmosDirectSigned, no_key(check))


def amino_signer(name: str, sign_doc: Json) -> Signer[CosmosAminoSigned]:
    check = cosmos.check_amino(name, sign_doc)
    return Signer(amino_call(name, sign_doc), CosmosAminoSigned, no_key(check))


def message_signer(
    family: str, name: str, message: str | None, data: bytes | str | None,
    public_key: str | None = None,
) -> Signer[Any]:  # fmt: skip
    call = message_call(family, name, message, data)
    fam = family_segment(family)
    if public_key is not None and fam != "eos":
        raise ValueError("public_key is for EOS accounts: other answers are checked against "
                         "the key the account's address names")  # fmt: skip
    if fam == "cosmos":
        return Signer(call, CosmosMessageSigned, no_key(cosmos.check_message(name, message, data)))
    if fam == "eos":
        return _eos_signer(call, MessageSignature, name, public_key,
                           lambda key: eos.check_message(name, key, message, data))  # fmt: skip
    check = utxo.check_message(fam, name, message or "")
    return Signer(call, MessageSignature, no_key(check))


def transfer_signer(name: str, transfer: CosmosTransfer | Json) -> Signer[CosmosTx]:
    check = cosmos.check_transfer(name, transfer, ibc=False)
    return Signer(transfer_call(name, transfer), CosmosTx, no_key(check))


def ibc_transfer_signer(name: str, transfer: CosmosIbcTransfer | Json) -> Signer[CosmosTx]:
    check = cosmos.check_transfer(name, transfer, ibc=True)
    return Signer(ibc_transfer_call(name, transfer), CosmosTx, no_key(check))


def psbt_signer(family: str, name: str, psbt: str | bytes, finalize: bool) -> Signer[PsbtSigned]:
    call = psbt_call(family, name, psbt, finalize)
    return Signer(call, PsbtSigned, no_key(utxo.check_psbt(name, psbt)))


def raw_signer(
    family: str, name: str, hex: str | bytes, prevtxs: Sequence[PrevTx | Json], sighashtype: str
) -> Signer[RawTransactionSigned]:
    call = raw_call(family, name, hex, prevtxs, sighashtype)
    return Signer(call, RawTransactionSigned, no_key(utxo.check_raw(name, hex, prevtxs)))


def eos_tx_signer(
    name: str, chain_id: str, serialized_transaction: str | bytes,
    serialized_context_free_data: str | bytes | None, public_key: str | None = None,
) -> Signer[EosTransactionSigned]:  # fmt: skip
    call = eos_tx_call(name, chain_id, serialized_transaction, serialized_context_free_data)
    return _eos_signer(call, EosTransactionSigned, name, public_key, lambda key: (
        eos.check_transaction(name, key, chain_id, serialized_transaction,
                              serialized_context_free_data)))  # fmt: skip


# ---- sync and async faces --------------------------------------------------------------
