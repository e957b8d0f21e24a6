# mypy: disable-error-code="import-untyped"
"""Core's `signrawtransactionwithkey` for Dogecoin and Litecoin (Dogecoin Core has no PSBT).

The request and result are Core's own. Amounts are Core's decimal coin amounts,
read exactly (msgspec decodes JSON numbers to Decimal, never through a float)
and bounded by the coin's MAX_MONEY. A legacy input's amount is not committed
to by its signature, so it must come with its full previous transaction: each
`prevtxs` entry may carry `hex` (an extension of Core's shape), which is
required for P2PKH inputs this account signs and checked against the txid,
the output script and the amount.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal, DecimalException
from typing import Annotated, Any, ClassVar, Literal

import msgspec
from embit.transaction import Transaction
from msgspec import Meta

from chainkeys.chains.spec import ChainError, Key
from chainkeys.chains.tx.base import INVALID_AMOUNT, Owner, Signed, SignKind, Summary, refuse, unhex
from chainkeys.chains.tx.ecdsa import sign_der
from chainkeys.chains.tx.fields import HASH, HEX, UINT32
from chainkeys.chains.tx.utxo.params import COIN, PARAMS
from chainkeys.chains.tx.utxo.transaction import (
    SIGHASH_ALL,
    Mine,
    check_inputs,
    check_value,
    is_witness,
    own_scripts,
    p2wpkh_program,
    segwit,
    sighashes,
    summarize,
    unlock,
)


class PrevTx(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    txid: HASH
    vout: UINT32
    scriptPubKey: HEX
    # Core sends a JSON number; a string is read the same. Exact either way.
    amount: Decimal | None = None
    redeemScript: HEX | None = None
    witnessScript: HEX | None = None
    hex: HEX | None = None  # the full previous transaction (required for legacy inputs)


class UtxoRawTransactionRequest(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    codes: ClassVar = {"amount": INVALID_AMOUNT, "sighashtype": "sighash_not_allowed"}

    hex: HEX
    prevtxs: list[PrevTx] = []
    sighashtype: Annotated[
        Literal["ALL"], Meta(description="ALL: the only sighash signed (Core's others refused)")
    ] = "ALL"


class RawInputError(msgspec.Struct, kw_only=True):
    txid: str
    vout: int
    witness: list[str]
    scriptSig: str
    sequence: int
    error: str


class UtxoRawTransactionResponse(msgspec.Struct, kw_only=True):
    hex: str
    complete: bool
    errors: list[RawInputError] = []


def smallest_unit(amount: Decimal, family: str) -> int:
    """Core's decimal coin amount as an exact integer of koinu/litoshi (at most MAX_MONEY)."""
    max_coins = Decimal(PARAMS[family].max_money // COIN)
    try:
        if not amount.is_finite() or not 0 <= amount <= max_coins:
            raise DecimalException
        units = amount * COIN
        if units != units.to_integral_value():
            raise DecimalException
    except DecimalException:
        raise refuse(
            "an amount must be a coin amount from 0 to the coin's supply, with at most 8 decimals",
            INVALID_AMOUNT,
        ) from None
    return int(units)


def parse_tx(text: str, what: str) -> Any:
    try:
        return Transaction.parse(unhex(text, what))
    except ChainError:
        raise
    except Exception:  # embit raises many kinds on malformed input
        raise refuse(f"{what} is not a valid transaction") from None


@dataclass(frozen=True, slots=True)
class _RawTxInputs:
    summary: Summary
    tx: Any
    mine: tuple[Mine, ...]
    digests: tuple[bytes, ...]
    owner: Owner

    def sign(self, key: Key) -> Signed:
        tx, owner = self.tx, self.owner
        script, _ = own_scripts(owner)
        for m, digest in zip(self.mine, self.digests, strict=True):
            sig = sign_der(key.secret, digest) + bytes((SIGHASH_ALL,))
            tx.vin[m.index].script_sig, tx.vin[m.index].witness = unlock(
                script, sig, owner.public_key
            )
        errors = [
            RawInputError(
                txid=txin.txid.hex(),
                vout=txin.vout,
                witness=[],
                sequence=txin.sequence,
                scriptSig=txin.script_sig.data.hex(),
                error="Unable to sign input, invalid stack size (possibly missing key)",
            )
            for txin in tx.vin
            if not txin.script_sig.data and not (txin.witness and txin.witness.items)
        ]
        raw = tx.serialize()
        data = UtxoRawTransactionResponse(hex=raw.hex(), complete=not errors, errors=errors)
        return Signed(data, tx.txid().hex() if not errors else None)


def _scripts_match(prev: PrevTx, mine: bool, owner: Owner) -> None:
    """Core's optional redeemScript/witnessScript: read, never ignored. For an input of a
    P2SH-P2WPKH account the redeem script is its P2WPKH program; nothing else is read."""
    if prev.witnessScript is not None:
        raise refuse("witnessScript is not read by this signer (P2WSH inputs are not signed)")
    if prev.redeemScript is not None:
        expected = p2wpkh_program(owner.public_key) if mine else None
        if (
            owner.address_type != "p2sh-p2wpkh"
            or unhex(prev.redeemScript, "redeemScript") != expected
        ):
            raise refuse("redeemScript is not this account's P2SH-P2WPKH redeem script")


def prepare_raw(req: UtxoRawTransactionRequest, owner: Owner) -> _RawTxInputs:
    params = PARAMS[owner.family]
    tx = parse_tx(req.hex, "hex")
    check_inputs(tx)
    script, _ = own_scripts(owner)
    given = {(p.txid.lower(), p.vout): p for p in req.prevtxs}
    mine: list[Mine] = []
    values: list[int | None] = []
    for i, txin in enumerate(tx.vin):
        prev = given.get((txin.txid.hex(), txin.vout))
        if prev is None:
            values.append(None)
            continue
        spk = unhex(prev.scriptPubKey, "scriptPubKey")
        if not params.segwit and is_witness(spk):
            raise refuse("this coin has no segwit inputs", "wrong_chain")
        value = smallest_unit(prev.amount, owner.family) if prev.amount is not None else None
        if prev.hex is not None:
            full = parse_tx(prev.hex, "prevtxs[].hex")
            if full.txid() != txin.txid or txin.vout >= len(full.vout):
                raise refuse(
                    "a previous transaction is not the one its input spends", "prev_tx_mismatch"
                )
            out = full.vout[txin.vout]
            if out.script_pubkey.data != spk or (value is not None and out.value != value):
                raise refuse(
                    "scriptPubKey or amount contradicts the previous transaction",
                    "prev_tx_mismatch",
                )
            value = check_value(out.value, owner.family, f"input {i}'s amount")
        values.append(value)
        _scripts_match(prev, spk == script, owner)
        if spk != script:
            continue
        if not segwit(owner) and prev.hex is None:
            raise refuse(
                "a legacy input needs its full previous transaction (prevtxs[].hex)",
                "missing_prev_tx",
            )
        if value is None:
            raise refuse("an input of this account needs its amount", INVALID_AMOUNT)
        mine.append(Mine(i, value, spk))
    if not mine:
        raise refuse("no input of this transaction spends from this account", "not_owner")
    digests = sighashes(tx, mine, owner)
    summary = summarize(owner, "sign-raw-transaction", tx, values, digests)
    return _RawTxInputs(summary, tx, tuple(mine), digests, owner)


KIND = SignKind(
    "sign-raw-transaction",
    ("dogecoin", "litecoin"),
    UtxoRawTransactionRequest,
    UtxoRawTransactionResponse,
    prepare_raw,
    "sign a raw transaction (Core signrawtransactionwithkey)",
    "Core's request and result. Inputs of this account: P2PKH ones need prevtxs[].hex, "
    "the full previous transaction (its legacy signature does not commit to the amount).",
    # Dogecoin: a P2PKH input of 0.01 DOGE of the key 1 (its previous transaction whole)
    {
        "core": {
            "hex": (
                "02000000019913237b3a8b45c185a94519643641b0309d5177551c3f24c69522e57537ab4400"
                "00000000ffffffff01c0270900000000001976a91491b24bf9f5288532960ac687abb035127b"
                "1d28a588ac00000000"
            ),
            "sighashtype": "ALL",
            "prevtxs": [
                {
                    "txid": "44ab3775e52295c6243f1c5577519d30b04136641945a985c1458b3a7b231399",
                    "vout": 0,
                    "scriptPubKey": "76a914751e76e8199196d454941c45d1b3a323f1433bd688ac",
                    "amount": 0.01,
                    "hex": (
                        "0100000001070707070707070707070707070707070707070707070707070707070707070700"
                        "00000000ffffffff0140420f00000000001976a914751e76e8199196d454941c45d1b3a323f1"
                        "433bd688ac00000000"
                    ),
                }
            ],
        }
    },
)
