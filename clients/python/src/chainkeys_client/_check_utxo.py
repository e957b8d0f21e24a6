"""Dogecoin/Litecoin answers, checked before they are returned.

The account name is its address, which names its key: every signature the server
added must be by a key the address pays (P2PKH, P2WPKH, P2SH-P2WPKH; for a multisig
account, a member key of the script the address pays), over the input's
SIGHASH_ALL digest computed here from the request (the request's previous outputs,
never the answer's), and the transaction must be the one sent: a PSBT's unsigned
transaction byte for byte (and its other fields unchanged but for what signing and
finalizing add or remove), a raw transaction's inputs and outputs with its scripts
emptied. A signed message must recover to the address's key.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Any

import msgspec

from chainkeys_client._check import (
    address_kind,
    b58check_decode,
    dsha256,
    fail,
    hash160,
    p2wpkh_program,
    recover,
    unb64,
    unhex,
    verify_der,
    witness_v0_program,
)
from chainkeys_client._errors import AnswerMismatch
from chainkeys_client._models import MessageSignature, PsbtSigned, RawTransactionSigned
from chainkeys_client._utxo_tx import (
    IN_BIP32,
    IN_FINAL_SCRIPTSIG,
    IN_FINAL_WITNESS,
    IN_PARTIAL_SIG,
    IN_REDEEM_SCRIPT,
    IN_SIGHASH,
    IN_WITNESS_SCRIPT,
    SIGHASH_ALL,
    Map,
    Psbt,
    Tx,
    bip143_sighash,
    legacy_sighash,
    p2pkh_script,
    parse_psbt,
    parse_tx,
    parse_witness,
    psbt_prevout,
    pushes,
    var_bytes,
    varint,
)

MAGIC = {"dogecoin": "Dogecoin Signed Message:\n", "litecoin": "Litecoin Signed Message:\n"}
HEADER_BASE = {"p2pkh": 31, "p2sh-p2wpkh": 35, "p2wpkh": 39}  # BIP137, compressed keys
COIN = 100_000_000
FINAL_SCRIPTSIG, FINAL_WITNESS = bytes((IN_FINAL_SCRIPTSIG,)), bytes((IN_FINAL_WITNESS,))
REDEEM = bytes((IN_REDEEM_SCRIPT,))
# What finalizing an input may remove (BIP174's finalizer), and what signing may add.
FINALIZER_REMOVES = frozenset({IN_PARTIAL_SIG, IN_SIGHASH, IN_REDEEM_SCRIPT, IN_WITNESS_SCRIPT,
                               IN_BIP32})  # fmt: skip


def account_script(kind: str, pub: bytes) -> bytes:
    key_hash = hash160(pub)
    if kind == "p2pkh":
        return p2pkh_script(key_hash)
    if kind == "p2wpkh":
        return p2wpkh_program(key_hash)
    return b"\xa9\x14" + hash160(p2wpkh_program(key_hash)) + b"\x87"


def verify_input(
    tx: Tx, index: int, sig: bytes, pub: bytes, address: str, script: bytes, value: int | None,
    form: str | None,
) -> None:  # fmt: skip
    """`sig` (DER || hash type) by `pub` signs input `index`, which spends `script` (worth
    `value`); `pub` must be a key `address` pays. `form`: how the finished input spends
    (None: a partial signature, not placed yet)."""
    what = f"input {index}"
    kind = address_kind(address, pub)
    if kind is None:
        fail(f"{what} is signed by a key that is not the account's ({address})")
    if script != account_script(kind, pub):
        fail(f"{what} was signed, but the output it spends does not pay the account")
    if form is not None and form != kind:
        fail(f"{what} is finished as a {form} input, but the account's address is {kind}")
    if not sig or sig[-1] != SIGHASH_ALL:
        fail(f"{what}'s signature is not SIGHASH_ALL")
    if kind == "p2pkh":
        digest = legacy_sighash(tx, index, script)
    else:
        if value is None:
            fail(f"{what} is a segwit input whose amount the request did not give")
        digest = bip143_sighash(tx, index, p2pkh_script(hash160(pub)), value)
    if not verify_der(pub, sig[:-1], digest):
        fail(f"{what}'s signature does not verify with the account's key over its sighash")


def final_signature(script_sig: bytes, witness: list[bytes], what: str) -> tuple[bytes, bytes, str]:
    """(signature, key, form) of a finished P2PKH, P2WPKH or P2SH-P2WPKH input."""
    if witness:
        if len(witness) != 2:
            fail(f"{what} has a witness this client does not read")
        sig, pub = witness
        if not script_sig:
            return sig, pub, "p2wpkh"
        if pushes(script_sig, what) != [p2wpkh_program(hash160(pub))]:
            fail(f"{what}'s redeem script is not its key's P2WPKH program")
        return sig, pub, "p2sh-p2wpkh"
    items = pushes(script_sig, what)
    if len(items) != 2:
        fail(f"{what} has a scriptSig this client does not read")
    return items[0], items[1], "p2pkh"


# ---- multisig (chainkeys as a co-signer, docs/multisig.md) ------------------------------

WITNESS = bytes((IN_WITNESS_SCRIPT,))


def multisig_keys(script: bytes | None) -> tuple[int, list[bytes]] | None:
    """(m, keys) of a bare multisig script `OP_m <33-byte key>… OP_n OP_CHECKMULTISIG`."""
    if not script or len(script) < 3 or script[-1] != 0xAE or not 0x51 <= script[0] <= 0x60:
        return None
    keys, at = [], 1
    while at < len(script) - 2:
        if script[at] != 33:
            return None
        keys.append(script[at + 1 : at + 34])
        at += 34
    if at != len(script) - 2 or script[-2] != 0x50 + len(keys) or script[0] - 0x50 > len(keys):
        return None
    return script[0] - 0x50, keys


def _multisig_of(address: str, got: Map, spent: bytes) -> tuple[bytes, bool, list[bytes]] | None:
    """(script code, segwit, member keys) when the input spends a multisig whose output
    script `spent` is the account's address: P2WSH, P2SH-P2WSH or P2SH."""
    witness, redeem = got.get(WITNESS), got.get(REDEEM)
    found = multisig_keys(witness) if witness is not None else multisig_keys(redeem)
    if found is None:
        return None
    script = witness if witness is not None else redeem
    wsh = b"\x00\x20" + hashlib.sha256(script or b"").digest()
    expected = {wsh, b"\xa9\x14" + hash160(wsh) + b"\x87"} if witness is not None else {
        b"\xa9\x14" + hash160(script or b"") + b"\x87"}  # fmt: skip
    program = witness_v0_program(address, 32)
    payload = b58check_decode(address)
    paid = (b"\x00\x20" + program if program is not None else
            b"\xa9\x14" + payload[1:] + b"\x87" if payload and len(payload) == 21 else b"")  # fmt: skip
    if spent not in expected or spent != paid:
        fail("an input's multisig script is not the one the account's address pays")
    return script or b"", witness is not None, found[1]


def verify_member(
    tx: Tx, index: int, sig: bytes, pub: bytes, ms: tuple[bytes, bool, list[bytes]],
    value: int | None,
) -> None:  # fmt: skip
    """`sig` by `pub`, a member key of the multisig input `index` spends, over its sighash."""
    script, segwit, keys = ms
    what = f"input {index}"
    if pub not in keys:
        fail(f"{what} is signed by a key that is not one of the multisig's")
    if not sig or sig[-1] != SIGHASH_ALL:
        fail(f"{what}'s signature is not SIGHASH_ALL")
    if segwit and value is None:
        fail(f"{what} is a segwit input whose amount the request did not give")
    digest = bip143_sighash(tx, index, script, value or 0) if segwit else legacy_sighash(
        tx, index, script)  # fmt: skip
    if not verify_der(pub, sig[:-1], digest):
        fail(f"{what}'s signature does not verify with {pub.hex()} over its sighash")


def _data_pushes(script: bytes, what: str) -> list[bytes]:
    """The data of a script of pushes, OP_0 and OP_PUSHDATA1/2 included (a P2SH multisig
    scriptSig: OP_0, the signatures, the redeem script of up to 520 bytes)."""
    items, at = [], 0
    while at < len(script):
        op = script[at]
        at += 1
        if op == 0:
            items.append(b"")
            continue
        if op < 0x4C:
            n = op
        elif op in (0x4C, 0x4D) and at + (op - 0x4B) <= len(script):
            width = op - 0x4B
            n, at = int.from_bytes(script[at : at + width], "little"), at + width
        else:
            fail(f"{what} is not a script of pushes this client reads")
        if at + n > len(script):
            fail(f"{what} is not a script of pushes this client reads")
        items.append(script[at : at + n])
        at += n
    return items


def _final_members(got: Map, ms: tuple[bytes, bool, list[bytes]], what: str) -> list[bytes]:
    """The signatures of a finalized multisig input: after CHECKMULTISIG's empty item,
    before the script (the witness, or the scriptSig's pushes)."""
    script, segwit, _ = ms
    if segwit:
        items = parse_witness(got.get(FINAL_WITNESS, b""), what)
    else:
        items = _data_pushes(got.get(FINAL_SCRIPTSIG, b""), what)
    if len(items) < 3 or items[0] != b"" or items[-1] != script:
        fail(f"{what} has a final multisig script this client does not read")
    return items[1:-1]


# ---- sign-psbt ------------------------------------------------------------------------


def _psbt_input(req: Psbt, index: int, sent: Map, got: Map, address: str) -> None:
    what = f"input {index}"
    final = FINAL_SCRIPTSIG in got or FINAL_WITNESS in got
    newly_final = final and FINAL_SCRIPTSIG not in sent and FINAL_WITNESS not in sent
    for key, field in sent.items():
        if key in got:
            if got[key] != field:
                fail(f"the answer changed a field (type 0x{key[0]:02x}) of {what}")
        elif not (newly_final and key[0] in FINALIZER_REMOVES):
            fail(f"the answer dropped a field (type 0x{key[0]:02x}) of {what}")
    script, value = b"", None  # what the input spends (read from the request when needed)
    added = {k: v for k, v in got.items() if k not in sent}
    if added:
        script, value = psbt_prevout(req, index)
    ms = _multisig_of(address, {**sent, **got}, script) if added else None
    if ms is not None:
        for key, sig in added.items():
            if key[0] == IN_PARTIAL_SIG:
                verify_member(req.tx, index, sig, key[1:], ms, value)
            elif key not in (REDEEM, WITNESS, FINAL_SCRIPTSIG, FINAL_WITNESS):
                fail(f"the answer added a field (type 0x{key[0]:02x}) to {what}")
        if newly_final:
            for sig in _final_members(got, ms, what):
                if not any(_verifies(req.tx, index, sig, k, ms, value) for k in ms[2]):
                    fail(f"{what}'s final script holds a signature by none of its keys")
        return
    for key, sig in added.items():
        if key[0] == IN_PARTIAL_SIG:
            pub = key[1:]
            verify_input(req.tx, index, sig, pub, address, script, value, None)
            redeem = got.get(REDEEM)
            if redeem is not None and redeem != p2wpkh_program(hash160(pub)):
                fail(f"{what}'s redeem script is not the signing key's P2WPKH program")
        elif key not in (REDEEM, FINAL_SCRIPTSIG, FINAL_WITNESS):
            fail(f"the answer added a field (type 0x{key[0]:02x}) to {what}")
    if REDEEM in added and not any(k[0] == IN_PARTIAL_SIG for k in added):
        fail(f"the answer added a redeem script to {what} without a signature")
    if newly_final:
        witness = parse_witness(got[FINAL_WITNESS], what) if FINAL_WITNESS in got else []
        sig, pub, form = final_signature(got.get(FINAL_SCRIPTSIG, b""), witness, what)
        verify_input(req.tx, index, sig, pub, address, script, value, form)


def _verifies(tx: Tx, index: int, sig: bytes, pub: bytes,
              ms: tuple[bytes, bool, list[bytes]], value: int | None) -> bool:  # fmt: skip
    try:
        verify_member(tx, index, sig, pub, ms, value)
    except AnswerMismatch:  # not this key's signature
        return False
    return True


def _extracted(answer: PsbtSigned, got: Psbt) -> None:
    """The final transaction is the PSBT's, with the scripts it finalized, and its txid."""
    tx = parse_tx(unhex(answer.hex, "hex"), "the final transaction")
    if not answer.complete:
        fail("the answer has a final transaction but says the PSBT is not complete")
    if tx.serialize(script_sigs=False) != got.tx.serialize(script_sigs=False):
        fail("the final transaction is not the PSBT's transaction")
    for index, (txin, inp) in enumerate(zip(tx.inputs, got.inputs, strict=True)):
        wit = inp.get(FINAL_WITNESS)
        witness = parse_witness(wit, "a final witness") if wit is not None else []
        if (txin.script_sig, txin.witness) != (inp.get(FINAL_SCRIPTSIG, b""), witness):
            fail(f"input {index} of the final transaction is not as the PSBT finalized it")
    if answer.txid != tx.txid():
        fail("txid is not the final transaction's")


def check_psbt(address: str, psbt: str | bytes) -> Callable[[PsbtSigned], None]:
    def check(answer: PsbtSigned) -> None:
        sent = psbt if isinstance(psbt, bytes | bytearray) else unb64(psbt, "the request's psbt")
        req = parse_psbt(bytes(sent), "the request's PSBT")
        got = parse_psbt(unb64(answer.psbt, "the answer's psbt"), "the answer's PSBT")
        if got.unsigned != req.unsigned:
            fail("the answer's PSBT is for another transaction (its unsigned transaction differs)")
        if got.globals != req.globals or got.outputs != req.outputs:
            fail("the answer's PSBT changed its global or output fields")
        for index, (s, g) in enumerate(zip(req.inputs, got.inputs, strict=True)):
            _psbt_input(req, index, s, g, address)
        complete = all(FINAL_SCRIPTSIG in g or FINAL_WITNESS in g for g in got.inputs)
        if answer.complete != complete:
            fail("`complete` does not say whether every input of the PSBT is final")
        if answer.hex is not None:
            _extracted(answer, got)
        elif answer.txid is not None:
            fail("the answer has a txid but no transaction")

    return check


# ---- sign-raw-transaction -------------------------------------------------------------


def _prevout(prev: dict[str, Any], txid: str, vout: int, index: int) -> tuple[bytes, int | None]:
    script = unhex(prev.get("scriptPubKey"), "scriptPubKey")
    if prev.get("hex") is not None:
        full = parse_tx(unhex(prev["hex"], "prevtxs[].hex"), "a previous transaction")
        if full.txid() != txid or vout >= len(full.outputs):
            fail(f"the request's previous transaction for input {index} is another one")
        value, out_script = full.outputs[vout]
        if out_script != script:
            fail(f"the request's scriptPubKey for input {index} is not its previous output's")
        return script, value
    if prev.get("amount") is None:
        return script, None
    units = Decimal(str(prev["amount"])) * COIN
    if units != units.to_integral_value() or units < 0:
        fail(f"the request's amount for input {index} is not a whole number of the smallest unit")
    return script, int(units)


def check_raw(
    address: str, hex: str | bytes, prevtxs: Sequence[Any]
) -> Callable[[RawTransactionSigned], None]:
    def check(answer: RawTransactionSigned) -> None:
        req = parse_tx(unhex(hex, "the request's hex"), "the request's transaction")
        got = parse_tx(unhex(answer.hex, "the answer's hex"), "the signed transaction")
        if got.serialize(script_sigs=False) != req.serialize(script_sigs=False):
            fail("the signed transaction is not the one sent (inputs or outputs differ)")
        given = json.loads(msgspec.json.encode(list(prevtxs)), parse_float=Decimal)
        prev = {(str(p.get("txid", "")).lower(), p.get("vout")): p for p in given}
        for index, (sent, signed) in enumerate(zip(req.inputs, got.inputs, strict=True)):
            if (signed.script_sig, signed.witness) == (sent.script_sig, sent.witness):
                continue
            txid, vout = signed.outpoint
            entry = prev.get((txid, vout))
            if entry is None:
                fail(f"input {index} was signed, but the request gave no previous output for it")
            script, value = _prevout(entry, txid, vout, index)
            sig, pub, form = final_signature(signed.script_sig, signed.witness, f"input {index}")
            verify_input(req, index, sig, pub, address, script, value, form)
        if answer.complete and any(not i.script_sig and not i.witness for i in got.inputs):
            fail("the answer says complete, but an input is not signed")

    return check


# ---- sign-message (Core signmessage, BIP137 headers) ----------------------------------


def message_hash(magic: str, message: bytes) -> bytes:
    return dsha256(var_bytes(magic.encode()) + varint(len(message)) + message)


def check_message(family: str, address: str, message: str) -> Callable[[MessageSignature], None]:
    def check(answer: MessageSignature) -> None:
        sig = unb64(answer.signature, "the signature")
        if len(sig) != 65 or not 27 <= sig[0] <= 42:
            fail("the signature is not a 65-byte compact signature with a BIP137 header")
        recid, compressed = (sig[0] - 27) & 3, sig[0] >= 31
        digest = message_hash(MAGIC[family], message.encode())
        pub = recover(sig[1:], recid, digest).format(compressed=compressed)
        kind = address_kind(address, pub)
        if kind is None:
            fail(f"the signature recovers to a key that is not the account's ({address})")
        if sig[0] - recid != (HEADER_BASE[kind] if compressed else 27):
            fail(f"the signature's header byte is not the one of a {kind} address")

    return check
