"""HD key vectors: BIP39 seeds (the Trezor reference vectors, passphrase TREZOR), BIP84's
published account keys and addresses, BIP380 checksums, and extended-key versions."""

from __future__ import annotations

import pytest

from chainkeys.chains import hd
from chainkeys.chains.cosmos import FAMILY as COSMOS
from chainkeys.chains.litecoin import FAMILY as LITECOIN
from chainkeys.chains.mnemonic import seed_from_mnemonic
from chainkeys.chains.spec import ChainError

# github.com/trezor/python-mnemonic vectors.json (BIP39's reference vectors)
BIP39 = [
    (
        "abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon about",
        "c55257c360c07c72029aebc1b53c05ed0362ada38ead3e3e9efa3708e53495531f09a6987599d18264c1e1c92f2cf141630c7a3c4ab7c81b2f001698e7463b04",
    ),
    (
        "legal winner thank year wave sausage worth useful legal winner thank yellow",
        "2e8905819b8723fe2c1d161860e5ee1830318dbf49a83bd451cfb8440c28bd6fa457fe1296106559a3c80937a1c1069be3a3a5bd381ee6260e8d9739fce1f607",
    ),
    (
        "letter advice cage absurd amount doctor acoustic avoid letter advice cage above",
        "d71de856f81a8acc65e6fc851a38d4d7ec216fd0796d0a6827a3ad6ed5511a30fa280f12eb2e47ed2ac03b5c462a0358d18d69fe4f985ec81778c1b370b652a8",
    ),
    (
        "zoo zoo zoo zoo zoo zoo zoo zoo zoo zoo zoo wrong",
        "ac27495480225222079d7be181583751e86f571027b0497b5b5d11218e0a8a13332572917f0f8e5a589620c6f15b11c61dee327651a14c34e18231052e48c069",
    ),
    (
        "abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon art",
        "bda85446c68413707090a52022edd26a1c9462295029f2e60cd7c4f2bbd3097170af7a4d73245cafa9c3cca8d561a7c3de6f5d4a10be8ed2a5e608d68f92fcc8",
    ),
]


@pytest.mark.parametrize(("mnemonic", "seed"), BIP39)
def test_bip39_reference_seeds_with_the_trezor_passphrase(mnemonic: str, seed: str) -> None:
    assert seed_from_mnemonic(mnemonic, "TREZOR").hex() == seed


def test_bip84_published_account_key_and_first_address() -> None:
    """BIP84's test vector (Bitcoin, coin type 0): the zpub serialisation is exact."""
    seed = hd.Seed(seed_from_mnemonic(BIP39[0][0]))
    key = seed.xpub("m/84'/0'/0'", "zpub")
    assert key.xpub == (
        "zpub6rFR7y4Q2AijBEqTUquhVz398htDFrtymD9xYYfG1m4wAcvPhXNfE3EfH1r1ADqtfSdVCToUG868RvUUkgDKf31mGDtKsAYz2oz2AGutZYs"
    )
    assert key.fingerprint == "73c5da0a"
    first = seed.key("m/84'/0'/0'/0/0")
    assert (
        first.public.hex() == "0330d54fd0dd420a6e5f8d3624f5f3482cae350f79d5f0753bf5beef9c2d91af3c"
    )


def test_descriptor_checksums_are_bip380s() -> None:
    seed = hd.Seed(seed_from_mnemonic(BIP39[0][0]))
    network = LITECOIN.network("mainnet")
    desc = hd.descriptor(seed, "m/84'/2'/0'", network, "p2wpkh", 0)
    body, _, check = desc.partition("#")
    assert body.startswith("wpkh([73c5da0a/84'/2'/0']xpub") and body.endswith("/0/*)")
    from embit.descriptor.checksum import checksum

    assert check == checksum(body) and len(check) == 8


def test_formats_and_paths_refuse_what_does_not_fit() -> None:
    mainnet, testnet = LITECOIN.network("mainnet"), LITECOIN.network("testnet")
    assert hd.check_format(LITECOIN, mainnet, "p2wpkh", None) == "xpub"
    assert hd.check_format(LITECOIN, testnet, "p2wpkh", None) == "tpub"
    with pytest.raises(ChainError, match="does not fit"):
        hd.check_format(LITECOIN, mainnet, "p2pkh", "zpub")
    with pytest.raises(ChainError, match="tpub"):
        hd.check_format(LITECOIN, testnet, "p2wpkh", "xpub")
    with pytest.raises(ChainError, match="index"):
        hd.hd_path(44, 118, 0, 0, 2**31)
    with pytest.raises(ChainError, match="change"):
        hd.hd_path(44, 118, 0, 2, 0)
    assert hd.account_path(COSMOS, COSMOS.network(None), None, 3) == "m/44'/118'/3'"


@pytest.mark.parametrize("words", [12, 15, 18, 21, 24])
def test_generated_phrases_are_valid_and_distinct(words: int) -> None:
    phrases = {hd.generate_mnemonic(words) for _ in range(5)}
    assert len(phrases) == 5 and all(len(p.split()) == words for p in phrases)
    for phrase in phrases:
        seed_from_mnemonic(phrase)  # the checksum verifies
    with pytest.raises(ChainError, match="words"):
        hd.generate_mnemonic(13)
