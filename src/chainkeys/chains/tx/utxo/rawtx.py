# mypy: disable-error-code="import-untyped"
"""Core's `signrawtransactionwithkey` for Dogecoin and Litecoin (Dogecoin Core has no PSBT).

The request and result are Core's own. Amounts are Core's decimal coin amounts,
read exactly (msgspec decodes JSON numbers to Decimal, never through a float).
A legacy input's amount is not committed to by its signature, so it must come
with its full previous transaction: each `prevtxs` entry may carry `hex` (an
extension of Core's shape), which is required for P2PKH inputs this account
signs and checked against the txid, the output script and the amount.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Annotated, Any

import msgspec
from embit.script import Script, Witness
from embit.transaction import Transaction

from chainkeys.chains import codecs
from chainkeys.chains.spec import ChainError, Key
from chainkeys.chains.tx.base import Amount, Item, Owner, Signed, SignKind, Summary
from chainkeys.chains.tx.ecdsa import sign_der
from chainkeys.chains.tx.utxo.params import PARAMS
from chainkeys.chains.tx.utxo.psbt import SIGHASH_ALL, address_of, is_witness, own_scripts, push

BAD = "invalid_sign_request"
NUMBER_OR_STRING: dict[str, Any] = {"type": ["number", "string"]}
COIN = Decimal(100_000_000)


def refuse(message: str, code: str = BAD) -> ChainError:
    return ChainError(message, code)


class PrevTx(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    txid: str
    vout: int
    scriptPubKey: str
    # Core sends a JSON number; a string is read the same. Exact either way.
    amount: Annotated[Decimal, msgspec.Meta(extra_json_schema=NUMBER_OR_STRING)] | None = None
    redeemScript: str | None = None
    witnessScript: str | None = None
    hex: str | None = None  # the full previous transaction (required for legacy inputs)


class UtxoRawTransactionRequest(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    hex: str
    prevtxs: list[PrevTx] = []
    sighashtype: str = "ALL"


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


def smallest_unit(amount: Decimal) -> int:
    """Core's decimal coin amount as an exact integer of koinu/litoshi."""
    try:
        units = amount * COIN
        if not amount.is_finite() or units != units.to_integral_value() or units < 0:
            raise InvalidOperation
    except InvalidOperation:
        raise refuse("an amount must be a non-negative coin amount with at most 8 decimals",
                     "invalid_amount") from None  # fmt: skip
    return int(units)


def unhex(text: str, what: str) -> bytes:
    try:
        return bytes.fromhex(text)
    except ValueError:
        raise refuse(f"{what} is not hex") from None


@dataclass(frozen=True, slots=True)
class _Prepared:
    summary: Summary
    tx: Any
    mine: tuple[tuple[int, int, bytes], ...]
    owner: Owner

    def sign(self, key: Key) -> Signed:
        tx, owner = self.tx, self.owner
        script, code = own_scripts(owner)
        pub = owner.public_key
        segwit = is_witness(script) or script[0] == 0xA9
        for i, value, prev in self.mine:
            if segwit:
                digest = tx.sighash_segwit(i, Script(code), value, SIGHASH_ALL)
            else:
                digest = tx.sighash_legacy(i, Script(prev), SIGHASH_ALL)
            sig = sign_der(key.secret, digest) + bytes((SIGHASH_ALL,))
            if script[0] == 0xA9:
                tx.vin[i].script_sig = Script(push(b"\x00\x14" + codecs.hash160(pub)))
                tx.vin[i].witness = Witness([sig, pub])
            elif segwit:
                tx.vin[i].witness = Witness([sig, pub])
            else:
                tx.vin[i].script_sig = Script(push(sig) + push(pub))
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


def prepare_raw(req: UtxoRawTransactionRequest, owner: Owner) -> _Prepared:
    if req.sighashtype != "ALL":
        raise refuse("only sighashtype ALL is signed", "sighash_not_allowed")
    params = PARAMS[owner.family]
    try:
        tx = Transaction.parse(unhex(req.hex, "hex"))
    except ChainError:
        raise
    except Exception:
        raise refuse("hex is not a valid transaction") from None
    script, _ = own_scripts(owner)
    given = {(p.txid.lower(), p.vout): p for p in req.prevtxs}
    mine: list[tuple[int, int, bytes]] = []
    values: list[int | None] = []
    for i, txin in enumerate(tx.vin):
        prev = given.get((txin.txid.hex(), txin.vout))
        if prev is None:
            values.append(None)
            continue
        spk = unhex(prev.scriptPubKey, "scriptPubKey")
        if not params.segwit and is_witness(spk):
            raise refuse("this coin has no segwit inputs", "wrong_chain")
        value = smallest_unit(prev.amount) if prev.amount is not None else None
        if prev.hex is not None:
            full = Transaction.parse(unhex(prev.hex, "prevtxs hex"))
            if full.txid() != txin.txid or txin.vout >= len(full.vout):
                raise refuse("a previous transaction is not the one its input spends",
                             "prev_tx_mismatch")  # fmt: skip
            out = full.vout[txin.vout]
            if out.script_pubkey.data != spk or (value is not None and out.value != value):
                raise refuse("scriptPubKey or amount contradicts the previous transaction",
                             "prev_tx_mismatch")  # fmt: skip
            value = out.value
        values.append(value)
        if spk != script:
            continue
        if not (is_witness(script) or script[0] == 0xA9) and prev.hex is None:
            raise refuse("a legacy input needs its full previous transaction (prevtxs[].hex)",
                         "missing_prev_tx")  # fmt: skip
        if value is None:
            raise refuse("an input of this account needs its amount", "invalid_amount")
        mine.append((i, value, spk))
    if not mine:
        raise refuse("no input of this transaction spends from this account", "not_owner")
    unsigned = Transaction.parse(tx.serialize())
    for txin in unsigned.vin:
        txin.script_sig, txin.witness = Script(b""), Witness([])
    items = []
    for out in tx.vout:
        data = out.script_pubkey.data
        if not params.segwit and is_witness(data):
            raise refuse("this coin has no segwit outputs", "wrong_chain")
        to = address_of(data, owner)
        items.append(Item("output", to, (Amount(params.ticker, out.value),), change=data == script,
                          decoded=to is not None))  # fmt: skip
    known = [v for v in values if v is not None]
    fee = (
        (Amount(params.ticker, sum(known) - sum(o.value for o in tx.vout)),)
        if len(known) == len(values) else ()
    )  # fmt: skip
    digest = hashlib.sha256(unsigned.serialize()).hexdigest()
    summary = Summary(owner.family, owner.network.name, "sign-raw-transaction", None,
                      tuple(items), fee, digest)  # fmt: skip
    return _Prepared(summary, tx, tuple(mine), owner)


KIND = SignKind(
    "sign-raw-transaction", ("dogecoin", "litecoin"), UtxoRawTransactionRequest,
    UtxoRawTransactionResponse, prepare_raw,
    "sign a raw transaction (Core signrawtransactionwithkey)",
    "Core's request and result. Inputs of this account: P2PKH ones need prevtxs[].hex, "
    "the full previous transaction (its legacy signature does not commit to the amount).",
    {"core": {"hex": "0100000001…", "sighashtype": "ALL", "prevtxs": [{
        "txid": "9b1c…", "vout": 0, "scriptPubKey": "76a914…88ac", "amount": 12.5,
        "hex": "0100000001…"}]}},
)  # fmt: skip
