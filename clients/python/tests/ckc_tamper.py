# mypy: disable-error-code="import-untyped"
"""What a dishonest server or proxy could answer instead, made independently of the
client (coincurve for signatures, embit for PSBTs and transactions, both installed
with the server): another key's signatures, flipped bytes, swapped documents."""

from __future__ import annotations

import base64
import copy
from collections.abc import Callable
from typing import Any

import coincurve
import pytest
from ckc_helpers import B58, ripemd160
from embit import ec
from embit.psbt import PSBT
from embit.script import Script, Witness
from embit.transaction import Transaction

from chainkeys_client import AnswerMismatch, ChainkeysError

ONE = bytes(31) + b"\x01"  # the accounts' key in these tests
TWO = bytes(31) + b"\x02"  # another key
ACCOUNT = coincurve.PrivateKey(ONE)
OTHER = coincurve.PrivateKey(TWO)
OTHER_PUB = OTHER.public_key.format()


def b58encode(data: bytes) -> str:
    n = int.from_bytes(data, "big")
    out = ""
    while n:
        n, r = divmod(n, 58)
        out = B58[r] + out
    return "1" * (len(data) - len(data.lstrip(b"\0"))) + out


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def flip(data: bytes, at: int) -> bytes:
    out = bytearray(data)
    out[at] ^= 0x01
    return bytes(out)


def flip_b64(text: str, at: int) -> str:
    return b64(flip(base64.b64decode(text), at))


def compact(key: coincurve.PrivateKey, digest: bytes) -> bytes:
    """A 64-byte r||s signature (low S: libsecp256k1's)."""
    return key.sign_recoverable(digest, hasher=None)[:64]


def recoverable(key: coincurve.PrivateKey, digest: bytes, header_base: int) -> bytes:
    """header || r || s, as Core signmessage and EOS K1 lay it out."""
    sig = key.sign_recoverable(digest, hasher=None)
    return bytes((header_base + sig[64],)) + sig[:64]


def sig_k1(key: coincurve.PrivateKey, digest: bytes) -> str:
    data = recoverable(key, digest, 31)
    return "SIG_K1_" + b58encode(data + ripemd160(data + b"K1")[:4])


def pub_k1(pub33: bytes) -> str:
    return "PUB_K1_" + b58encode(pub33 + ripemd160(pub33 + b"K1")[:4])


def pub_legacy(pub33: bytes) -> str:
    return "EOS" + b58encode(pub33 + ripemd160(pub33)[:4])


def in_data(rewrite: Any) -> Any:
    """A proxy rewrite of the envelope's `data` of every sign answer (POST …/sign-…)."""

    def apply(method: str, path: str, body: Any) -> Any:
        if method != "POST" or "/sign-" not in path or not isinstance(body, dict):
            return None
        if not isinstance(body.get("data"), dict):
            return None
        return {**body, "data": rewrite(copy.deepcopy(body["data"]))}

    return apply


def replaced_by(other: dict[str, Any]) -> Any:
    """A rewrite answering `other` (another request's honest answer) instead."""
    return in_data(lambda _data: copy.deepcopy(other))


# ---- PSBTs and transactions (embit) --------------------------------------------------------


def psbt_of(text: str) -> Any:
    return PSBT.parse(base64.b64decode(text))


def psbt_b64(psbt: Any) -> str:
    return b64(psbt.serialize())


def extracted(psbt: Any) -> tuple[str, str]:
    """(hex, txid) of the transaction a finalized PSBT makes."""
    tx = Transaction.parse(psbt.tx.serialize())
    for txin, inp in zip(tx.vin, psbt.inputs, strict=True):
        txin.script_sig = inp.final_scriptsig or Script(b"")
        txin.witness = inp.final_scriptwitness or Witness([])
    return tx.serialize().hex(), tx.txid().hex()


def other_key_partial_sig(psbt: Any, index: int) -> None:
    """Input `index`'s partial signatures replaced by OTHER's, over the right sighash."""
    digest = psbt.sighash(index)
    inp = psbt.inputs[index]
    inp.partial_sigs.clear()
    key = ec.PrivateKey(TWO)
    inp.partial_sigs[key.get_public_key()] = key.sign(digest).serialize() + b"\x01"


def flip_final_signature(psbt: Any, index: int) -> None:
    """A byte inside r of input `index`'s final signature (DER stays valid)."""
    inp = psbt.inputs[index]
    if inp.final_scriptwitness is not None and inp.final_scriptwitness.items:
        items = list(inp.final_scriptwitness.items)
        items[0] = flip(items[0], 8)
        inp.final_scriptwitness = Witness(items)
    else:
        data = inp.final_scriptsig.data  # push(sig) push(pub): byte 9 is inside r
        inp.final_scriptsig = Script(flip(data, 9))


def tx_of(hex_: str) -> Any:
    return Transaction.parse(bytes.fromhex(hex_))


def with_output_value(hex_: str, delta: int) -> str:
    tx = tx_of(hex_)
    tx.vout[0].value += delta
    return str(tx.serialize().hex())


def mismatch(call: Callable[[], Any], *fragments: str, method: str = "POST") -> AnswerMismatch:
    """`call` raises the client's AnswerMismatch for a `method` request, naming it, with
    each of `fragments` in its message."""
    with pytest.raises(AnswerMismatch) as caught:
        call()
    err = caught.value
    assert isinstance(err, ChainkeysError)
    assert (err.code, err.status, err.method) == ("answer_mismatch", None, method) and err.path
    for fragment in fragments:
        assert fragment in err.message, (fragment, err.message)
    assert err.message in str(err) and "answer_mismatch" in str(err)
    return err
