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

from collections.abc import Sequence
from typing import Any, Literal, overload

from chainkeys_client._core import AsyncRunner, SyncRunner
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
    Signer,
    sign,
    sign_async,
)
from chainkeys_client._batch import sign_batch as batch
from chainkeys_client._batch import sign_batch_async as batch_async
from chainkeys_client._signers import (
    Json,
    T,
    amino_signer,
    direct_signer,
    eos_tx_signer,
    ibc_transfer_signer,
    message_signer,
    psbt_signer,
    raw_signer,
    transfer_signer,
)


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
        return batch(self._run, family, name, items, public_key)

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
        return await batch_async(self._run, family, name, items, public_key)

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
