"""`sign_batch` against the real server: each item's result is what its sign method
returns or raises, in its place, checked as the method checks it (coincurve here, and
the repository's reference vectors); an answer that does not check raises
AnswerMismatch for the whole batch."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any

import pytest
from ckc_helpers import EOS_MAINNET, eos_transfer_tx, message_digest, recover
from ckc_proxy import TamperProxy
from conftest import SIGNING_VECTORS, Server

from chainkeys_client import (
    AnswerMismatch,
    ApprovalPending,
    AsyncClient,
    BadRequest,
    Client,
    Conflict,
    CosmosTx,
    MessageSignature,
    PolicyDenied,
)

COSMOS = json.loads((SIGNING_VECTORS / "cosmos_signing.json").read_text())
ONE = "0000000000000000000000000000000000000000000000000000000000000001"
PUB_ONE = bytes.fromhex("0279be667ef9dcbbac55a06295ce870b07029bfcdb2dce28d959f2815b16f81798")
MAGIC = "Dogecoin Signed Message:\n"


def dogecoin(ck: Client) -> str:
    try:
        return ck.accounts.create("dogecoin", private_key=ONE).address
    except Conflict:
        return ck.accounts.list("dogecoin").names[0]


def test_each_item_in_its_place_signed_or_refused(client_for: Callable[..., Client]) -> None:
    ck = client_for(tenant="batch-doge")
    address = dogecoin(ck)
    results = ck.signing.sign_batch("dogecoin", address, [
        {"kind": "sign-message", "message": "first"},
        {"kind": "sign-message", "msg": "a field sign-message does not have"},
        {"kind": "sign-psbt", "psbt": "AAAA"},
        {"kind": "sign-message", "message": "known answer"},
    ])  # fmt: skip
    first, malformed, no_psbt, known = results
    assert isinstance(first, MessageSignature) and isinstance(known, MessageSignature)
    for text, signed in (("first", first), ("known answer", known)):
        sig = base64.b64decode(signed.signature)
        assert recover(sig, message_digest(MAGIC, text), 31).format() == PUB_ONE
    assert known == ck.signing.sign_message("dogecoin", address, "known answer")  # as alone
    assert isinstance(malformed, BadRequest) and malformed.code == "invalid_field"
    assert isinstance(no_psbt, BadRequest) and no_psbt.code == "invalid_sign_request"
    assert malformed.path == f"/dogecoin/{address}/sign-batch" and malformed.request_id


def test_cosmos_kinds_and_a_refusal(server: Server, client_for: Callable[..., Client]) -> None:
    server.token("batch-cosmos")  # the tenant exists, then its policy
    server.policy("batch-cosmos", {"family": "cosmos", "max_per_day": {"uatom": "1000000000"}})
    ck = client_for(tenant="batch-cosmos")
    address = ck.accounts.create("cosmos", private_key=ONE).address
    transfer = COSMOS["sign-transfer"]["request"]
    results = ck.signing.sign_batch("cosmos", address, [
        {"kind": "sign-transfer", **transfer},
        {"kind": "sign-message", "message": "raw messages: refused by the policy"},
        {"kind": "sign-direct", "signDoc": COSMOS["sign-direct"]["request"]["signDoc"]},
    ])  # fmt: skip
    tx, refused, direct = results
    assert isinstance(tx, CosmosTx) and tx.signedTx == COSMOS["sign-transfer"]["signedTx"]
    assert isinstance(refused, PolicyDenied) and refused.status == 403
    assert direct.signature.signature == COSMOS["sign-direct"]["signature"]


def test_an_item_that_waits_is_an_approval_pending(
    server: Server, client_for: Callable[..., Client]
) -> None:
    server.token("batch-approval")
    server.policy("batch-approval", {"family": "dogecoin", "raw_messages": True, "approval": {
        "quorum": 1, "group": "treasury"}})  # fmt: skip
    ck = client_for(tenant="batch-approval")
    address = dogecoin(ck)
    (pending,) = ck.signing.sign_batch("dogecoin", address, [
        {"kind": "sign-message", "message": "needs a person"}])  # fmt: skip
    assert isinstance(pending, ApprovalPending) and pending.check is not None
    assert pending.approval.state == "pending" and pending.approval.kind == "sign-message"
    with Client(server.url, server.token("batch-approval", "approve", "bob", "treasury")) as bob:
        bob.approvals.approve(pending.id, pending.approval.digest)
    done = ck.approvals.wait(pending, timeout=30)
    assert done.state == "signed"
    signed = done.result_as(MessageSignature)
    digest = message_digest(MAGIC, "needs a person")
    assert recover(base64.b64decode(signed.signature), digest, 31).format() == PUB_ONE


def test_eos_items_are_checked_against_the_account_key(
    client_for: Callable[..., Client], vectors: dict[str, Any]
) -> None:
    ck = client_for(tenant="batch-eos")
    try:
        made = ck.accounts.create("eos", private_key=ONE, name="batcheos1234")
    except Conflict:
        made = ck.accounts.get("eos", "batcheos1234")
    tx = eos_transfer_tx("batcheos1234", "exchange1234", 12345)
    items = [{"kind": "sign-transaction", "chainId": EOS_MAINNET, "serializedTransaction": tx.hex()},
             {"kind": "sign-message", "data": "00ff10"}]  # fmt: skip
    looked_up = ck.signing.sign_batch("eos", made.name, items)
    given = ck.signing.sign_batch("eos", made.name, items, public_key=made.public_key_k1)
    assert looked_up == given
    assert looked_up[0].signatures[0].startswith("SIG_K1_")
    assert looked_up[1] == ck.signing.sign_message("eos", made.name, data=b"\x00\xff\x10")


def test_an_answer_that_does_not_check_fails_the_batch(server: Server, proxy: TamperProxy) -> None:
    token = server.token("batch-tamper")
    with Client(proxy.url, token) as via, Client(server.url, token) as direct:
        address = dogecoin(direct)
        items = [{"kind": "sign-message", "message": "a"}, {"kind": "sign-message", "message": "b"}]

        def swap(method: str, path: str, body: Any) -> Any:  # b's signature in a's place
            if not path.endswith("/sign-batch"):
                return None
            results = body["data"]["results"]
            results[0]["data"] = results[1]["data"]
            return body

        assert len(via.signing.sign_batch("dogecoin", address, items)) == 2  # honest: passes
        with proxy.rewriting(swap) as changed, pytest.raises(AnswerMismatch) as caught:
            via.signing.sign_batch("dogecoin", address, items)
        assert changed and caught.value.path == f"/dogecoin/{address}/sign-batch"


def test_a_batch_refused_whole_raises(client_for: Callable[..., Client]) -> None:
    ck = client_for(tenant="batch-doge")
    address = dogecoin(ck)
    with pytest.raises(BadRequest) as refused:
        ck.signing.sign_batch("dogecoin", address, [{"kind": "sign-direct", "signDoc": {}}])
    assert refused.value.code == "invalid_batch"


@pytest.mark.anyio
async def test_async_sign_batch(server: Server) -> None:
    async with AsyncClient(server.url, server.token("batch-async")) as ck:
        try:
            address = (await ck.accounts.create("dogecoin", private_key=ONE)).address
        except Conflict:
            address = (await ck.accounts.list("dogecoin")).names[0]
        ok, refused = await ck.signing.sign_batch("dogecoin", address, [
            {"kind": "sign-message", "message": "async"}, {"kind": "sign-message"}])  # fmt: skip
    assert isinstance(ok, MessageSignature) and isinstance(refused, BadRequest)
