# mypy: disable-error-code="import-untyped"
"""BIP174 signer for Dogecoin and Litecoin (Litecoin Core's `walletprocesspsbt`).

PSBT parsing, serialisation and BIP143/legacy sighashes come from `embit`.
Only inputs whose previous output pays this account are signed: a legacy one
needs its full previous transaction (whose hash must be the prevout txid:
Dogecoin's legacy sighash does not commit to amounts), a segwit one its
witness UTXO; SIGHASH_ALL only; Dogecoin has no segwit at all. A PSBT field
embit does not know (other than a proprietary one) is refused.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import msgspec
from embit import ec
from embit.psbt import PSBT
from embit.script import Script, Witness

from chainkeys.chains.spec import ChainError, Key
from chainkeys.chains.tx.base import Owner, Signed, SignKind, Summary, refuse
from chainkeys.chains.tx.ecdsa import sign_der
from chainkeys.chains.tx.fields import BASE64
from chainkeys.chains.tx.utxo import multisig
from chainkeys.chains.tx.utxo.params import PARAMS
from chainkeys.chains.tx.utxo.transaction import (
    SIGHASH_ALL,
    Mine,
    check_inputs,
    check_value,
    own_scripts,
    p2wpkh_program,
    segwit,
    sighashes,
    summarize,
    unlock,
)

PROPRIETARY = 0xFC  # BIP174: a key type any application may use; it is never signed


class UtxoPsbtRequest(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    psbt: BASE64
    finalize: bool = True


class UtxoPsbtResponse(msgspec.Struct, kw_only=True, omit_defaults=True):
    psbt: str
    complete: bool
    hex: str | None = None
    txid: str | None = None


@dataclass(frozen=True, slots=True)
class _PsbtInputs:
    summary: Summary
    psbt: Any
    mine: tuple[Mine, ...]
    digests: tuple[bytes, ...]  # the sighash of each input in `mine`
    owner: Owner
    finalize: bool

    def sign(self, key: Key) -> Signed:
        if multisig.utxo_multisig(self.owner) is not None:
            return self.cosign((key,))
        psbt, owner = self.psbt, self.owner
        script, _ = own_scripts(owner)
        pub = ec.PublicKey.parse(owner.public_key)
        for m, digest in zip(self.mine, self.digests, strict=True):
            sig = sign_der(key.secret, digest) + bytes((SIGHASH_ALL,))
            inp = psbt.inputs[m.index]
            inp.partial_sigs[pub] = sig
            if script[0] == 0xA9:
                inp.redeem_script = Script(p2wpkh_program(owner.public_key))
            if self.finalize:
                _finalize(inp, script, sig, owner.public_key)
        return _answer(psbt, self.finalize)

    def cosign(self, keys: Sequence[Key]) -> Signed:
        """A multisig's inputs: each member key held here adds its signature; with
        finalize, an input whose signatures reach the threshold is finalized."""
        ms = multisig.utxo_multisig(self.owner)
        if ms is None or not keys or any(k.public not in ms.keys for k in keys):
            raise refuse("only the multisig's own member keys sign its inputs", "not_owner")
        for m, digest in zip(self.mine, self.digests, strict=True):
            inp = self.psbt.inputs[m.index]
            for key in keys:
                pub = ec.PublicKey.parse(key.public)
                inp.partial_sigs[pub] = sign_der(key.secret, digest) + bytes((SIGHASH_ALL,))
            if ms.segwit:
                inp.witness_script = Script(ms.script)
            if ms.redeem_script is not None:
                inp.redeem_script = Script(ms.redeem_script)
            if self.finalize:
                multisig.finalize(inp, ms)
        return _answer(self.psbt, self.finalize)


def _answer(psbt: Any, finalize: bool) -> Signed:
    """The PSBT as signed; when every input is final and finalize was asked, the
    transaction extracted, ready to broadcast."""
    done = all(
        i.final_scriptsig is not None or i.final_scriptwitness is not None for i in psbt.inputs
    )
    out = UtxoPsbtResponse(psbt="", complete=done)
    if done and finalize:
        tx = psbt.tx
        for txin, inp in zip(tx.vin, psbt.inputs, strict=True):
            txin.script_sig = inp.final_scriptsig or Script(b"")
            txin.witness = inp.final_scriptwitness or Witness([])
        raw = tx.serialize()
        out.hex, out.txid = raw.hex(), tx.txid().hex()
    out.psbt = base64.b64encode(psbt.serialize()).decode()
    return Signed(out, out.txid)


def _finalize(inp: Any, script: bytes, sig: bytes, pub: bytes) -> None:
    script_sig, witness = unlock(script, sig, pub)
    inp.final_scriptsig = script_sig if script_sig.data else None
    inp.final_scriptwitness = witness if witness.items else None
    inp.partial_sigs.clear()
    inp.redeem_script = None
    inp.sighash_type = None
    inp.bip32_derivations.clear()


def prevout(inp: Any, txin: Any, segwit_chain: bool) -> tuple[bytes | None, int | None]:
    """The previous output an input spends, checked against what the PSBT says of it."""
    full = wit = None
    if inp.non_witness_utxo is not None:
        if inp.non_witness_utxo.txid() != txin.txid:
            raise refuse(
                "an input's previous transaction is not the one it spends", "prev_tx_mismatch"
            )
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
            raise refuse(
                "an input's witness UTXO contradicts its previous transaction", "prev_tx_mismatch"
            )
    found = full or wit
    if found is None:
        return None, None
    return found.script_pubkey.data, found.value


def _no_unknown_fields(psbt: Any) -> None:
    scopes = [("the PSBT", psbt)]
    scopes += [(f"input {i}", s) for i, s in enumerate(psbt.inputs)]
    scopes += [(f"output {i}", s) for i, s in enumerate(psbt.outputs)]
    for what, scope in scopes:
        for key in scope.unknown:
            if bytes(key)[:1] != bytes((PROPRIETARY,)):
                raise refuse(
                    f"{what} has a PSBT field (type 0x{bytes(key)[:1].hex()}) this "
                    "signer does not read"
                )


def _scripts_are_ours(inp: Any, ms: multisig.Multisig, index: int) -> None:
    """An input's witness or redeem script, when the PSBT gives one, is this multisig's:
    another script under the same output script cannot be (it would hash differently),
    so a different one is a PSBT built for something else."""
    given = (
        (inp.witness_script, ms.script if ms.segwit else None),
        (inp.redeem_script, ms.redeem_script),
    )
    for script, ours in given:
        if script is not None and bytes(script.data) != ours:
            raise refuse(
                f"input {index}'s witness or redeem script is not this multisig's", "not_owner"
            )


def parse_psbt(text: str) -> Any:
    try:
        return PSBT.parse(base64.b64decode(text, validate=True))
    except Exception:  # embit raises many kinds on malformed input
        raise refuse("psbt is not a valid base64 BIP174 PSBT") from None


def prepare_psbt(req: UtxoPsbtRequest, owner: Owner) -> _PsbtInputs:
    params = PARAMS[owner.family]
    psbt = parse_psbt(req.psbt)
    if psbt.version not in (None, 0):
        raise refuse("only version 0 PSBTs are signed")
    _no_unknown_fields(psbt)
    check_inputs(psbt.tx)
    script, _ = own_scripts(owner)
    ms = multisig.utxo_multisig(owner)
    mine, values = [], []
    for i, (inp, txin) in enumerate(zip(psbt.inputs, psbt.tx.vin, strict=True)):
        prev, value = prevout(inp, txin, params.segwit)
        if value is not None:
            check_value(value, owner.family, f"input {i}'s amount")
        values.append(value)
        if prev != script or value is None:
            continue
        if inp.sighash_type not in (None, SIGHASH_ALL):
            raise refuse("only SIGHASH_ALL is signed", "sighash_not_allowed")
        if not segwit(owner) and inp.non_witness_utxo is None:
            raise refuse("a legacy input needs its full previous transaction", "missing_prev_tx")
        if ms is not None:
            _scripts_are_ours(inp, ms, i)
        mine.append(Mine(i, value, prev))
    if not mine:
        raise refuse("no input of this PSBT pays this account", "not_owner")
    try:
        digests = sighashes(psbt.tx, mine, owner)
    except ChainError:
        raise
    except Exception:  # embit: a transaction it cannot hash
        raise refuse("psbt holds a transaction that cannot be signed") from None
    if ms is not None:
        for m, digest in zip(mine, digests, strict=True):
            multisig.check_signatures(psbt.inputs[m.index], ms, digest, m.index)
    summary = summarize(owner, "sign-psbt", psbt.tx, values, digests)
    return _PsbtInputs(summary, psbt, tuple(mine), digests, owner, req.finalize)


KIND = SignKind(
    "sign-psbt",
    ("dogecoin", "litecoin"),
    UtxoPsbtRequest,
    UtxoPsbtResponse,
    prepare_psbt,
    "sign a PSBT (BIP174; Litecoin Core walletprocesspsbt)",
    "Signs the inputs that pay this account (P2PKH with their full previous transaction, "
    "P2WPKH, P2SH-P2WPKH), SIGHASH_ALL only; with finalize, a complete PSBT is extracted. "
    "A multisig account adds the signature of every member key this tenant holds and "
    "finalizes an input once its signatures reach the threshold.",
    # Litecoin: a P2WPKH input of 0.01 LTC of the key 1, 0.006 LTC to LYWKqJ…iubdM
    {
        "bitcoinjs": {
            "psbt": (
                "cHNidP8BAFUCAAAAAZZmeEkhOj+596y1w3dw2D1yEGd08vqOqXU9VXi/Tsd3AAAAAAD/////AcAn"
                "CQAAAAAAGXapFJGyS/n1KIUylgrGh6uwNRJ7HSiliKwAAAAAAAEAUgEAAAABBwcHBwcHBwcHBwcH"
                "BwcHBwcHBwcHBwcHBwcHBwcHBwcAAAAAAP////8BQEIPAAAAAAAWABR1HnboGZGW1FSUHEXRs6Mj"
                "8UM71gAAAAABAR9AQg8AAAAAABYAFHUedugZkZbUVJQcRdGzoyPxQzvWAAA="
            ),
            "finalize": True,
        }
    },
)
