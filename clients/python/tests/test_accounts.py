"""Accounts through the client against a real server: every family, with the
addresses checked against the shared key vectors."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from conftest import VECTORS_DIR, Server

from chainkeys_client import Account, Client, Conflict, NotFound

FAMILIES = ("cosmos", "dogecoin", "eos", "litecoin")


def key(vectors: dict[str, Any], id_: str) -> dict[str, Any]:
    found: dict[str, Any] = next(k for k in vectors["keys"] if k["id"] == id_)
    return found


def expected(family: str, k: dict[str, Any]) -> dict[str, str]:
    """(import form, address, public key) of vector key `k` on the family's default network."""
    if family == "cosmos":
        return {"import": k["private_key_hex"], "address": k["cosmos"]["addresses"]["cosmos"],
                "public_key": k["public_key_compressed_hex"], "export": k["private_key_hex"]}  # fmt: skip
    if family == "dogecoin":
        m = k["dogecoin"]["mainnet"]
        return {"import": m["wif"], "address": m["p2pkh"],
                "public_key": k["public_key_compressed_hex"], "export": m["wif"]}  # fmt: skip
    if family == "litecoin":
        m = k["litecoin"]["mainnet"]
        return {"import": m["wif"], "address": m["p2wpkh"],
                "public_key": k["public_key_compressed_hex"], "export": m["wif"]}  # fmt: skip
    e = k["eos"]
    return {"import": e["private_key_k1"], "public_key": e["public_key_legacy"],
            "export": e["private_key_wif"]}  # fmt: skip


@pytest.mark.parametrize("family", FAMILIES)
def test_import_get_list_export_delete(
    family: str, client_for: Callable[..., Client], vectors: dict[str, Any]
) -> None:
    ck = client_for(tenant=f"acc-{family}")
    want = expected(family, key(vectors, "scalar-three"))
    made = ck.accounts.create(family, private_key=want["import"])
    assert isinstance(made, Account)
    assert made.family == family and made.message == "account imported"
    assert made.public_key == want["public_key"]
    assert made.private_key is None  # an imported key is never echoed
    if family == "eos":
        assert made.public_key_k1 == key(vectors, "scalar-three")["eos"]["public_key_k1"]
        assert len(made.name) == 12
    else:
        assert made.address == made.name == want["address"]

    got = ck.accounts.get(family, made.name)
    assert (got.name, got.address, got.public_key) == (made.name, made.address, want["public_key"])
    assert got.private_key is None and got.network is not None
    assert ck.accounts.get(family, made.name, network=got.network).name == made.name
    with pytest.raises(NotFound):
        ck.accounts.get(family, made.name, network="somewhere-else")

    page = ck.accounts.list(family)
    assert made.name in page.names
    if family == "cosmos":
        listed = next(k for k in page.keys if k.name == made.name)
        assert listed.pubkey == key(vectors, "scalar-three")["cosmos"]["pubkey_keyring_json_string"]

    exported = ck.accounts.export(family, made.name)
    assert exported.private_key == want["export"]
    assert exported.address == made.address
    assert "private_key" not in repr(exported).replace("private_key=<hidden>", "")

    with pytest.raises(Conflict) as conflict:  # same key again in the tenant
        ck.accounts.create(family, private_key=want["import"])
    assert conflict.value.status == 409

    assert ck.accounts.delete(family, made.name) is None
    with pytest.raises(NotFound) as gone:
        ck.accounts.get(family, made.name)
    assert gone.value.status == 404 and gone.value.code
    assert made.name not in ck.accounts.list(family).names


@pytest.mark.parametrize("family", FAMILIES)
def test_generate_returns_the_key_once(family: str, client_for: Callable[..., Client]) -> None:
    ck = client_for(tenant=f"gen-{family}")
    made = ck.accounts.create(family)
    assert made.private_key and made.message == "account created"
    again = ck.accounts.get(family, made.name)
    assert again.private_key is None and again.address == made.address
    assert ck.accounts.export(family, made.name).private_key == made.private_key


def test_networks_and_address_types(
    client_for: Callable[..., Client], vectors: dict[str, Any]
) -> None:
    ck = client_for(tenant="nets")
    k = key(vectors, "scalar-two")
    osmo = ck.accounts.create("cosmos", network="osmosis", private_key=k["private_key_hex"])
    assert osmo.address == k["cosmos"]["addresses"]["osmo"] and osmo.network == "osmosis"
    doge_t = ck.accounts.create(
        "dogecoin", network="testnet", private_key=k["dogecoin"]["testnet"]["wif"]
    )
    assert doge_t.address == k["dogecoin"]["testnet"]["p2pkh"]
    ltc = k["litecoin"]["mainnet"]
    for address_type, field in (("p2pkh", "p2pkh"), ("p2sh-p2wpkh", "p2sh_p2wpkh")):
        made = ck.accounts.create(
            "litecoin", private_key=k["private_key_hex"], address_type=address_type
        )
        assert made.address == ltc[field]
        ck.accounts.delete("litecoin", made.name)  # one key per tenant and family
    named = ck.accounts.create("eos", private_key=k["eos"]["private_key_wif"], name="clienttest12")
    assert named.name == "clienttest12" and named.public_key == k["eos"]["public_key_legacy"]

    networks = ck.networks()
    assert networks.families["cosmos"].default == "cosmoshub"
    assert {n.name for n in networks.families["litecoin"].networks} >= {"mainnet", "testnet"}
    osmosis = next(n for n in networks.families["cosmos"].networks if n.name == "osmosis")
    assert osmosis.bech32_prefix == "osmo"


def test_mnemonic_import(client_for: Callable[..., Client]) -> None:
    mnemonics = json.loads((VECTORS_DIR / "mnemonic_vectors.json").read_text())["mnemonics"]
    vec = next(m for m in mnemonics if m["id"] == "bip39-abandon-about")
    acct = next(a for a in vec["accounts"] if a["account_index"] == 1)
    ck = client_for(tenant="mnemonic")
    common = {"mnemonic": vec["mnemonic"], "account_index": 1}
    assert ck.accounts.create("cosmos", **common).address == acct["cosmos"]["addresses"]["cosmos"]
    assert ck.accounts.create("dogecoin", **common).address == acct["dogecoin"]["mainnet"]["p2pkh"]
    ltc = ck.accounts.create("litecoin", **common)
    assert ltc.address == acct["litecoin"]["mainnet"]["p2wpkh"]["address"]
    eos = ck.accounts.create("eos", **common)
    assert eos.public_key == acct["eos"]["public_key_legacy"]
    exported = ck.accounts.export("litecoin", ltc.name)
    assert exported.private_key == acct["litecoin"]["mainnet"]["p2wpkh"]["wif"]
    assert exported.path == acct["litecoin"]["mainnet"]["p2wpkh"]["path"]


@pytest.mark.parametrize("family", FAMILIES)
def test_pagination_across_pages(family: str, client_for: Callable[..., Client]) -> None:
    ck = client_for(tenant=f"pages-{family}")
    made = {ck.accounts.create(family).name for _ in range(5)}
    first = ck.accounts.list(family, limit=2)
    assert len(first.keys) == 2 and first.next_cursor
    second = ck.accounts.list(family, limit=2, cursor=first.next_cursor)
    assert len(second.keys) == 2 and not set(first.names) & set(second.names)
    everything = [k.name for k in ck.accounts.iter(family, page_size=2)]
    assert len(everything) == len(set(everything)) == 5
    assert set(everything) == made


def test_idempotent_create_returns_the_same_account(
    client_for: Callable[..., Client], server: Server
) -> None:
    ck = client_for(tenant="idem")
    first = ck.accounts.create("dogecoin", idempotency_key="client-test-key-1")
    again = ck.accounts.create("dogecoin", idempotency_key="client-test-key-1")
    assert again.name == first.name and again.replayed and not first.replayed
    assert again.private_key == first.private_key  # the first answer, replayed
    other = ck.accounts.create("dogecoin")  # a fresh key each call: a new account
    assert other.name != first.name
    assert [k.name for k in ck.accounts.iter("dogecoin")].count(first.name) == 1
