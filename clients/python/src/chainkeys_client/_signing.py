"""Signing: one method per sign endpoint, taking and returning its own JSON shape.

Sign requests are never retried automatically: the service signs
deterministically, but a repeat is still a second audited signature and may
count against a policy's caps (a retry of the same bytes is free only for
caps). Call again yourself if you want to. A request that needs approval
raises `ApprovalPending` (HTTP 202) with the approval id.

Every answer is checked before it is returned (`_check_cosmos`, `_check_utxo`,
`_check_eos`): a signature by another key, of another document or transaction, is
an `AnswerMismatch`, never a result. A `Signer` is a sign call plus the check of its
answer; EOS names no key, so its signer first looks the account's key up (unless
the caller gives `public_key=`). `ApprovalPending.check` carries the same check for
the result `approvals.wait(pending)` brings back.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, TypeVar, overload

from chainkeys_client import _check_cosmos as cosmos
from chainkeys_client import _check_eos as eos
from chainkeys_client import _check_utxo as utxo
from chainkeys_client._core import AsyncRunner, Call, SyncRunner, data_as, family_segment, segment
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
    sign,
    sign_async,
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


class Signing:
    """`client.signing`: every sign endpoint (token scope `sign`), each answer checked
    (AnswerMismatch) before it is returned."""

    def __init__(self, run: SyncRunner) -> None:
        self._run = run

    def sign_batch(
        self, family: str, name: str, items: Sequence[Json], *, public_key: str | None = None
    ) -> list[Any]:
        """Up to 1,000 of the account's sign requests in one request and one transaction:
        each item a sign endpoint's body plus `"kind"` (`sign-message`, `sign-psbt`, …).
        One result per item, in order: the value its method returns (checked as the
        method checks it), or the exception it would raise (`ApprovalPending` included),
        not raised. See `_batch.py`; `public_key`: as in sign_message (EOS)."""
        from chainkeys_client._batch import sign_batch  # (it builds on this module)

        return sign_batch(self._run, family, name, items, public_key)

    def _sign(self, signer: Signer[T]) -> T:
        return sign(self._run, signer)

    def sign_direct(self, name: str, sign_doc: CosmosSignDoc | Json) -> CosmosDirectSigned:
        """cosmjs `signDirect`: `{bodyBytes, authInfoBytes, chainId, accountNumber}`."""
        return self._sign(direct_signer(name, sign_doc))

    def sign_amino(self, name: str, sign_doc: Json) -> CosmosAminoSigned:
        """cosmjs `signAmino`: a StdSignDoc (all numbers as strings)."""
        return self._sign(amino_signer(name, sign_doc))

    @overload
    def sign_message(  # type: ignore[overload-overlap]
        self, family: Literal["cosmos"], name: str, message: str | None = None, *,
        data: bytes | str | None = None, public_key: str | None = None,
    ) -> CosmosMessageSigned: ...  # fmt: skip
    @overload
    def sign_message(
        self, family: str, name: str, message: str | None = None, *,
        data: bytes | str | None = None, public_key: str | None = None,
    ) -> MessageSignature: ...  # fmt: skip
    def sign_message(
        self, family: str, name: str, message: str | None = None, *,
        data: bytes | str | None = None, public_key: str | None = None,
    ) -> CosmosMessageSigned | MessageSignature:  # fmt: skip
        """Cosmos ADR-036 (`data`: bytes or base64), Core `signmessage` (text only),
        eosjs-ecc `sign` (`data`: bytes or hex). EOS: `public_key` (PUB_K1_… or EOS…)
        is the key the signature must recover to; without it the account is looked up."""
        result: CosmosMessageSigned | MessageSignature = self._sign(
            message_signer(family, name, message, data, public_key)
        )
        return result

    def sign_transfer(self, name: str, transfer: CosmosTransfer | Json) -> CosmosTx:
        return self._sign(transfer_signer(name, transfer))

    def sign_ibc_transfer(self, name: str, transfer: CosmosIbcTransfer | Json) -> CosmosTx:
        return self._sign(ibc_transfer_signer(name, transfer))

    def sign_psbt(
        self, family: str, name: str, psbt: str | bytes, *, finalize: bool = True
    ) -> PsbtSigned:
        """A BIP174 PSBT (base64 or bytes); `hex`/`txid` once every input is final."""
        return self._sign(psbt_signer(family, name, psbt, finalize))

    def sign_raw_transaction(
        self, family: str, name: str, hex: str | bytes, prevtxs: Sequence[PrevTx | Json] = (),
        *, sighashtype: str = "ALL",
    ) -> RawTransactionSigned:  # fmt: skip
        """Core `signrawtransactionwithkey` (legacy inputs need `prevtxs[].hex`)."""
        return self._sign(raw_signer(family, name, hex, prevtxs, sighashtype))

    def sign_eos_transaction(
        self, name: str, chain_id: str, serialized_transaction: str | bytes,
        serialized_context_free_data: str | bytes | None = None, *,
        public_key: str | None = None,
    ) -> EosTransactionSigned:  # fmt: skip
        """eosjs `SignatureProvider.sign` (bytes or hex). `public_key`: as in sign_message."""
        return self._sign(eos_tx_signer(
            name, chain_id, serialized_transaction, serialized_context_free_data, public_key
        ))  # fmt: skip


class AsyncSigning:
    """`client.signing` of the AsyncClient: the same methods, awaited."""

    def __init__(self, run: AsyncRunner) -> None:
        self._run = run

    async def sign_batch(
        self, family: str, name: str, items: Sequence[Json], *, public_key: str | None = None
    ) -> list[Any]:
        from chainkeys_client._batch import sign_batch_async  # (it builds on this module)

        return await sign_batch_async(self._run, family, name, items, public_key)

    async def _sign(self, signer: Signer[T]) -> T:
        return await sign_async(self._run, signer)

    async def sign_direct(self, name: str, sign_doc: CosmosSignDoc | Json) -> CosmosDirectSigned:
        return await self._sign(direct_signer(name, sign_doc))

    async def sign_amino(self, name: str, sign_doc: Json) -> CosmosAminoSigned:
        return await self._sign(amino_signer(name, sign_doc))

    @overload
    async def sign_message(  # type: ignore[overload-overlap]
        self, family: Literal["cosmos"], name: str, message: str | None = None, *,
        data: bytes | str | None = None, public_key: str | None = None,
    ) -> CosmosMessageSigned: ...  # fmt: skip
    @overload
    async def sign_message(
        self, family: str, name: str, message: str | None = None, *,
        data: bytes | str | None = None, public_key: str | None = None,
    ) -> MessageSignature: ...  # fmt: skip
    async def sign_message(
        self, family: str, name: str, message: str | None = None, *,
        data: bytes | str | None = None, public_key: str | None = None,
    ) -> CosmosMessageSigned | MessageSignature:  # fmt: skip
        result: CosmosMessageSigned | MessageSignature = await self._sign(
            message_signer(family, name, message, data, public_key)
        )
        return result

    async def sign_transfer(self, name: str, transfer: CosmosTransfer | Json) -> CosmosTx:
        return await self._sign(transfer_signer(name, transfer))

    async def sign_ibc_transfer(self, name: str, transfer: CosmosIbcTransfer | Json) -> CosmosTx:
        return await self._sign(ibc_transfer_signer(name, transfer))

    async def sign_psbt(
        self, family: str, name: str, psbt: str | bytes, *, finalize: bool = True
    ) -> PsbtSigned:
        return await self._sign(psbt_signer(family, name, psbt, finalize))

    async def sign_raw_transaction(
        self, family: str, name: str, hex: str | bytes, prevtxs: Sequence[PrevTx | Json] = (),
        *, sighashtype: str = "ALL",
    ) -> RawTransactionSigned:  # fmt: skip
        return await self._sign(raw_signer(family, name, hex, prevtxs, sighashtype))

    async def sign_eos_transaction(
        self, name: str, chain_id: str, serialized_transaction: str | bytes,
        serialized_context_free_data: str | bytes | None = None, *,
        public_key: str | None = None,
    ) -> EosTransactionSigned:  # fmt: skip
        return await self._sign(eos_tx_signer(
            name, chain_id, serialized_transaction, serialized_context_free_data, public_key
        ))  # fmt: skip
