"""AsyncClient parity: the same calls, awaited, give the same answers and errors."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
from typing import Any

import httpx
import pytest
from conftest import SIGNING_VECTORS, Server

from chainkeys_client import (
    AsyncClient,
    BadRequest,
    Client,
    Forbidden,
    NotFound,
    ServiceUnavailable,
    Unauthorized,
)

pytestmark = pytest.mark.anyio
COSMOS = json.loads((SIGNING_VECTORS / "cosmos_signing.json").read_text())
ONE = "0000000000000000000000000000000000000000000000000000000000000001"


async def test_accounts_parity(server: Server, vectors: dict[str, Any]) -> None:
    k = vectors["keys"][4]
    async with AsyncClient(server.url, server.token("async-a")) as ack:
        made = await ack.accounts.create("dogecoin", private_key=k["dogecoin"]["mainnet"]["wif"])
        assert made.address == k["dogecoin"]["mainnet"]["p2pkh"]
        generated = await asyncio.gather(*(ack.accounts.create("eos") for _ in range(4)))
        assert len({a.name for a in generated}) == 4 and all(a.private_key for a in generated)
        got = await ack.accounts.get("dogecoin", made.name)
        exported = await ack.accounts.export("dogecoin", made.name)
        assert exported.private_key == k["dogecoin"]["mainnet"]["wif"]
        names = [key.name async for key in ack.accounts.iter("eos", page_size=3)]
        assert sorted(names) == sorted(a.name for a in generated)
        page = await ack.accounts.list("eos", limit=3)
        assert len(page.keys) == 3 and page.next_cursor
        with Client(server.url, server.token("async-a")) as ck:  # the sync client agrees
            assert ck.accounts.get("dogecoin", made.name) == got
            assert ck.accounts.list("eos", limit=3) == page
        await ack.accounts.delete("dogecoin", made.name)
        with pytest.raises(NotFound):
            await ack.accounts.get("dogecoin", made.name)
        assert (await ack.networks()).families["eos"].default == "eos"
        events = [e async for e in ack.iter_audit(page_size=2)]
        assert [e.action for e in events].count("export") == 1


async def test_signing_and_errors_parity(server: Server) -> None:
    async with AsyncClient(server.url, server.token("async-sign")) as ack:
        address = (await ack.accounts.create("cosmos", private_key=ONE)).address
        tx = await ack.signing.sign_transfer(address, COSMOS["sign-transfer"]["request"])
        assert tx.signedTx == COSMOS["sign-transfer"]["signedTx"]
        assert tx.txHash == hashlib.sha256(base64.b64decode(tx.signedTx)).hexdigest().upper()
        direct = await ack.signing.sign_direct(address, COSMOS["sign-direct"]["request"]["signDoc"])
        assert direct.signature.signature == COSMOS["sign-direct"]["signature"]
        with pytest.raises(BadRequest) as bad:
            await ack.signing.sign_transfer(address, {**COSMOS["sign-transfer"]["request"],
                                                      "chainId": "osmosis-1"})  # fmt: skip
        assert bad.value.code == "wrong_chain"
    async with AsyncClient(server.url, server.token("async-sign", "read")) as reader:
        with pytest.raises(Forbidden):
            await reader.signing.sign_message("cosmos", address, "hi")
    async with AsyncClient(server.url, "ck_wrong") as stranger:
        with pytest.raises(Unauthorized):
            await stranger.accounts.list("cosmos")


async def test_async_retries_only_safe_requests() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if len(seen) == 1:
            return httpx.Response(503, json={"success": False, "message": "down",
                                             "code": "storage_unavailable"})  # fmt: skip
        return httpx.Response(200, json={"success": True, "message": "account created",
                                         "data": {"data": {"address": "cosmos1x"}}})  # fmt: skip

    async with AsyncClient("http://ck.test", "ck_t", transport=httpx.MockTransport(handler),
                           backoff=0.001) as ack:  # fmt: skip
        made = await ack.accounts.create("cosmos", idempotency_key="k-1")
        assert made.address == "cosmos1x" and len(seen) == 2
        assert {r.headers["idempotency-key"] for r in seen} == {"k-1"}
        seen.clear()
        with pytest.raises(ServiceUnavailable):
            await ack.signing.sign_message("cosmos", "cosmos1x", "hi")
        assert len(seen) == 1
