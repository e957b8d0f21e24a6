"""mnemonic_vectors.json: every phrase x account index x family x network x address type."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Callable
from typing import Any

import pytest
from bip_utils import Bip39Languages  # type: ignore[import-untyped]
from bip_utils.bip.bip39.bip39_mnemonic_utils import (  # type: ignore[import-untyped]
    Bip39WordsListGetter,
)
from tests.chains.chain_vectors import (
    COSMOS,
    DOGECOIN,
    MNEMONICS,
    lookup,
    mnemonic_by_id,
    mnemonic_entry,
    without,
)

from chainkeys.chains import encoding
from chainkeys.chains.hd import Seed, key_from_mnemonic
from chainkeys.chains.mnemonic import seed_from_mnemonic
from chainkeys.chains.spec import ChainError, Key

ABANDON_ABOUT = mnemonic_by_id("bip39-abandon-about")


def _groups() -> list[Any]:
    params = [pytest.param(m, "", id=f"{m['id']}/seed") for m in MNEMONICS["mnemonics"]]
    for m in MNEMONICS["mnemonics"]:
        for account in m["accounts"]:
            index = account["account_index"]
            for family in ("cosmos", "eos"):
                params.append(
                    pytest.param(m, f"accounts.{index}.{family}", id=f"{m['id']}/{index}/{family}")
                )
            for network in account["dogecoin"]:
                group = f"accounts.{index}.dogecoin.{network}"
                params.append(pytest.param(m, group, id=f"{m['id']}/{index}/dogecoin.{network}"))
            for network, types in account["litecoin"].items():
                for vector_type in types:
                    group = f"accounts.{index}.litecoin.{network}.{vector_type}"
                    params.append(
                        pytest.param(
                            m, group, id=f"{m['id']}/{index}/litecoin.{network}.{vector_type}"
                        )
                    )
    return params


@pytest.mark.parametrize(("vector", "group"), _groups())
def test_mnemonic_derivations_match_vectors(vector: dict[str, Any], group: str) -> None:
    """Path, key, public key, address and export of one group, all fields at once.

    `testnet_coin_type_3`/`_2` (the other wallets' convention) are rebuilt by
    giving the testnet row another coin type: the default stays coin type 1.
    """
    rebuilt = mnemonic_entry(vector["mnemonic"], vector["passphrase"])
    if group:
        assert lookup(rebuilt, group) == lookup(vector, group)
    else:
        top = without(vector, "id", "source", "accounts")
        assert {k: rebuilt[k] for k in top} == top


@pytest.mark.parametrize("vector", MNEMONICS["mnemonics"], ids=lambda m: m["id"])
def test_vector_groups_are_all_compared(vector: dict[str, Any]) -> None:
    """No group of the file escapes `_groups` (a new family or type would fail here)."""
    for account in vector["accounts"]:
        assert set(account) == {"account_index", "cosmos", "dogecoin", "litecoin", "eos"}


def test_testnets_use_coin_type_1() -> None:
    account = ABANDON_ABOUT["accounts"][0]
    key = key_from_mnemonic(
        DOGECOIN,
        ABANDON_ABOUT["mnemonic"],
        "",
        0,
        DOGECOIN.network("testnet"),
        DOGECOIN.options({}, None),
    )
    assert key.path == "m/44'/1'/0'/0/0" == account["dogecoin"]["testnet"]["path"]
    assert key.secret.hex() != account["dogecoin"]["testnet_coin_type_3"]["private_key_hex"]


# ---------------------------------------------------------------- invalid[]


def _is_normalisation(entry: dict[str, Any]) -> bool:
    return bool(entry["category"] == "normalisation")


@pytest.mark.parametrize(
    "entry", [e for e in MNEMONICS["invalid"] if not _is_normalisation(e)], ids=lambda e: e["id"]
)
def test_invalid_mnemonics_are_refused_before_deriving(entry: dict[str, Any]) -> None:
    with pytest.raises(ChainError) as caught:
        key_from_mnemonic(
            COSMOS,
            entry["input"],
            entry["passphrase"],
            0,
            COSMOS.network(None),
            COSMOS.options({}, None),
        )
    assert caught.value.code == "invalid_mnemonic"
    message = caught.value.message
    expected = {"checksum": "checksum", "word_count": "words", "unknown_word": "word"}
    assert expected[entry["category"]] in message or message == "mnemonic is empty"
    for word in set(entry["input"].split()):
        if len(word) >= 4:
            assert word not in message


@pytest.mark.parametrize(
    "entry", [e for e in MNEMONICS["invalid"] if _is_normalisation(e)], ids=lambda e: e["id"]
)
def test_case_and_whitespace_are_normalised(entry: dict[str, Any]) -> None:
    """The service normalises rather than refuses: same wallet, never the raw-string seed."""
    canonical = mnemonic_by_id(entry["if_normalised"]["same_as_id"])
    seed = seed_from_mnemonic(entry["input"], entry["passphrase"])
    assert seed.hex() == canonical["seed_hex"]
    assert seed.hex() != entry["forbidden_seed_hex"]
    rebuilt = mnemonic_entry(entry["input"], entry["passphrase"])
    assert rebuilt["accounts"] == canonical["accounts"]


def test_unknown_word_message_names_the_position() -> None:
    entry = next(e for e in MNEMONICS["invalid"] if e["id"] == "unknown-word-typo")
    with pytest.raises(ChainError, match="word 3 is not in the English BIP-39 word list"):
        seed_from_mnemonic(entry["input"], "")


@pytest.mark.parametrize(
    ("count", "expected"), [(9, "9 words"), (13, "13 words"), (25, "25 words")], ids=str
)
def test_word_count_message(count: int, expected: str) -> None:
    with pytest.raises(ChainError, match=expected):
        seed_from_mnemonic(" ".join(["abandon"] * count), "")


def test_absurdly_long_input_is_refused_before_normalising() -> None:
    with pytest.raises(ChainError, match="too long"):
        seed_from_mnemonic("abandon " * 1000, "")


# ---------------------------------------------------------------- edge_cases[]


def _edge(case_id: str) -> dict[str, Any]:
    return next(c for c in MNEMONICS["edge_cases"] if c["id"] == case_id)


def _cosmos_address(mnemonic: str, passphrase: str) -> str:
    network = COSMOS.network(None)
    key = key_from_mnemonic(COSMOS, mnemonic, passphrase, 0, network, COSMOS.options({}, None))
    return COSMOS.account(key, network, COSMOS.options({}, key)).address


def test_fullwidth_letters_fold_to_abandon_about() -> None:
    case = _edge("nfkd-fullwidth-letters")
    assert seed_from_mnemonic(case["input"], case["passphrase"]).hex() == ABANDON_ABOUT["seed_hex"]
    expected = ABANDON_ABOUT["accounts"][0]["cosmos"]["addresses"]["cosmos"]
    assert _cosmos_address(case["input"], case["passphrase"]) == expected


def test_passphrase_is_nfkd_normalised() -> None:
    case = _edge("passphrase-nfkd")
    composed, decomposed = case["passphrases"]
    assert composed != decomposed
    for passphrase in (composed, decomposed):
        assert seed_from_mnemonic(case["mnemonic"], passphrase).hex() == case["seed_hex"]
        assert (
            _cosmos_address(case["mnemonic"], passphrase) == case["cosmos_address_account_index_0"]
        )


def test_passphrase_whitespace_is_significant() -> None:
    case = _edge("passphrase-whitespace-is-significant")
    seed = seed_from_mnemonic(case["mnemonic"], case["passphrase"])
    assert seed.hex() == case["seed_hex"]
    assert seed.hex() != mnemonic_by_id(case["not_same_as_id"])["seed_hex"]
    assert (
        _cosmos_address(case["mnemonic"], case["passphrase"])
        == case["cosmos_address_account_index_0"]
    )


def test_spanish_phrase_is_refused() -> None:
    case = _edge("other-language-spanish")
    with pytest.raises(ChainError, match="word 1 is not in the English") as caught:
        seed_from_mnemonic(case["input"], case["passphrase"])
    assert caught.value.code == "invalid_mnemonic"


def test_edge_cases_are_all_handled() -> None:
    assert {c["id"] for c in MNEMONICS["edge_cases"]} == {
        "nfkd-fullwidth-letters",
        "passphrase-nfkd",
        "passphrase-whitespace-is-significant",
        "other-language-spanish",
    }


# ---------------------------------------------------------------- anchors[]

FIELD_ANCHORS = [a for a in MNEMONICS["anchors"] if a.get("field")]
# Anchors at other paths that a key, address or WIF can be checked against.
PATH_ANCHORS: dict[str, Callable[[Key], str]] = {
    "bitcoin p2wpkh": lambda key: encoding.p2wpkh_address(key.public, "bc"),
    "public key": lambda key: key.public.hex(),
    "private key (compressed WIF, 0x80)": lambda key: encoding.encode_wif(key, b"\x80"),
    "dogecoin testnet wif": lambda key: DOGECOIN.export_private_key(
        key, DOGECOIN.network("testnet")
    ),
    "dogecoin testnet p2pkh": lambda key: (
        DOGECOIN.account(key, DOGECOIN.network("testnet"), DOGECOIN.options({}, key)).address
    ),
    "litecoin p2sh-p2wpkh with the deprecated 0x05 version": lambda key: encoding.p2sh_p2wpkh_address(
        key.public, b"\x05"
    ),
}
# Extended-key serialisations (xprv/xpub/zprv/dgpv/Mtpv) are not part of the
# chain API; the key pipeline they check is covered by the anchors above.
NOT_APPLICABLE = {
    "root zprv",
    "dogecoin account dgpv",
    "dogecoin account dgub",
    "litecoin account extended private key",
    "cosmos account xpub",
}


def _compared(anchor: dict[str, Any], ours: str) -> str:
    """Our value in the form the anchor was compared as (another chain's encoding)."""
    how = anchor.get("compared_as", "identical string")
    if how.startswith("identical string"):
        return ours
    if "base58 payload" in how:
        payload = encoding.base58check_decode(ours, what="address", code="test")
        return payload[1:].hex()
    if how.startswith("witness program"):
        return encoding.decode_segwit_v0(ours, {"tltc"}, what="address", code="test")[1].hex()
    if how.startswith("base64 of the compressed key"):
        return base64.b64encode(bytes.fromhex(ours)).decode()
    if how == 'same 20 bytes with hrp "wasm"':
        data = encoding.decode_bech32(ours, {"cosmos"}, what="address", code="test")[1]
        return encoding.bech32_encode("wasm", data)
    raise AssertionError(f"unhandled anchor comparison: {how}")


@pytest.mark.parametrize("anchor", FIELD_ANCHORS, ids=lambda a: f"{a['mnemonic_id']}/{a['field']}")
def test_field_anchors(anchor: dict[str, Any]) -> None:
    vector = mnemonic_by_id(anchor["mnemonic_id"])
    ours = lookup(mnemonic_entry(vector["mnemonic"], vector["passphrase"]), anchor["field"])
    if anchor.get("compared_as", "").startswith("base64"):
        # Here `expected` is the other form and `expected_compared_value` ours.
        assert ours == anchor["expected_compared_value"]
        assert _compared(anchor, ours) == anchor["expected"]
    else:
        assert _compared(anchor, ours) == anchor.get("expected_compared_value", anchor["expected"])


@pytest.mark.parametrize(
    "anchor",
    [a for a in MNEMONICS["anchors"] if a.get("what") in PATH_ANCHORS],
    ids=lambda a: f"{a['mnemonic_id']}/{a['path']}/{a['what']}",
)
def test_path_anchors(anchor: dict[str, Any]) -> None:
    vector = mnemonic_by_id(anchor["mnemonic_id"])
    key = Seed(seed_from_mnemonic(vector["mnemonic"], vector["passphrase"])).key(anchor["path"])
    assert PATH_ANCHORS[anchor["what"]](key) == anchor["expected"]


def test_english_word_list_is_the_published_one() -> None:
    getter = Bip39WordsListGetter().GetByLanguage(Bip39Languages.ENGLISH)
    text = "".join(f"{getter.GetWordAtIdx(i)}\n" for i in range(getter.Length()))
    anchor = next(
        a for a in MNEMONICS["anchors"] if a.get("what", "").startswith("English wordlist")
    )
    assert hashlib.sha256(text.encode()).hexdigest() == anchor["expected"]
    assert MNEMONICS["params"]["bip39"]["wordlist_sha256"] == anchor["expected"]


def test_every_anchor_is_checked_or_listed() -> None:
    for anchor in MNEMONICS["anchors"]:
        what = anchor.get("what", "")
        assert (
            anchor.get("field")
            or what in PATH_ANCHORS
            or what in NOT_APPLICABLE
            or what.startswith("English wordlist")
        ), anchor
