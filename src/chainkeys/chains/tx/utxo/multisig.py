# mypy: disable-error-code="import-untyped"
"""m-of-n multisig on Dogecoin and Litecoin: the scripts, the address, the descriptor.

`sortedmulti` (BIP67): the keys in lexicographic order, so every wallet that is
given the same keys builds the same script whatever order they were listed in
(bitcoinjs-lib `payments.p2ms({m, pubkeys: sorted})`, Core's `sortedmulti`). Keys
are compressed (BIP143 makes an uncompressed key in a witness script
non-standard). The script is `OP_m <key>… OP_n OP_CHECKMULTISIG`, from embit; it
is paid as P2WSH (Litecoin's default), P2SH-P2WSH, or P2SH (Dogecoin has no
segwit). At most 15 keys: a P2SH redeem script is at most 520 bytes (consensus),
and 15 compressed keys are 513; the segwit forms keep the same bound so that a
multisig can move between its forms and every wallet (bitcoinjs-lib stops at 16)
can spend it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from bip_utils import SegwitBech32Encoder
from embit import ec
from embit.descriptor.checksum import add_checksum
from embit.script import Script, Witness, multisig, p2sh, p2wsh

from chainkeys.chains import encoding
from chainkeys.chains.spec import ChainError, MultisigForms, Network
from chainkeys.chains.tx.threshold import INVALID, members

TYPES: Final = ("p2wsh", "p2sh-p2wsh", "p2sh")


@dataclass(frozen=True, slots=True)
class Multisig:
    """A threshold of sorted compressed keys, paid in one of `TYPES`."""

    threshold: int
    keys: tuple[bytes, ...]  # sorted, 33 bytes each
    address_type: str

    @property
    def script(self) -> bytes:
        """The multisig script: P2WSH's witness script, P2SH's redeem script."""
        keys = [ec.PublicKey.parse(k) for k in self.keys]
        return bytes(multisig(self.threshold, keys).data)

    @property
    def segwit(self) -> bool:
        return self.address_type != "p2sh"

    @property
    def script_pubkey(self) -> bytes:
        inner = bytes(p2wsh(Script(self.script)).data) if self.segwit else self.script
        if self.address_type == "p2wsh":
            return inner
        return bytes(p2sh(Script(inner)).data)

    @property
    def redeem_script(self) -> bytes | None:
        """What the scriptSig pushes (P2SH forms), None for bare P2WSH."""
        if self.address_type == "p2wsh":
            return None
        return bytes(p2wsh(Script(self.script)).data) if self.segwit else self.script

    def address(self, network: Network) -> str:
        spk = self.script_pubkey
        if self.address_type == "p2wsh":
            if network.hrp is None:
                raise ChainError("this coin has no segwit: use p2sh", INVALID)
            return str(SegwitBech32Encoder.Encode(network.hrp, 0, spk[2:]))
        return encoding.base58check_encode((network.p2sh or b"") + spk[2:22])

    def descriptor(self) -> str:
        """Core's output descriptor (BIP380/383), with its checksum."""
        return _descriptor(self.threshold, [k.hex() for k in self.keys], self.address_type)

    def public_json(self) -> None:
        return None  # the descriptor says it


def utxo_multisig(owner: Any) -> Multisig | None:
    """The owner's multisig when it is a UTXO one (an Owner's `multisig`, narrowed)."""
    found = getattr(owner, "multisig", None)
    return found if isinstance(found, Multisig) else None


def parse_multisig(
    threshold: object, public_keys: Sequence[object], address_type: str, segwit_chain: bool
) -> Multisig:
    """The multisig these request fields describe, or a refusal that says why.

    Raises:
        ChainError: code "invalid_multisig": a threshold out of 1..n, fewer than two
            or more than 15 keys, a key that is not a compressed point on the curve,
            the same key twice, an address type the coin does not have.
    """
    if address_type not in TYPES:
        raise ChainError(f"address_type is one of {', '.join(TYPES)}", INVALID)
    if not segwit_chain and address_type != "p2sh":
        raise ChainError("this coin has no segwit: a multisig is p2sh", INVALID)
    m, keys = members(threshold, public_keys)
    return Multisig(m, tuple(sorted(keys)), address_type)


def _descriptor(threshold: int, keys: Sequence[str], address_type: str) -> str:
    inner = f"sortedmulti({threshold},{','.join(keys)})"
    text = {"p2wsh": "wsh({})", "p2sh-p2wsh": "sh(wsh({}))", "p2sh": "sh({})"}
    return str(add_checksum(text[address_type].format(inner)))


def register(
    threshold: object, public_keys: Sequence[object], address_type: str | None, network: Network
) -> Multisig:
    """A registration's multisig: P2WSH by default where the coin has segwit (a network
    with a bech32 prefix), else P2SH (`parse_multisig` checks the rest)."""
    segwit_chain = network.hrp is not None
    kind = address_type or ("p2wsh" if segwit_chain else "p2sh")
    return parse_multisig(threshold, public_keys, kind, segwit_chain)


def build(threshold: int, keys: Sequence[bytes], address_type: str) -> Multisig:
    """The multisig of checked keys, sorted (BIP67)."""
    return Multisig(threshold, tuple(sorted(keys)), address_type)


def ranged_descriptor(threshold: int, keys: Sequence[str], address_type: str) -> str:
    """An HD multisig's receive chain: `sortedmulti` of each member's [origin]xpub/0/*,
    as P2WSH or P2SH-P2WSH (BIP48's script types), with its checksum."""
    return _descriptor(threshold, [f"{k}/0/*" for k in keys], address_type)


# A segwit coin's multisigs (Litecoin): every form, and HD ones of a wallet (BIP48 has
# script types for the segwit forms only); a coin without segwit (Dogecoin): P2SH.
SEGWIT_FORMS: Final = MultisigForms(
    TYPES, register, build, hd_types=("p2wsh", "p2sh-p2wsh"), hd_descriptor=ranged_descriptor
)
LEGACY_FORMS: Final = MultisigForms(("p2sh",), register, build)


def pushdata(data: bytes) -> bytes:
    """A minimal push of `data` (a redeem script may be up to 520 bytes)."""
    n = len(data)
    if n < 0x4C:
        return bytes((n,)) + data
    if n <= 0xFF:
        return b"\x4c" + bytes((n,)) + data
    return b"\x4d" + n.to_bytes(2, "little") + data


def check_signatures(inp: Any, ms: Multisig, digest: bytes, index: int) -> None:
    """The signatures a PSBT input already carries (another member's): each by a key of
    this multisig, SIGHASH_ALL, and valid over this input's sighash. A finalized input
    with a bad one would be a transaction no node accepts; a key from elsewhere means
    the PSBT is not for this multisig.

    Raises:
        ChainError: code "invalid_signature".
    """
    for pub, sig in inp.partial_sigs.items():
        if pub.sec() not in ms.keys:
            raise ChainError(
                f"input {index} carries a signature by a key that is not in this multisig",
                "invalid_signature",
            )
        try:
            good = sig[-1:] == b"\x01" and pub.verify(ec.Signature.parse(sig[:-1]), digest)
        except Exception:  # embit: not DER
            good = False
        if not good:
            raise ChainError(
                f"input {index} carries a signature by {pub.sec().hex()} that "
                "does not verify over its sighash (SIGHASH_ALL)",
                "invalid_signature",
            )


def finalize(inp: Any, ms: Multisig) -> bool:
    """Finalize an input when it holds at least `threshold` member signatures: the first
    ones in the script's key order (CHECKMULTISIG reads them in that order), after
    CHECKMULTISIG's extra empty item. Cleared as BIP174's finalizer clears them."""
    by_key = {pub.sec(): sig for pub, sig in inp.partial_sigs.items()}
    sigs = [by_key[k] for k in ms.keys if k in by_key][: ms.threshold]
    if len(sigs) < ms.threshold:
        return False
    if ms.segwit:
        inp.final_scriptwitness = Witness([b"", *sigs, ms.script])
        redeem = ms.redeem_script
        inp.final_scriptsig = Script(pushdata(redeem)) if redeem is not None else None
    else:
        pushes = b"".join(pushdata(s) for s in sigs)
        inp.final_scriptsig = Script(b"\x00" + pushes + pushdata(ms.script))
        inp.final_scriptwitness = None
    inp.partial_sigs.clear()
    inp.redeem_script = None
    inp.witness_script = None
    inp.sighash_type = None
    inp.bip32_derivations.clear()
    return True
