"""Dogecoin/Litecoin transactions and BIP174 PSBTs, read strictly, and the two SIGHASH_ALL
digests an input signature signs (legacy, and BIP143 for segwit v0), so the client
can check a signature the server added. Only serialization and hashing: the
signatures themselves are verified by libsecp256k1 (`_check.verify_der`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from chainkeys_client._check import dsha256, fail

SIGHASH_ALL = 1
PSBT_MAGIC = b"psbt\xff"
# BIP174 input key types
IN_NON_WITNESS_UTXO, IN_WITNESS_UTXO, IN_PARTIAL_SIG, IN_SIGHASH = 0x00, 0x01, 0x02, 0x03
IN_REDEEM_SCRIPT, IN_WITNESS_SCRIPT, IN_BIP32 = 0x04, 0x05, 0x06
IN_FINAL_SCRIPTSIG, IN_FINAL_WITNESS = 0x07, 0x08


class Reader:
    def __init__(self, data: bytes, what: str) -> None:
        self.data, self.pos, self.what = data, 0, what

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            fail(f"{self.what} is truncated")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def uint(self, n: int) -> int:
        return int.from_bytes(self.take(n), "little")

    def varint(self) -> int:
        first = self.uint(1)
        if first < 0xFD:
            return first
        return self.uint({0xFD: 2, 0xFE: 4, 0xFF: 8}[first])

    def bytes_(self) -> bytes:
        return self.take(self.varint())

    def done(self) -> bool:
        return self.pos == len(self.data)


def varint(n: int) -> bytes:
    if n < 0xFD:
        return bytes((n,))
    if n <= 0xFFFF:
        return b"\xfd" + n.to_bytes(2, "little")
    if n <= 0xFFFFFFFF:
        return b"\xfe" + n.to_bytes(4, "little")
    return b"\xff" + n.to_bytes(8, "little")


def var_bytes(data: bytes) -> bytes:
    return varint(len(data)) + data


@dataclass
class TxIn:
    prevout: bytes  # txid (internal byte order) || vout, 36 bytes
    script_sig: bytes
    sequence: int
    witness: list[bytes] = field(default_factory=list)

    @property
    def outpoint(self) -> tuple[str, int]:
        """(txid as shown, vout)."""
        return self.prevout[:32][::-1].hex(), int.from_bytes(self.prevout[32:], "little")


@dataclass
class Tx:
    version: int
    inputs: list[TxIn]
    outputs: list[tuple[int, bytes]]  # (value, scriptPubKey)
    locktime: int

    def serialize(self, *, script_sigs: bool = True) -> bytes:
        """The non-witness serialization (what the txid hashes); without scriptSigs: the
        transaction as it was before anything signed it."""
        out = self.version.to_bytes(4, "little") + varint(len(self.inputs))
        for i in self.inputs:
            out += i.prevout + var_bytes(i.script_sig if script_sigs else b"")
            out += i.sequence.to_bytes(4, "little")
        out += varint(len(self.outputs))
        for value, script in self.outputs:
            out += value.to_bytes(8, "little") + var_bytes(script)
        return out + self.locktime.to_bytes(4, "little")

    def txid(self) -> str:
        return dsha256(self.serialize())[::-1].hex()


def parse_tx(data: bytes, what: str) -> Tx:
    r = Reader(data, what)
    version = r.uint(4)
    segwit = data[4:6] == b"\x00\x01"
    if segwit:
        r.take(2)
    inputs = [TxIn(r.take(36), r.bytes_(), r.uint(4)) for _ in range(r.varint())]
    outputs = [(r.uint(8), r.bytes_()) for _ in range(r.varint())]
    if segwit:
        for txin in inputs:
            txin.witness = [r.bytes_() for _ in range(r.varint())]
    tx = Tx(version, inputs, outputs, r.uint(4))
    if not r.done():
        fail(f"{what} has bytes after its end")
    return tx


def parse_witness(data: bytes, what: str) -> list[bytes]:
    r = Reader(data, what)
    items = [r.bytes_() for _ in range(r.varint())]
    if not r.done():
        fail(f"{what} has bytes after its end")
    return items


def pushes(script: bytes, what: str) -> list[bytes]:
    """The data of a script made only of direct pushes (1-75 bytes), else a mismatch."""
    r = Reader(script, what)
    items = []
    while not r.done():
        n = r.uint(1)
        if not 0 < n <= 75:
            fail(f"{what} is not a script of pushes this client reads")
        items.append(r.take(n))
    return items


# ---- PSBT -----------------------------------------------------------------------------

Map = dict[bytes, bytes]


@dataclass
class Psbt:
    globals: Map
    inputs: list[Map]
    outputs: list[Map]
    unsigned: bytes  # the global unsigned transaction, as serialized
    tx: Tx


def _map(r: Reader) -> Map:
    found: Map = {}
    while True:
        key = r.bytes_()
        if not key:
            return found
        if key in found:
            fail(f"{r.what} repeats a key")
        found[key] = r.bytes_()


def parse_psbt(data: bytes, what: str) -> Psbt:
    if not data.startswith(PSBT_MAGIC):
        fail(f"{what} is not a BIP174 PSBT")
    r = Reader(data, what)
    r.take(len(PSBT_MAGIC))
    glob = _map(r)
    unsigned = glob.get(b"\x00")
    if unsigned is None:
        fail(f"{what} has no unsigned transaction")
    tx = parse_tx(unsigned, f"{what}'s unsigned transaction")
    inputs = [_map(r) for _ in tx.inputs]
    outputs = [_map(r) for _ in tx.outputs]
    if not r.done():
        fail(f"{what} has bytes after its end")
    return Psbt(glob, inputs, outputs, unsigned, tx)


def psbt_prevout(psbt: Psbt, index: int) -> tuple[bytes, int]:
    """(scriptPubKey, value) of what input `index` spends, as the PSBT describes it."""
    inp, txin = psbt.inputs[index], psbt.tx.inputs[index]
    wit = inp.get(bytes((IN_WITNESS_UTXO,)))
    if wit is not None:
        r = Reader(wit, "a witness UTXO")
        value, script = r.uint(8), r.bytes_()
        return script, value
    full = inp.get(bytes((IN_NON_WITNESS_UTXO,)))
    if full is None:
        fail(f"the request's input {index} gives no previous output to check its signature")
    prev = parse_tx(full, "a previous transaction")
    txid, vout = txin.outpoint
    if prev.txid() != txid or vout >= len(prev.outputs):
        fail(f"the request's input {index} carries another previous transaction")
    value, script = prev.outputs[vout]
    return script, value


# ---- SIGHASH_ALL digests --------------------------------------------------------------


def p2pkh_script(key_hash: bytes) -> bytes:
    return b"\x76\xa9\x14" + key_hash + b"\x88\xac"


def legacy_sighash(tx: Tx, index: int, script_code: bytes) -> bytes:
    """The original sighash: every scriptSig emptied but this input's, its previous output's
    script (no OP_CODESEPARATOR in the scripts signed here)."""
    inputs = [TxIn(i.prevout, script_code if n == index else b"", i.sequence)
              for n, i in enumerate(tx.inputs)]  # fmt: skip
    copy = Tx(tx.version, inputs, tx.outputs, tx.locktime)
    return dsha256(copy.serialize() + SIGHASH_ALL.to_bytes(4, "little"))


def bip143_sighash(tx: Tx, index: int, script_code: bytes, value: int) -> bytes:
    """BIP143 (segwit v0) with SIGHASH_ALL."""
    prevouts = dsha256(b"".join(i.prevout for i in tx.inputs))
    sequences = dsha256(b"".join(i.sequence.to_bytes(4, "little") for i in tx.inputs))
    outputs = dsha256(b"".join(v.to_bytes(8, "little") + var_bytes(s) for v, s in tx.outputs))
    txin = tx.inputs[index]
    preimage = (
        tx.version.to_bytes(4, "little") + prevouts + sequences + txin.prevout
        + var_bytes(script_code) + value.to_bytes(8, "little")
        + txin.sequence.to_bytes(4, "little") + outputs + tx.locktime.to_bytes(4, "little")
        + SIGHASH_ALL.to_bytes(4, "little")
    )  # fmt: skip
    return dsha256(preimage)
