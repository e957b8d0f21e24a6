"""Every sign answer is checked (continued): EOS (the account's key looked up or given),
the AsyncClient, and a signed result an approval brings back; through the same real
HTTP proxy in front of the real server (ckc_proxy)."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from typing import Any

import msgspec
import pytest
from ckc_helpers import EOS_MAINNET, eos_transfer_tx, message_digest
from ckc_proxy import TamperProxy
from ckc_tamper import (
    mismatch,
    ACCOUNT,
    OTHER,
    OTHER_PUB,
    b64,
    compact,
    flip_b64,
    in_data,
    psbt_b64,
    psbt_of,
    pub_k1,
    pub_legacy,
    recoverable,
    replaced_by,
    sig_k1,
)
from conftest import SIGNING_VECTORS, Server

from chainkeys_client import (
    AnswerMismatch,
    ApprovalPending,
    AsyncClient,
    Client,
    Conflict,
    CosmosTx,
    Forbidden,
)
from chainkeys_client._check_eos import parse_public_key
from chainkeys_client._ripemd160 import ripemd160_pure

COSMOS = json.loads((SIGNING_VECTORS / "cosmos_signing.json").read_text())
UTXO = json.loads((SIGNING_VECTORS / "utxo_signing.json").read_text())
ONE_HEX = "00" * 31 + "01"
ADDRESS: str = COSMOS["address"]
ACCOUNT_PUB = ACCOUNT.public_key.format()
EOS_NAME = "checkeos1234"
TX = eos_transfer_tx(EOS_NAME, "exchange1234", 12345)
TX_DIGEST = hashlib.sha256(bytes.fromhex(EOS_MAINNET) + TX + bytes(32)).digest()


def msgspec_dict(value: Any) -> dict[str, Any]:
    out: dict[str, Any] = msgspec.to_builtins(value)
    return out


def other_last(text: str) -> str:
    """The same string with another last character (a base58 checksum no longer matches)."""
    return text[:-1] + ("2" if text[-1] != "2" else "3")


# ---- EOS -------------------------------------------------------------------------------------


@pytest.fixture
def eos(server: Server, proxy: TamperProxy) -> Iterator[tuple[Client, Client, TamperProxy]]:
    token = server.token("check-eos")
    with Client(proxy.url, token) as via, Client(server.url, token) as direct:
        try:
            direct.accounts.create("eos", private_key=ONE_HEX, name=EOS_NAME)
        except Conflict:
            pass
        yield via, direct, proxy


def test_eos_transaction_answers(eos: tuple[Client, Client, TamperProxy]) -> None:
    via, direct, proxy = eos

    def sign(**kwargs: Any) -> Any:
        return via.signing.sign_eos_transaction(EOS_NAME, EOS_MAINNET, TX, **kwargs)

    assert sign().serializedTransaction == TX.hex()  # honest, key looked up: passes
    other_tx = direct.signing.sign_eos_transaction(
        EOS_NAME, EOS_MAINNET, eos_transfer_tx(EOS_NAME, "exchange1234", 99999)
    )
    cases: list[tuple[Any, str]] = [
        (in_data(lambda d: {**d, "signatures": [sig_k1(OTHER, TX_DIGEST)]}), "another key"),
        (replaced_by(msgspec_dict(other_tx)), "not the one sent"),
        (in_data(lambda d: {**d, "signatures": other_tx.signatures}), "another key"),
        (in_data(lambda d: {**d, "signatures": []}), "no signature"),
        (in_data(lambda d: {**d, "signatures": [other_last(d["signatures"][0])]}), "checksum"),
        (in_data(lambda d: {**d, "serializedContextFreeData": "00"}), "ContextFreeData"),
    ]  # fmt: skip
    for rewrite, fragment in cases:
        with proxy.rewriting(rewrite) as changed:
            mismatch(sign, fragment)
        assert changed
    # the caller's own key: no lookup; another key than the account's is a mismatch
    assert sign(public_key=pub_k1(ACCOUNT_PUB)).signatures
    assert sign(public_key=pub_legacy(ACCOUNT_PUB)).signatures
    mismatch(lambda: sign(public_key=pub_k1(OTHER_PUB)), "another key")
    with pytest.raises(ValueError):
        sign(public_key="PUB_K1_notakey")


def test_eos_message_and_key_lookup(
    eos: tuple[Client, Client, TamperProxy], server: Server
) -> None:
    via, _, proxy = eos

    def sign(**kwargs: Any) -> Any:
        return via.signing.sign_message("eos", EOS_NAME, "I own this account", **kwargs)

    digest = hashlib.sha256(b"I own this account").digest()
    assert sign().signature.startswith("SIG_K1_")
    assert via.signing.sign_message("eos", EOS_NAME, data=b"\x00\xff\x10").signature
    with proxy.rewriting(replaced_by({"signature": sig_k1(OTHER, digest)})):
        mismatch(sign, "another key")
    with proxy.rewriting(replaced_by({"signature": sig_k1(ACCOUNT, b"\x01" * 32)})):
        mismatch(sign, "another key")  # the account's key, over another message

    def lookup(key_k1: str, key_legacy: str) -> Any:
        def apply(method: str, path: str, body: Any) -> Any:
            if method != "GET" or path != f"/eos/{EOS_NAME}":
                return None
            fields = {"public_key": key_legacy, "public_key_k1": key_k1}
            data = {**body["data"], **fields, "data": {**body["data"]["data"], **fields}}
            return {**body, "data": data}

        return apply

    with proxy.rewriting(lookup(pub_k1(OTHER_PUB), pub_legacy(OTHER_PUB))):  # a lying lookup
        mismatch(sign, "another key")
    with proxy.rewriting(lookup(pub_k1(OTHER_PUB), pub_legacy(ACCOUNT_PUB))):
        mismatch(sign, "two different", method="GET")

    # a token without the read scope: the key must be given
    with Client(server.url, server.token("check-eos", "sign")) as signer:
        with pytest.raises(Forbidden) as refused:
            signer.signing.sign_message("eos", EOS_NAME, "hi")
        assert "public_key=" in refused.value.message
        assert signer.signing.sign_message("eos", EOS_NAME, "hi", public_key=pub_k1(ACCOUNT_PUB))
    with pytest.raises(ValueError):  # other families name their key by their address
        via.signing.sign_message("cosmos", ADDRESS, "hi", public_key=pub_k1(ACCOUNT_PUB))


# ---- the AsyncClient ---------------------------------------------------------------------------


@pytest.mark.anyio
async def test_async_answers_are_checked(server: Server, proxy: TamperProxy) -> None:
    token = server.token("check-async")
    async with AsyncClient(proxy.url, token) as via, AsyncClient(server.url, token) as direct:
        await direct.accounts.create("cosmos", private_key=ONE_HEX)
        await direct.accounts.create("eos", private_key=ONE_HEX, name=EOS_NAME)
        ltc = await direct.accounts.create("litecoin", private_key=ONE_HEX)
        s = via.signing

        doc = COSMOS["sign-direct"]["request"]["signDoc"]
        assert (await s.sign_direct(ADDRESS, doc)).signature.signature
        other_sig = b64(compact(OTHER, hashlib.sha256(b"x").digest()))
        with proxy.rewriting(in_data(lambda d: {**d, "signature": {
                "pub_key": {"type": "tendermint/PubKeySecp256k1", "value": b64(OTHER_PUB)},
                "signature": other_sig}})):  # fmt: skip
            await amismatch(s.sign_direct(ADDRESS, doc), "not the key of")

        transfer = COSMOS["sign-transfer"]["request"]
        other = await direct.signing.sign_transfer(ADDRESS, {**transfer, "toAddress": ADDRESS})
        assert (await s.sign_transfer(ADDRESS, transfer)).signedTx == COSMOS["sign-transfer"][
            "signedTx"
        ]
        with proxy.rewriting(replaced_by({"signedTx": other.signedTx, "txHash": other.txHash})):
            await amismatch(s.sign_transfer(ADDRESS, transfer), "recipient")

        case = next(
            c for c in UTXO["sign-psbt"] if c["family"] == "litecoin" and c["kind"] == "p2wpkh"
        )
        assert (await s.sign_psbt("litecoin", ltc.address, case["request"]["psbt"])).txid == case[
            "txid"
        ]

        def another_tx(data: dict[str, Any]) -> dict[str, Any]:
            p = psbt_of(data["psbt"])
            p.outputs[0].value -= 1
            return {**data, "psbt": psbt_b64(p)}

        with proxy.rewriting(in_data(another_tx)):
            await amismatch(s.sign_psbt("litecoin", ltc.address, case["request"]["psbt"]),
                            "another transaction")  # fmt: skip

        digest = message_digest("Litecoin Signed Message:\n", "hi")
        assert (await s.sign_message("litecoin", ltc.address, "hi")).signature
        with proxy.rewriting(replaced_by({"signature": b64(recoverable(OTHER, digest, 39))})):
            await amismatch(s.sign_message("litecoin", ltc.address, "hi"), "not the account's")

        assert (await s.sign_eos_transaction(EOS_NAME, EOS_MAINNET, TX)).signatures
        with proxy.rewriting(in_data(lambda d: {**d, "signatures": [sig_k1(OTHER, TX_DIGEST)]})):
            await amismatch(s.sign_eos_transaction(EOS_NAME, EOS_MAINNET, TX), "another key")
        with proxy.rewriting(in_data(lambda d: {"signature": flip_b64(d["signature"], 3)})):
            await amismatch(s.sign_message("litecoin", ltc.address, "hi"))


async def amismatch(pending: Any, *fragments: str) -> None:
    with pytest.raises(AnswerMismatch) as caught:
        await pending
    for fragment in fragments:
        assert fragment in caught.value.message, (fragment, caught.value.message)


# ---- a result an approval brings back ------------------------------------------------------------

LARGE: dict[str, Any] = COSMOS["sign-transfer"]["request"]


@pytest.fixture(scope="module")
def approvers(server: Server) -> dict[str, str]:
    made = {"requester": server.token("check-apr", "read,create,sign", label="payouts"),
            "alice": server.token("check-apr", "approve", label="alice", group="treasury"),
            "bob": server.token("check-apr", "approve", label="bob", group="treasury")}  # fmt: skip
    server.policy("check-apr", {"family": "cosmos", "network": "cosmoshub",
                                "above": {"uatom": "1000"},
                                "approval": {"quorum": 2, "group": "treasury", "ttl": "1h"}})  # fmt: skip
    return made


def signed_result(result: dict[str, Any]) -> Any:
    def apply(method: str, path: str, body: Any) -> Any:
        data = body.get("data") if isinstance(body, dict) else None
        if (
            method == "GET"
            and path.startswith("/approvals/")
            and data
            and data.get("state") == "signed"
        ):
            return {**body, "data": {**data, "result": result}}
        return None

    return apply


def test_an_approved_result_is_checked(server: Server, proxy: TamperProxy,
                                       approvers: dict[str, str]) -> None:  # fmt: skip
    with (Client(proxy.url, approvers["requester"]) as me, Client(server.url, approvers["alice"]) as alice,
          Client(server.url, approvers["bob"]) as bob):  # fmt: skip
        try:
            me.accounts.create("cosmos", private_key=ONE_HEX)
        except Conflict:
            pass
        small = me.signing.sign_transfer(ADDRESS, {**LARGE, "amount": "100", "feeAmount": "100"})
        for sequence in (3, 4):
            with pytest.raises(ApprovalPending) as caught:
                me.signing.sign_transfer(ADDRESS, {**LARGE, "sequence": sequence})
            waiting = caught.value
            assert waiting.check is not None
            for person in (alice, bob):
                person.approvals.approve(waiting, waiting.approval.digest or "")
            if sequence == 3:  # honest: the checked result
                tx = me.approvals.wait(waiting, timeout=10, interval=0.05).result_as(CosmosTx)
                assert tx.signedTx == COSMOS["sign-transfer"]["signedTx"]
                continue
            forged = {"signedTx": small.signedTx, "txHash": small.txHash}
            with proxy.rewriting(signed_result(forged)):
                mismatch(lambda: me.approvals.wait(waiting, timeout=10, interval=0.05), "amount")
                # an id alone cannot be checked: the client no longer knows the request
                assert me.approvals.wait(waiting.id, timeout=10).result == forged


@pytest.mark.anyio
async def test_an_approved_result_is_checked_async(server: Server, proxy: TamperProxy,
                                                   approvers: dict[str, str]) -> None:  # fmt: skip
    async with AsyncClient(proxy.url, approvers["requester"]) as me:
        try:
            await me.accounts.create("cosmos", private_key=ONE_HEX)
        except Conflict:
            pass
        with pytest.raises(ApprovalPending) as caught:
            await me.signing.sign_transfer(ADDRESS, {**LARGE, "sequence": 5})
        waiting = caught.value
        for label in ("alice", "bob"):
            async with AsyncClient(server.url, approvers[label]) as person:
                await person.approvals.approve(waiting, waiting.approval.digest or "")
        with proxy.rewriting(signed_result({"signedTx": "AAAA", "txHash": "00"})):
            await amismatch(me.approvals.wait(waiting, timeout=10, interval=0.05))
        assert (await me.approvals.wait(waiting, timeout=10)).state == "signed"


# ---- the pieces ----------------------------------------------------------------------------------


def test_pure_ripemd160_and_key_forms() -> None:
    assert ripemd160_pure(b"").hex() == "9c1185a5c5e9fc54612808977ee8f548b2258d31"
    assert ripemd160_pure(b"abc").hex() == "8eb208f7e05d987a9b044a8e98c6b087f15a0bfc"
    assert ripemd160_pure(b"message digest").hex() == "5d0689ef49d2fae572b881b123a85ffa21595f36"
    for size in (0, 1, 55, 56, 63, 64, 65, 119, 120, 200):
        data = os.urandom(size)
        try:
            assert ripemd160_pure(data) == hashlib.new("ripemd160", data).digest()
        except ValueError:  # this OpenSSL has no RIPEMD-160: the pure one is what runs
            break
    assert parse_public_key(pub_k1(ACCOUNT_PUB)) == parse_public_key(pub_legacy(ACCOUNT_PUB))
    assert parse_public_key(ACCOUNT_PUB.hex()) == ACCOUNT_PUB
    for bad in (other_last(pub_k1(ACCOUNT_PUB)), other_last(pub_legacy(ACCOUNT_PUB)), "EOS1111",
                "PUB_R1_x", "04" + "00" * 32, "zz" * 33):  # fmt: skip
        with pytest.raises(ValueError):
            parse_public_key(bad)
    err = AnswerMismatch("the signature does not verify", method="POST", path="/cosmos/x/sign")
    assert str(err) == "answer_mismatch: the signature does not verify (POST /cosmos/x/sign)"
    assert err.status is None and err.code == "answer_mismatch"
