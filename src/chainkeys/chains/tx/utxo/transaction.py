# mypy: disable-error-code="import-untyped"
"""What both UTXO signers (PSBT and Core's raw transaction) share: this account's
scripts, output addresses, the sighashes to sign, and the summary.

The summary's digest is the sha256 of every sighash this request signs, in input
order: what the signatures commit to. A segwit sighash commits to the input's
amount, so a request that claims another amount is another digest, never "the
same request again" (a legacy sighash does not, which is why a legacy input
must come with its full previous transaction). The fee is inputs - outputs when
every input's previous output is known (None otherwise) and is never negative;
every amount is at most the coin's MAX_MONEY.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bip_utils import SegwitBech32Encoder
from embit.script import Script, Witness

from chainkeys.chains import encoding
from chainkeys.chains.tx.base import INVALID_AMOUNT, Amount, Item, Owner, Summary, refuse
from chainkeys.chains.tx.utxo.multisig import utxo_multisig
from chainkeys.chains.tx.utxo.params import PARAMS, unit

SIGHASH_ALL = 1


def never_sign(data: bytes) -> str | None:
    """What a raw message signer must never sign (spec.py `NeverSign`): 32 bytes, a
    digest's shape. An input signature signs sha256(sha256(transaction)), so a signer
    that signs sha256(data) would sign an input when handed its sha256."""
    if len(data) == 32:
        return (
            "32 bytes of data is a digest's shape: its sha256 is what a Dogecoin or "
            "Litecoin input signature signs; send text or other bytes"
        )
    return None


def push(data: bytes) -> bytes:
    """A script push of fewer than 76 bytes (signatures, keys, redeem scripts)."""
    if len(data) >= 0x4C:
        raise ValueError("push of 76 bytes or more")  # never: keys and signatures are short
    return bytes((len(data),)) + data


def p2wpkh_program(public_key: bytes) -> bytes:
    """OP_0 <hash160(key)>: P2WPKH's output script, P2SH-P2WPKH's redeem script."""
    return b"\x00\x14" + encoding.hash160(public_key)


def own_scripts(owner: Owner) -> tuple[bytes, bytes]:
    """(the script this account is paid to, the script code its sighashes commit to)."""
    ms = utxo_multisig(owner)
    if ms is not None:
        return ms.script_pubkey, ms.script
    p2pkh = b"\x76\xa9\x14" + encoding.hash160(owner.public_key) + b"\x88\xac"
    kind = owner.address_type or "p2pkh"
    if kind == "p2wpkh":
        return p2wpkh_program(owner.public_key), p2pkh
    if kind == "p2sh-p2wpkh":
        return b"\xa9\x14" + encoding.hash160(p2wpkh_program(owner.public_key)) + b"\x87", p2pkh
    return p2pkh, p2pkh


def is_witness(script: bytes) -> bool:
    """A witness program: OP_0..OP_16, then one push of 2 to 40 bytes (BIP141)."""
    return (
        4 <= len(script) <= 42
        and (script[0] == 0 or 0x51 <= script[0] <= 0x60)
        and script[1] == len(script) - 2
    )


def segwit(owner: Owner) -> bool:
    """Whether this account's inputs are signed BIP143 (P2WPKH, P2SH-P2WPKH, the segwit
    multisig forms), not legacy (P2PKH, P2SH multisig)."""
    ms = utxo_multisig(owner)
    if ms is not None:
        return ms.segwit
    script, _ = own_scripts(owner)
    return is_witness(script) or script[0] == 0xA9


def address_of(script: bytes, owner: Owner) -> str | None:
    """The address `script` pays, in this account's network, or None.

    Witness programs are segwit addresses (BIP173 for version 0, BIP350 bech32m
    for 1-16), as Core and every wallet show them: `ltc1q…`, never the program
    bech32-encoded without its version.
    """
    net = owner.network
    if len(script) == 25 and script[:3] == b"\x76\xa9\x14" and script[23:] == b"\x88\xac":
        return encoding.base58check_encode((net.p2pkh or b"") + script[3:23])
    if len(script) == 23 and script[:2] == b"\xa9\x14" and script[22:] == b"\x87":
        return encoding.base58check_encode((net.p2sh or b"") + script[2:22])
    if net.hrp and is_witness(script):
        version = 0 if script[0] == 0 else script[0] - 0x50
        if version == 0 and len(script) not in (22, 34):
            return None  # no such v0 program: unspendable, never a recipient
        return str(SegwitBech32Encoder.Encode(net.hrp, version, script[2:]))
    return None


@dataclass(frozen=True, slots=True)
class Mine:
    """An input this account signs: its index, amount and previous output script."""

    index: int
    value: int
    prev: bytes


def sighashes(tx: Any, mine: Sequence[Mine], owner: Owner) -> tuple[bytes, ...]:
    """The SIGHASH_ALL digest of each input this account signs (BIP143 or legacy)."""
    _, code = own_scripts(owner)
    if segwit(owner):
        return tuple(tx.sighash_segwit(m.index, Script(code), m.value, SIGHASH_ALL) for m in mine)
    # legacy: the previous output's script (P2PKH), or the redeem script (P2SH multisig)
    return tuple(tx.sighash_legacy(m.index, Script(code), SIGHASH_ALL) for m in mine)


def unlock(script: bytes, sig: bytes, pub: bytes) -> tuple[Script, Witness]:
    """(scriptSig, witness) that spend this account's output with `sig`."""
    if script[0] == 0xA9:  # P2SH-P2WPKH
        return Script(push(p2wpkh_program(pub))), Witness([sig, pub])
    if script[0] == 0x00:  # P2WPKH
        return Script(b""), Witness([sig, pub])
    return Script(push(sig) + push(pub)), Witness([])  # P2PKH


def check_value(value: int, family: str, what: str) -> int:
    """An amount within the coin's MAX_MONEY (a negative or larger one is no coin amount)."""
    if not 0 <= value <= PARAMS[family].max_money:
        raise refuse(f"{what} is out of range for {family}", INVALID_AMOUNT)
    return value


def check_inputs(tx: Any) -> None:
    """No outpoint spent twice (Core refuses such a transaction; its fee would lie)."""
    seen = set()
    for txin in tx.vin:
        outpoint = (bytes(txin.txid), txin.vout)
        if outpoint in seen:
            raise refuse("the transaction spends the same output twice")
        seen.add(outpoint)


def summarize(
    owner: Owner, kind: str, tx: Any, values: Sequence[int | None], digests: Sequence[bytes]
) -> Summary:
    """The summary of a transaction: its outputs, fee and the digest of what is signed.

    Args:
        owner: The signing account.
        kind: The endpoint (`sign-psbt`, `sign-raw-transaction`).
        tx: The embit Transaction.
        values: Each input's previous output amount, None where unknown.
        digests: The sighashes this request signs.

    Raises:
        ChainError: An output to segwit on a coin without it, an amount out of
            range, or outputs paying more than the inputs hold.
    """
    params, coin = PARAMS[owner.family], unit(owner.family)
    script, _ = own_scripts(owner)
    items = []
    for n, out in enumerate(tx.vout):
        data = out.script_pubkey.data
        if not params.segwit and is_witness(data):
            raise refuse("this coin has no segwit outputs", "wrong_chain")
        value = check_value(out.value, owner.family, f"output {n}")
        to = address_of(data, owner)
        shown = Amount.of(params.ticker, value, coin)
        items.append(Item("output", to, (shown,), change=data == script, decoded=to is not None))
    spent = check_value(sum(o.value for o in tx.vout), owner.family, "the outputs' total")
    fee: tuple[Amount, ...] | None = None
    if None not in values:
        held = check_value(sum(v or 0 for v in values), owner.family, "the inputs' total")
        if held < spent:
            raise refuse(
                f"the outputs pay {spent} but the inputs hold {held}: a negative fee",
                INVALID_AMOUNT,
            )
        fee = (Amount.of(params.ticker, held - spent, coin),)
    digest = hashlib.sha256(b"".join(digests)).hexdigest()
    return Summary(owner.family, owner.network.name, kind, None, tuple(items), fee, digest)
