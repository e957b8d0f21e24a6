# mypy: disable-error-code="import-untyped"
"""BIP174 signer for Dogecoin and Litecoin (Litecoin Core's `walletprocesspsbt`).

PSBT parsing, serialisation and BIP143/legacy sighashes come from `embit`.
Only inputs whose previous output pays this account are signed: a legacy one
needs its full previous transaction (whose hash must be the prevout txid:
Dogecoin's legacy sighash does not commit to amounts), a segwit one its
witness UTXO; SIGHASH_ALL only; Dogecoin has no segwit at all.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass
from typing import Any

import msgspec
from embit import ec
from embit.psbt import PSBT
from embit.script import Script, Witness

from chainkeys.chains import codecs
from chainkeys.chains.spec import ChainError, Key
from chainkeys.chains.tx.base import Amount, Item, Owner, Signed, SignKind, Summary
from chainkeys.chains.tx.ecdsa import sign_der
from chainkeys.chains.tx.utxo.params import PARAMS

BAD = "invalid_sign_request"
SIGHASH_ALL = 1


def refuse(message: str, code: str = BAD) -> ChainError:
    return ChainError(message, code)


def push(data: bytes) -> bytes:
    assert len(data) < 0x4C
    return bytes((len(data),)) + data


def own_scripts(owner: Owner) -> tuple[bytes, bytes]:
    """(the script this account is paid to, its BIP143 script code)."""
    h = codecs.hash160(owner.public_key)
    p2pkh = b"\x76\xa9\x14" + h + b"\x88\xac"
    kind = owner.address_type or "p2pkh"
    if kind == "p2wpkh":
        return b"\x00\x14" + h, p2pkh
    if kind == "p2sh-p2wpkh":
        return b"\xa9\x14" + codecs.hash160(b"\x00\x14" + h) + b"\x87", p2pkh
    return p2pkh, p2pkh


def address_of(script: bytes, owner: Owner) -> str | None:
    """The address `script` pays, in this account's network, or None."""
    net = owner.network
    if len(script) == 25 and script[:3] == b"\x76\xa9\x14" and script[23:] == b"\x88\xac":
        return codecs.base58check_encode((net.p2pkh or b"") + script[3:23])
    if len(script) == 23 and script[:2] == b"\xa9\x14" and script[22:] == b"\x87":
        return codecs.base58check_encode((net.p2sh or b"") + script[2:22])
    if net.hrp and len(script) in (22, 34) and script[0] == 0 and script[1] == len(script) - 2:
        return codecs.bech32_encode(net.hrp, script[2:])
    return None


def is_witness(script: bytes) -> bool:
    return len(script) >= 4 and script[0] <= 16 and script[1] == len(script) - 2


class UtxoPsbtRequest(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    psbt: str
    finalize: bool = True


class UtxoPsbtResponse(msgspec.Struct, kw_only=True, omit_defaults=True):
    psbt: str
    complete: bool
    hex: str | None = None
    txid: str | None = None


@dataclass(frozen=True, slots=True)
class _Prepared:
    summary: Summary
    psbt: Any
    mine: tuple[tuple[int, int, bytes], ...]  # (input index, value, prevout script)
    owner: Owner
    finalize: bool

    def sign(self, key: Key) -> Signed:
        psbt, owner = self.psbt, self.owner
        script, code = own_scripts(owner)
        pub = ec.PublicKey.parse(owner.public_key)
        for i, value, prev in self.mine:
            if is_witness(script) or script[0] == 0xA9:  # P2WPKH, P2SH-P2WPKH: BIP143
                digest = psbt.tx.sighash_segwit(i, Script(code), value, SIGHASH_ALL)
            else:
                digest = psbt.tx.sighash_legacy(i, Script(prev), SIGHASH_ALL)
            sig = sign_der(key.secret, digest) + bytes((SIGHASH_ALL,))
            inp = psbt.inputs[i]
            inp.partial_sigs[pub] = sig
            if script[0] == 0xA9:
                inp.redeem_script = Script(b"\x00\x14" + codecs.hash160(owner.public_key))
            if self.finalize:
                _finalize(inp, script, sig, owner.public_key)
        done = all(i.final_scriptsig is not None or i.final_scriptwitness is not None
                   for i in psbt.inputs)  # fmt: skip
        out = UtxoPsbtResponse(psbt="", complete=done)
        if done and self.finalize:
            tx = psbt.tx
            for txin, inp in zip(tx.vin, psbt.inputs, strict=True):
                txin.script_sig = inp.final_scriptsig or Script(b"")
                txin.witness = inp.final_scriptwitness or Witness([])
            raw = tx.serialize()
            out.hex, out.txid = raw.hex(), tx.txid().hex()
        out.psbt = base64.b64encode(psbt.serialize()).decode()
        return Signed(out, out.txid)


def _finalize(inp: Any, script: bytes, sig: bytes, pub: bytes) -> None:
    if script[0] == 0xA9:  # P2SH-P2WPKH
        inp.final_scriptsig = Script(push(b"\x00\x14" + codecs.hash160(pub)))
        inp.final_scriptwitness = Witness([sig, pub])
    elif script[0] == 0x00:  # P2WPKH
        inp.final_scriptwitness = Witness([sig, pub])
    else:  # P2PKH
        inp.final_scriptsig = Script(push(sig) + push(pub))
    inp.partial_sigs.clear()
    inp.redeem_script = None
    inp.sighash_type = None
    inp.bip32_derivations.clear()


def prevout(inp: Any, txin: Any, segwit_chain: bool) -> tuple[bytes | None, int | None]:
    """The previous output an input spends, checked against what the PSBT says of it."""
    full = wit = None
    if inp.non_witness_utxo is not None:
        if inp.non_witness_utxo.txid() != txin.txid:
            raise refuse("an input's previous transaction is not the one it spends",
                         "prev_tx_mismatch")  # fmt: skip
        if txin.vout >= len(inp.non_witness_utxo.vout):
            raise refuse("an input spends an output its previous transaction does not have")
        full = inp.non_witness_utxo.vout[txin.vout]
    if inp.witness_utxo is not None:
        if not segwit_chain:
            raise refuse("this coin has no segwit: witness UTXOs are not accepted", "wrong_chain")
        wit = inp.witness_utxo
        if full is not None and (full.script_pubkey.data, full.value) != (
            wit.script_pubkey.data,
            wit.value,
        ):
            raise refuse("an input's witness UTXO contradicts its previous transaction",
                         "prev_tx_mismatch")  # fmt: skip
    found = full or wit
    if found is None:
        return None, None
    return found.script_pubkey.data, found.value


def prepare_psbt(req: UtxoPsbtRequest, owner: Owner) -> _Prepared:
    params = PARAMS[owner.family]
    try:
        psbt = PSBT.parse(base64.b64decode(req.psbt, validate=True))
    except Exception:  # embit raises many kinds on malformed input
        raise refuse("psbt is not a valid base64 BIP174 PSBT") from None
    script, _ = own_scripts(owner)
    mine, values = [], []
    for i, (inp, txin) in enumerate(zip(psbt.inputs, psbt.tx.vin, strict=True)):
        prev, value = prevout(inp, txin, params.segwit)
        values.append(value)
        if prev != script or value is None:
            continue
        if inp.sighash_type not in (None, SIGHASH_ALL):
            raise refuse("only SIGHASH_ALL is signed", "sighash_not_allowed")
        if not is_witness(script) and script[0] != 0xA9 and inp.non_witness_utxo is None:
            raise refuse("a legacy input needs its full previous transaction",
                         "missing_prev_tx")  # fmt: skip
        mine.append((i, value, prev))
    if not mine:
        raise refuse("no input of this PSBT pays this account", "not_owner")
    items = []
    for out in psbt.tx.vout:
        data = out.script_pubkey.data
        if not params.segwit and is_witness(data):
            raise refuse("this coin has no segwit outputs", "wrong_chain")
        to = address_of(data, owner)
        items.append(Item("output", to, (Amount(params.ticker, out.value),), change=data == script,
                          decoded=to is not None))  # fmt: skip
    spent = sum(o.value for o in psbt.tx.vout)
    fee = () if None in values else (Amount(params.ticker, sum(values) - spent),)  # type: ignore[arg-type]
    unsigned = psbt.tx.serialize()  # no scripts yet: what every signature commits to
    summary = Summary(owner.family, owner.network.name, "sign-psbt", None, tuple(items), fee,
                      hashlib.sha256(unsigned).hexdigest())  # fmt: skip
    return _Prepared(summary, psbt, tuple(mine), owner, req.finalize)


KIND = SignKind(
    "sign-psbt", ("dogecoin", "litecoin"), UtxoPsbtRequest, UtxoPsbtResponse, prepare_psbt,
    "sign a PSBT (BIP174; Litecoin Core walletprocesspsbt)",
    "Signs the inputs that pay this account (P2PKH with their full previous transaction, "
    "P2WPKH, P2SH-P2WPKH), SIGHASH_ALL only; with finalize, a complete PSBT is extracted.",
    {"bitcoinjs": {"psbt": "cHNidP8BAHECAAAAAe…", "finalize": True}},
)  # fmt: skip
