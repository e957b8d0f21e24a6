"""A token's tenant may be remembered between requests, but never past a change:
a revocation or a new token from another process (the CLI) counts at once on SQLite (its
commit moves the shared-memory counter), and on PostgreSQL as soon as its notification
has come (store/postgres/watch.py: at most about a second; the tests wait for it, never
for a time)."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

from chainkeys.accounts.models import CreateRequest
from chainkeys.bootstrap import open_services


def in_another_process_stack(server: Any, action: Any, changes_rows: bool = False) -> Any:
    """Run `action(services)` on services of their own (own connections), as the CLI does;
    when it `changes_rows`, return once the server has counted its commit."""
    db = server.services.db
    before = db.change_counter()

    async def run() -> Any:
        svc = await open_services(server.settings)
        try:
            return await action(svc)
        finally:
            await svc.close()

    done = asyncio.run(run())
    deadline = time.monotonic() + 30  # a bound on a failure, not a measurement
    while changes_rows and db.change_counter() == before and time.monotonic() < deadline:
        time.sleep(0.01)
    return done


def test_a_revocation_elsewhere_takes_effect_on_the_next_request(server: Any) -> None:
    tenant = f"t-{uuid.uuid4().hex[:10]}"
    row, token = in_another_process_stack(server, lambda svc: svc.tokens.create(tenant, "cli"))
    with server.client(token) as c:
        for _ in range(3):  # known, and remembered by the server
            assert c.get("/cosmos").status_code == 200
        in_another_process_stack(server, lambda svc: svc.tokens.revoke(row.id), True)
        gone = c.get("/cosmos")
        assert gone.status_code == 401, gone.text
        assert gone.json()["code"] == "unauthorized"
        assert c.post("/cosmos", json={}).status_code == 401


def test_a_revocation_in_the_server_takes_effect_on_the_next_request(server: Any) -> None:
    tenant = f"t-{uuid.uuid4().hex[:10]}"
    row, token = server.call(server.services.tokens.create(tenant, "one"))
    with server.client(token) as c:
        assert c.get("/eos").status_code == 200
        assert c.get("/eos").status_code == 200
        server.call(server.services.tokens.revoke(row.id))
        assert c.get("/eos").status_code == 401


def test_a_token_issued_elsewhere_works_at_once_after_a_miss(server: Any) -> None:
    tenant = f"t-{uuid.uuid4().hex[:10]}"
    with server.client("ck_" + "z" * 43) as c:
        assert c.get("/litecoin").status_code == 401  # unknown tokens are not remembered
    _, token = in_another_process_stack(server, lambda svc: svc.tokens.create(tenant, "cli"))
    with server.client(token) as c:
        assert c.get("/litecoin").status_code == 200


def test_requests_that_arrived_together_share_one_check_later_ones_see_a_revocation(
    server: Any,
) -> None:
    """The version read is shared only by requests that had arrived before it was read;
    any request arriving after a revocation is counted is refused."""
    tokens = server.services.tokens
    tenant = f"t-{uuid.uuid4().hex[:10]}"
    row, token = in_another_process_stack(server, lambda svc: svc.tokens.create(tenant, "cli"))
    arrived_early = time.perf_counter()
    assert server.call(tokens.authenticate(token, time.perf_counter())) is not None
    in_another_process_stack(server, lambda svc: svc.tokens.revoke(row.id), True)
    # arrived before the check above was made: that check (before the revocation) stands
    assert server.call(tokens.authenticate(token, arrived_early)) is not None
    # arrived after the revocation: checked again, refused
    assert server.call(tokens.authenticate(token, time.perf_counter())) is None
    assert server.call(tokens.authenticate(token, arrived_early)) is None  # and stays refused
    assert server.call(tokens.authenticate(token)) is None


def test_an_account_deleted_elsewhere_is_gone_on_the_next_get(server: Any) -> None:
    """A get's view may be remembered while nothing commits; a delete by another process
    (its own connections, as a second worker or the CLI) is a commit."""
    tenant = f"t-{uuid.uuid4().hex[:10]}"
    _, token = in_another_process_stack(server, lambda svc: svc.tokens.create(tenant, "cli"))
    with server.client(token) as c:
        name = c.post("/dogecoin", json={}).json()["address"]
        for _ in range(3):
            found = c.get(f"/dogecoin/{name}")
            assert found.status_code == 200 and found.json()["address"] == name
        principal = server.call(server.services.tokens.authenticate(token))
        in_another_process_stack(
            server, lambda svc: svc.accounts.delete(principal, "dogecoin", name), True
        )
        gone = c.get(f"/dogecoin/{name}")
        assert gone.status_code == 404, gone.text
        in_another_process_stack(
            server, lambda svc: svc.accounts.restore(tenant, "dogecoin", name), True
        )
        assert c.get(f"/dogecoin/{name}").status_code == 200


def test_remembered_views_stay_within_their_tenant(server: Any) -> None:
    """The same account name asked by another tenant's token is that tenant's 404."""
    first, second = (f"t-{uuid.uuid4().hex[:10]}" for _ in range(2))
    _, token_a = in_another_process_stack(server, lambda svc: svc.tokens.create(first, "a"))
    _, token_b = in_another_process_stack(server, lambda svc: svc.tokens.create(second, "b"))
    with server.client(token_a) as a, server.client(token_b) as b:
        name = a.post("/eos", json={}).json()["address"]
        assert a.get(f"/eos/{name}").status_code == 200
        assert a.get(f"/eos/{name}").status_code == 200
        assert b.get(f"/eos/{name}").status_code == 404


def test_a_signer_replaced_elsewhere_signs_with_its_new_key(server: Any) -> None:
    """A sign request's stored row (its sealed key) may be remembered as a view is; a
    delete elsewhere is refused at once, and the same name imported again with another
    key signs with that key, never the remembered one (RFC 6979: the same key signs the
    same message alike, so another signature is another key)."""
    tenant = f"t-{uuid.uuid4().hex[:10]}"
    _, token = in_another_process_stack(server, lambda svc: svc.tokens.create(tenant, "cli"))
    name, message = "replaced.one", {"message": "which key?"}
    with server.client(token) as c:
        assert c.post("/eos", json={"name": name, "private_key": "11" * 32}).status_code == 200
        first = [c.post(f"/eos/{name}/sign-message", json=message) for _ in range(3)]
        assert {r.status_code for r in first} == {200}
        signature = first[0].json()["data"]["signature"]
        principal = server.call(server.services.tokens.authenticate(token))
        in_another_process_stack(
            server, lambda svc: svc.accounts.delete(principal, "eos", name), True
        )
        gone = c.post(f"/eos/{name}/sign-message", json=message)
        assert gone.status_code == 404, gone.text
        assert c.post(f"/eos/{name}/sign-message", json=message).status_code == 404

        async def import_other(svc: Any) -> Any:
            req = CreateRequest(private_key="22" * 32, options={"name": name})
            return await svc.accounts.create(principal, "eos", req)

        in_another_process_stack(server, import_other, True)
        again = c.post(f"/eos/{name}/sign-message", json=message)
        assert again.status_code == 200, again.text
        assert again.json()["data"]["signature"] != signature
