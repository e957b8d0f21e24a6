"""HD wallets through the client against a real server: import and generate, derive
(checked against the repository's BIP39 vectors), extended keys, export, delete, and a
derived account signing; what a lost answer does to create and derive."""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable

import httpx
import pytest
from ckc_helpers import amino_bytes, verify_compact
from conftest import VECTORS_DIR, Server

from chainkeys_client import (
    BadRequest,
    Client,
    Conflict,
    DerivedAccount,
    NotFound,
    TransportError,
    Wallet,
)

MNEMONICS = json.loads((VECTORS_DIR / "mnemonic_vectors.json").read_text())
ABANDON = next(m for m in MNEMONICS["mnemonics"] if m["id"] == "bip39-abandon-about")
PHRASE: str = ABANDON["mnemonic"]
AT = ABANDON["accounts"]  # index 0 and 1 of account 0, receive chain
FINGERPRINT = "73c5da0a"


class LossyTransport(httpx.HTTPTransport):
    """The real network, except that the answers of the first `lose` requests to `path`
    are lost after the server handled them (a timeout, as a client sees it)."""

    def __init__(self, path: str, lose: int = 1) -> None:
        super().__init__()
        self.path, self.lose = path, lose
        self.seen: list[httpx.Request] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = super().handle_request(request)
        if request.url.path == self.path:
            self.seen.append(request)
            if self.lose > 0:
                self.lose -= 1
                response.read()
                response.close()
                raise httpx.ReadTimeout("answer lost", request=request)
        return response


def test_import_derive_sign_xpub_export_delete(client_for: Callable[..., Client]) -> None:
    ck = client_for(tenant="wal-import", scopes="read,create,delete,sign,export")
    wallet = ck.wallets.create(name="main", mnemonic=PHRASE)
    assert isinstance(wallet, Wallet)
    assert wallet.id.startswith("wal_") and wallet.name == "main"
    assert wallet.fingerprint == FINGERPRINT and wallet.exported is False
    assert "abandon" not in repr(wallet)
    with pytest.raises(Conflict) as again:  # the same phrase twice in a tenant
        ck.wallets.create(mnemonic=PHRASE)
    assert "abandon" not in str(again.value) and "abandon" not in repr(again.value)
    assert ck.wallets.get("main") == ck.wallets.get(wallet.id) == ck.wallets.get(wallet)

    # by index, then the next one, each equal to the vectors (cosmjs, bitcoinjs)
    (first,) = ck.wallets.derive(wallet, "cosmos", index=0)
    assert isinstance(first, DerivedAccount)
    assert first.address == first.name == AT[0]["cosmos"]["addresses"]["cosmos"]
    assert first.path == AT[0]["cosmos"]["path"] and first.index == 0
    assert first.wallet == wallet.id
    assert first.public_key == AT[0]["cosmos"]["public_key_compressed_hex"]  # hex, as Account
    (second,) = ck.wallets.derive("main", "cosmos")
    assert second.address == AT[1]["cosmos"]["addresses"]["cosmos"] and second.index == 1
    ltc = ck.wallets.derive(wallet, "litecoin", address_type="p2pkh", index=0, count=2)
    assert [a.address for a in ltc] == [a["litecoin"]["mainnet"]["p2pkh"]["address"] for a in AT]
    assert all(a.address_type == "p2pkh" for a in ltc)
    assert ltc[1].public_key == AT[1]["litecoin"]["mainnet"]["p2pkh"]["public_key_compressed_hex"]
    doge = ck.wallets.derive(wallet, "dogecoin", index=1)
    assert doge[0].address == AT[1]["dogecoin"]["mainnet"]["p2pkh"]
    preview = ck.wallets.derive(wallet, "cosmos", index=7, preview=True)
    assert preview[0].created_at is None and preview[0].path == "m/44'/118'/0'/0/7"
    with pytest.raises(NotFound):  # a preview stores nothing
        ck.accounts.get("cosmos", preview[0].name)

    # a derived account is an ordinary account: get, list, sign
    assert ck.accounts.get("cosmos", first.name).address == first.address
    assert first.name in ck.accounts.list("cosmos").names
    signed = ck.signing.sign_message("cosmos", first.name, "derived, and it signs")
    digest = hashlib.sha256(amino_bytes(signed.signed)).digest()
    assert verify_compact(bytes.fromhex(first.public_key),
                          base64.b64decode(signed.signedMessage), digest)  # fmt: skip

    # extended keys: formats and descriptors with the master fingerprint
    xpub = ck.wallets.xpub(wallet, "litecoin")
    assert xpub.format == "xpub" and xpub.path == "m/84'/2'/0'" and xpub.fingerprint == FINGERPRINT
    origin = f"wpkh([{FINGERPRINT}/84'/2'/0']"
    assert xpub.descriptor is not None and xpub.descriptor.startswith(origin)
    assert xpub.change_descriptor is not None and "/1/*" in xpub.change_descriptor
    assert ck.wallets.xpub(wallet, "litecoin", format="zpub").xpub.startswith("zpub")
    assert ck.wallets.xpub(wallet, "dogecoin").xpub.startswith("dgub")
    cosmos_xpub = ck.wallets.xpub(wallet, "cosmos", account=1)
    assert cosmos_xpub.path == "m/44'/118'/1'" and cosmos_xpub.descriptor is None
    with pytest.raises(BadRequest):
        ck.wallets.xpub(wallet, "cosmos", format="zpub")

    # export: the phrase, never in a repr; the wallet is marked exported
    secret = ck.wallets.export(wallet)
    assert secret.mnemonic == PHRASE and secret.wallet.id == wallet.id
    assert "abandon" not in repr(secret) and "abandon" not in str(secret)
    assert ck.wallets.get(wallet).exported is True

    ck.wallets.delete("main")
    with pytest.raises(NotFound):
        ck.wallets.get(wallet.id)
    assert wallet.id not in [w.id for w in ck.wallets.iter()]
    ck.signing.sign_message("cosmos", first.name, "still signs")  # derived accounts stay


def test_generate_passphrase_and_listing(client_for: Callable[..., Client]) -> None:
    ck = client_for(tenant="wal-gen", scopes="read,create,export")
    made = [ck.wallets.create(name=f"w{i}", words=12) for i in range(3)]
    assert len({w.fingerprint for w in made}) == 3
    assert len(ck.wallets.export("w0").mnemonic.split()) == 12
    assert len(ck.wallets.export(ck.wallets.create().id).mnemonic.split()) == 24  # the default
    salted = ck.wallets.create(mnemonic=PHRASE, passphrase="TREZOR")
    assert salted.fingerprint != FINGERPRINT  # a passphrase is another wallet
    secret = ck.wallets.export(salted)
    assert secret.passphrase == "TREZOR" and "TREZOR" not in repr(secret)
    page = ck.wallets.list(limit=2)
    assert len(page.wallets) == 2 and page.next_cursor
    everything = [w.id for w in ck.wallets.iter(page_size=2)]
    assert len(everything) == len(set(everything)) == 5
    assert {w.id for w in made} <= set(everything)
    with pytest.raises(Conflict):
        ck.wallets.create(name="w1", words=12)  # a name is unique in the tenant
    with pytest.raises(ValueError):
        ck.wallets.create(words=12, mnemonic=PHRASE)


def test_a_lost_create_answer_never_makes_a_second_wallet(server: Server) -> None:
    lossy = LossyTransport("/wallets")
    with Client(server.url, server.token("wal-lost"), transport=lossy, backoff=0.01) as ck:
        with pytest.raises(TransportError):
            ck.wallets.create(name="once")
        assert len(lossy.seen) == 1  # not retried: the server does not replay wallet creates
        assert lossy.seen[0].headers["idempotency-key"]
        assert [w.name for w in ck.wallets.iter()] == ["once"]


def test_a_lost_derive_by_index_is_retried_to_the_same_account(server: Server) -> None:
    with Client(server.url, server.token("wal-derive")) as ck:
        wallet = ck.wallets.create(mnemonic=PHRASE)
    path = f"/wallets/{wallet.id}/accounts"
    lossy = LossyTransport(path)
    with Client(server.url, server.token("wal-derive"), transport=lossy, backoff=0.01) as ck:
        (got,) = ck.wallets.derive(wallet, "eos", index=0)  # the answer of the 2nd try
        assert len(lossy.seen) == 2
        assert got.public_key_k1 == AT[0]["eos"]["public_key_k1"]
        assert got.public_key == AT[0]["eos"]["public_key_legacy"]
        assert ck.accounts.list("eos").names == [got.name]  # one account, not two
        lossy.lose = 1  # without an index, a repeat would take the next index: not retried
        with pytest.raises(TransportError):
            ck.wallets.derive(wallet, "eos")
        assert len(lossy.seen) == 3
        assert len(ck.accounts.list("eos").names) == 2


def test_another_tenant_sees_no_wallet(client_for: Callable[..., Client]) -> None:
    mine = client_for(tenant="wal-a").wallets.create(name="private")
    theirs = client_for(tenant="wal-b")
    for ref in (mine.id, "private"):
        with pytest.raises(NotFound):
            theirs.wallets.get(ref)
        with pytest.raises(NotFound):
            theirs.wallets.derive(ref, "cosmos")
    with pytest.raises(ValueError):
        theirs.wallets.get("..")
