"""The networks `verify_approval` (_verify.py) reads: this client's own table of each
chain's public parameters (chain ids, bech32 prefixes, base58 version bytes), as a
wallet keeps them, never read from the server whose approval is being checked.

Every network a chainkeys server serves is here, testnets and regtests too. A network
missing from this table is a difference, never a pass: its addresses cannot be written
as its wallets write them. Beyond the request's own decoding (_verify_chains.py), the
network is held to two things: the request's chain id is the network's (an approval
of a testnet request shown under a mainnet's name, or the reverse, is named), and the
account is the address the signer's public key has on that network.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any

from chainkeys_client._check import _convert, _polymod, dsha256, hash160
from chainkeys_client._check_utxo import account_script


@dataclass(frozen=True)
class Net:
    """One network's parameters: what its requests name (chain id) and how its
    addresses are written (bech32 prefix, base58 version bytes)."""

    chain_id: str | None = None
    hrp: str | None = None  # Cosmos addresses; Litecoin's segwit outputs
    p2pkh: int | None = None
    p2sh: int | None = None


def _cosmos(chain_id: str, hrp: str) -> Net:
    return Net(chain_id=chain_id, hrp=hrp)


def _eos(chain_id: str) -> Net:
    return Net(chain_id=chain_id)


NETWORKS: dict[str, dict[str, Net]] = {
    "cosmos": {  # the chains' registries (chain_id, bech32_prefix)
        "cosmoshub": _cosmos("cosmoshub-4", "cosmos"),
        "cosmoshub-testnet": _cosmos("provider", "cosmos"),  # the ICS provider testnet
        "osmosis": _cosmos("osmosis-1", "osmo"),
        "osmosis-testnet": _cosmos("osmo-test-5", "osmo"),
        "juno": _cosmos("juno-1", "juno"),
        "akash": _cosmos("akashnet-2", "akash"),
        "stargaze": _cosmos("stargaze-1", "stars"),
        "celestia": _cosmos("celestia", "celestia"),
    },
    "dogecoin": {  # Dogecoin Core chainparams.cpp (no segwit addresses)
        "mainnet": Net(p2pkh=0x1E, p2sh=0x16),
        "testnet": Net(p2pkh=0x71, p2sh=0xC4),
        "regtest": Net(p2pkh=0x6F, p2sh=0xC4),
    },
    "litecoin": {  # Litecoin Core chainparams.cpp
        "mainnet": Net(hrp="ltc", p2pkh=0x30, p2sh=0x32),
        "testnet": Net(hrp="tltc", p2pkh=0x6F, p2sh=0x3A),
        "regtest": Net(hrp="rltc", p2pkh=0x6F, p2sh=0x3A),
    },
    "eos": {  # each chain's id (the hash of its genesis)
        "eos": _eos("aca376f206b8fc25a6ed44dbdc66547c36c6c33e3a119ffbeaef943642f0e906"),
        "jungle4": _eos("73e4385a2708e6d7048834fbc1079f2fabb17b3c125b146af438971e90716c4d"),
        "wax": _eos("1064487b3cd1a897ce03ae5b6a865651747e2e152090f99c1d19d44e01aea5a4"),
        "telos": _eos("4667b205c6838ef70ff7988f6e8257e8be0e1284a2f59699054a018f743b1d11"),
    },
}


def unknown(family: str, signer: dict[str, Any]) -> str | None:
    """Why the signer's network cannot be verified here (None: it can)."""
    known = NETWORKS.get(family, {})
    if isinstance(signer.get("network"), str) and signer["network"] in known:
        return None
    return (f"network: {family} {signer.get('network')!r} is not a network this client "
            f"knows ({', '.join(known)})")  # fmt: skip


def net_of(family: str, signer: dict[str, Any]) -> Net:
    """The signer's network (`unknown` has said it is one)."""
    return NETWORKS[family][str(signer["network"])]


B58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
BECH32 = "qpzry9x8gf2tvdw0s3jn54khce6mua7l"


def _b58check(payload: bytes) -> str:
    data = payload + dsha256(payload)[:4]
    n, out = int.from_bytes(data, "big"), ""
    while n:
        n, r = divmod(n, 58)
        out = B58[r] + out
    return "1" * (len(data) - len(data.lstrip(b"\0"))) + out


def bech32(hrp: str, data: list[int], const: int = 1) -> str:
    """BIP173 (const 1) or BIP350 bech32m (const 0x2BC830A3) of 5-bit `data`."""
    values = [ord(c) >> 5 for c in hrp] + [0] + [ord(c) & 31 for c in hrp] + data
    mod = _polymod([*values, 0, 0, 0, 0, 0, 0]) ^ const
    checksum = [(mod >> 5 * (5 - i)) & 31 for i in range(6)]
    return hrp + "1" + "".join(BECH32[d] for d in data + checksum)


def utxo_address(net: Net, script: bytes) -> str | None:
    """The address `script` pays on `net` as its wallets write it; None for a script
    with no address there (a bare multisig, OP_RETURN, a segwit output on Dogecoin)."""
    if len(script) == 25 and script[:3] == b"\x76\xa9\x14" and script[23:] == b"\x88\xac":
        return _b58check(bytes((net.p2pkh or 0,)) + script[3:23])
    if len(script) == 23 and script[:2] == b"\xa9\x14" and script[22:] == b"\x87":
        return _b58check(bytes((net.p2sh or 0,)) + script[2:22])
    witness = len(script) >= 4 and (script[0] == 0 or 0x51 <= script[0] <= 0x60)
    if net.hrp and witness and script[1] == len(script) - 2:
        version = 0 if script[0] == 0 else script[0] - 0x50
        if version == 0 and len(script) not in (22, 34):
            return None
        program = [version, *(_convert(list(script[2:]), 8, 5) or b"")]
        return bech32(net.hrp, program, 1 if version == 0 else 0x2BC830A3)
    return None


def _own_address(family: str, net: Net, signer: dict[str, Any]) -> str | None:
    """The address the signer's public key has on `net` (None: an EOS account's name,
    which its key does not make)."""
    if family == "cosmos":
        pub = base64.b64decode(str(signer["public_key"]), validate=True)
        return bech32(str(net.hrp), list(_convert(list(hash160(pub)), 8, 5) or b""))
    if family in ("dogecoin", "litecoin"):
        pub = bytes.fromhex(str(signer["public_key"]))
        return utxo_address(net, account_script(signer.get("address_type") or "p2pkh", pub))
    return None


def differences(family: str, signer: dict[str, Any], account: str, chain_id: str | None
                ) -> list[str]:  # fmt: skip
    """What the request's chain id and the account say against the signer's network."""
    net, found = net_of(family, signer), []
    name = signer["network"]
    said = chain_id.lower() if chain_id is not None and family == "eos" else chain_id  # hex
    if said is not None and net.chain_id is not None and said != net.chain_id:
        found.append(f"chain_id: the request is for {chain_id!r}, {family} {name!r} is "
                     f"{net.chain_id!r}")  # fmt: skip
    try:
        own = _own_address(family, net, signer)
    except (KeyError, TypeError, ValueError):
        return [*found, "account: the signer's public key does not decode"]
    if own is not None and own != account:
        found.append(f"account: the approval says {account!r}, the signer's key on {name!r} "
                     f"is {own!r}")  # fmt: skip
    return found
