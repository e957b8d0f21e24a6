"""The database is not trusted (issue 51): someone who can write it but does not hold
the master key mints a token, widens one, loosens a policy or forges a vote; each is
refused, on both engines, through real HTTP. The integrity key's start-up (adoption of
a store from before it, a store whose key record is gone) is in tests/test_integrity.py."""

from __future__ import annotations

import hashlib
import uuid
from typing import Any

import httpx
import pytest
from sqlalchemy import insert, select, update
from tests.api.tenants import Tenant
from tests.conftest import Server

from chainkeys.errors import IntegrityFailure
from chainkeys.store.tables import tenants, tokens


def _write(server: Server, stmt: Any) -> None:
    assert server.services is not None
    db = server.services.db

    async def run() -> None:
        async with db.write() as tx:
            await tx.execute(stmt)

    server.call(run())


def _read(server: Server, stmt: Any) -> list[Any]:
    assert server.services is not None
    db = server.services.db

    async def run() -> list[Any]:
        async with db.read() as tx:
            return list((await tx.execute(stmt)).all())

    return server.call(run())


def _failures(server: Server, table: str) -> float:
    from prometheus_client import REGISTRY

    value = REGISTRY.get_sample_value("chainkeys_integrity_failures_total", {"table": table})
    return value or 0.0


def test_a_token_row_inserted_by_a_database_writer_is_refused(
    server: Server, tenant: Tenant
) -> None:
    """Its digest is sha256 of a token of the writer's choosing (what the store held
    before), or a copy of a real row's digest and MAC under another id: both 401."""
    chosen = "ck_" + uuid.uuid4().hex
    [tenant_id] = [
        r[0] for r in _read(server, select(tenants.c.id).where(tenants.c.name == tenant.name))
    ]
    [real] = _read(server, select(tokens).where(tokens.c.tenant_id == tenant_id))
    row = dict(real._mapping)
    forged = {
        **row,
        "id": uuid.uuid4().hex,
        "token_hash": hashlib.sha256(chosen.encode()).hexdigest(),
    }
    _write(server, insert(tokens).values(**forged))
    with server.client(chosen) as c:
        assert c.get("/cosmos").status_code == 401
    assert tenant.client.get("/cosmos").status_code == 200  # the real token still works


def test_a_token_widened_by_a_database_writer_is_refused(server: Server, tenant: Tenant) -> None:
    assert server.services is not None
    row, token = server.call(
        server.services.tokens.create(
            tenant.name, "narrow", frozenset({"read"}), None, frozenset({"dogecoin"})
        )
    )
    with server.client(token) as c:
        assert c.get("/dogecoin").status_code == 200
        assert c.post("/dogecoin", json={}).status_code == 403
    before = _failures(server, "tokens")
    _write(
        server,
        update(tokens)
        .where(tokens.c.id == row.id)
        .values(scopes="create,delete,read,sign", families=None),
    )
    with server.client(token) as c:
        assert c.get("/dogecoin").status_code == 401
        assert c.post("/cosmos", json={}).status_code == 401
    assert _failures(server, "tokens") > before
    revoked = tenant.client  # the tenant's own token is untouched
    assert revoked.get("/cosmos").status_code == 200


def test_issued_tokens_are_stored_keyed_never_as_a_bare_hash(server: Server) -> None:
    assert server.services is not None
    row, token = server.call(server.services.tokens.create(f"t-{uuid.uuid4().hex[:8]}"))
    [(stored, mac)] = _read(
        server, select(tokens.c.token_hash, tokens.c.mac).where(tokens.c.id == row.id)
    )
    assert stored != hashlib.sha256(token.encode()).hexdigest()
    assert isinstance(mac, str) and mac.startswith("v1:")
    with server.client(token) as c:
        assert c.get("/cosmos").status_code == 200


def test_a_revoked_token_stays_revoked_when_the_writer_clears_revoked_ms(
    server: Server,
) -> None:
    assert server.services is not None
    row, token = server.call(server.services.tokens.create(f"t-{uuid.uuid4().hex[:8]}"))
    server.call(server.services.tokens.revoke(row.id))
    with server.client(token) as c:
        assert c.get("/cosmos").status_code == 401
    _write(server, update(tokens).where(tokens.c.id == row.id).values(revoked_ms=None))
    with server.client(token) as c:
        assert c.get("/cosmos").status_code == 401


def _client(server: Server, token: str) -> httpx.Client:
    return server.client(token)


def test_a_policy_loosened_by_a_database_writer_fails_closed(
    server: Server, tenant: Tenant
) -> None:
    """raw_messages false → true in the stored version: the refused sign-message does
    not sign; the tenant signs nothing (integrity_failure, audited) until an operator
    sets a policy again."""
    from chainkeys.store.tables import policy_versions

    assert tenant.client.post("/dogecoin", json={}).status_code == 200
    [name] = tenant.client.get("/dogecoin").json()["data"]["keys"]
    tenant.policy({"family": "dogecoin", "raw_messages": False})
    path = f"/dogecoin/{name}/sign-message"
    refused = tenant.sign(path, {"message": "hello"})
    assert refused.status_code == 403, refused.text
    [tenant_id] = [
        r[0] for r in _read(server, select(tenants.c.id).where(tenants.c.name == tenant.name))
    ]
    [(document,)] = _read(
        server, select(policy_versions.c.document).where(policy_versions.c.tenant_id == tenant_id)
    )
    loosened = document.replace(
        '{"family":"dogecoin"}', '{"family":"dogecoin","raw_messages":true}'
    )
    assert loosened != document
    _write(
        server,
        update(policy_versions)
        .where(policy_versions.c.tenant_id == tenant_id)
        .values(document=loosened),
    )
    assert server.services is not None
    with pytest.raises(IntegrityFailure):  # what the next refresh finds (read now)
        server.call(server.services.policies.current(tenant_id, fresh=True))
    r = tenant.sign(path, {"message": "hello"})
    assert (r.status_code, r.json()["code"]) == (500, "integrity_failure"), r.text
    events = tenant.client.get("/audit", params={"action": "sign"}).json()["data"]["events"]
    assert events[0]["outcome"] == "integrity_failure"
    tenant.policy({"family": "dogecoin", "raw_messages": True})  # an operator sets it again
    assert tenant.sign(path, {"message": "hello"}).status_code == 200


def test_a_forged_vote_counts_for_nothing(server: Server, tenant: Tenant) -> None:
    """Quorum 2: a vote a database writer added (a copy of a real vote's MAC under
    another person's name, or none) and one real vote leave the request pending; marked
    approved by hand, the sweep fails it (its authenticated votes do not reach 2)."""
    from tests.api.test_policy_conditions import COSMOS, SEND, send
    from tests.api.test_policy_cracks import _approver
    from tests.api.test_sign_cosmos import PRIVATE

    from chainkeys.store.tables import approval_votes, approvals

    assert tenant.client.post("/cosmos", json={"private_key": PRIVATE}).status_code == 200
    tenant.policy({**COSMOS, "approval": {"quorum": 2, "group": "treasury"}})
    waiting = [tenant.sign(SEND, send(10, sequence=i)).json()["data"] for i in (1, 2)]
    alice = _approver(server, tenant)
    try:
        r = alice.post(
            f"/approvals/{waiting[0]['id']}/approve", json={"digest": waiting[0]["digest"]}
        )
        assert r.status_code == 200 and r.json()["data"]["state"] == "pending", r.text
        [real] = _read(
            server, select(approval_votes).where(approval_votes.c.approval_id == waiting[0]["id"])
        )
        forged = {**dict(real._mapping), "voter_label": "mallory", "voter_token_id": "x" * 32}
        _write(server, insert(approval_votes).values(**forged))
        state = alice.get(f"/approvals/{waiting[0]['id']}").json()["data"]["state"]
        assert state == "pending"  # two rows, one person's authenticated vote

        for n, label in enumerate(("mallory", "trudy")):  # the other: two forged votes
            _write(
                server,
                insert(approval_votes).values(
                    approval_id=waiting[1]["id"],
                    voter_label=label,
                    voter_token_id=str(n) * 32,
                    decision="approve",
                    digest=waiting[1]["digest"],
                    reason=None,
                    created_ms=1,
                    mac=None,
                ),
            )
        _write(
            server,
            update(approvals)
            .where(approvals.c.id == waiting[1]["id"])
            .values(state="approved", decided_ms=1),
        )
        assert server.services is not None
        server.call(server.services.signing.sweep())
        ended = alice.get(f"/approvals/{waiting[1]['id']}").json()["data"]
        assert ended["state"] == "failed" and "integrity" in ended["reason"], ended
    finally:
        alice.close()
    assert not [e for e in tenant.sign_events() if e["outcome"] == "ok"]  # nothing signed


def test_a_sealed_key_copied_onto_another_account_does_not_open(
    server: Server, tenant: Tenant
) -> None:
    """Account A's sealed secret (and its key id) written onto account B: B's sign is
    refused and nothing signs with A's key under B's name."""
    from chainkeys.store.tables import accounts

    made = [tenant.client.post("/dogecoin", json={}).json()["address"] for _ in range(2)]
    [tenant_id] = [
        r[0] for r in _read(server, select(tenants.c.id).where(tenants.c.name == tenant.name))
    ]
    [(secret, key_id)] = _read(
        server,
        select(accounts.c.secret, accounts.c.key_id).where(
            accounts.c.tenant_id == tenant_id, accounts.c.name == made[0]
        ),
    )
    _write(
        server,
        update(accounts)
        .where(accounts.c.tenant_id == tenant_id, accounts.c.name == made[1])
        .values(secret=secret, key_id=key_id),
    )
    tenant.policy({"family": "dogecoin", "raw_messages": True})
    assert tenant.sign(f"/dogecoin/{made[0]}/sign-message", {"message": "a"}).status_code == 200
    r = tenant.sign(f"/dogecoin/{made[1]}/sign-message", {"message": "b"})
    assert r.status_code == 500 and "signature" not in r.json().get("data", {}), r.text
    [event] = [e for e in tenant.sign_events() if e["account_name"] == made[1]]
    assert event["outcome"] == "sign_failed"


def test_an_address_swapped_between_accounts_is_never_shown_or_signed_with(
    server: Server, tenant: Tenant
) -> None:
    """A writer swaps the addresses and public keys of two accounts (a deposit address
    of theirs shown as the tenant's): lookup, listing and signing refuse both rows with
    integrity_failure, counted; an untouched account goes on working."""
    from chainkeys.store.tables import accounts

    made = [tenant.client.post("/dogecoin", json={}).json()["address"] for _ in range(3)]
    [tenant_id] = [
        r[0] for r in _read(server, select(tenants.c.id).where(tenants.c.name == tenant.name))
    ]

    def public_of(name: str) -> tuple[str, str]:
        [(address, public_key)] = _read(
            server,
            select(accounts.c.address, accounts.c.public_key).where(
                accounts.c.tenant_id == tenant_id, accounts.c.name == name
            ),
        )
        return address, public_key

    (a_addr, a_pub), (b_addr, b_pub) = public_of(made[0]), public_of(made[1])
    before = _failures(server, "accounts")
    for name, (addr, pub) in ((made[0], (b_addr, b_pub)), (made[1], (a_addr, a_pub))):
        _write(
            server,
            update(accounts)
            .where(accounts.c.tenant_id == tenant_id, accounts.c.name == name)
            .values(address=addr, public_key=pub),
        )
    tenant.policy({"family": "dogecoin", "raw_messages": True})
    for name in made[:2]:
        r = tenant.client.get(f"/dogecoin/{name}")
        assert r.status_code == 500 and r.json()["code"] == "integrity_failure", r.text
        r = tenant.sign(f"/dogecoin/{name}/sign-message", {"message": "pay me"})
        assert r.status_code == 500 and r.json()["code"] == "integrity_failure", r.text
    listed = tenant.client.get("/dogecoin")
    assert listed.status_code == 500 and listed.json()["code"] == "integrity_failure"
    assert _failures(server, "accounts") >= before + 5
    assert tenant.client.get(f"/dogecoin/{made[2]}").status_code == 200
    ok = tenant.sign(f"/dogecoin/{made[2]}/sign-message", {"message": "a"})
    assert ok.status_code == 200, ok.text
    assert not [
        e for e in tenant.sign_events() if e["outcome"] == "ok" and e["account_name"] in made[:2]
    ]


def test_an_account_copied_into_another_tenant_is_refused(server: Server, tenant: Tenant) -> None:
    """A whole row (sealed key, MAC and all) copied under another tenant: its MAC binds
    the tenant, so the copy is never shown or used (and its sealed key would not open)."""
    from chainkeys.store.tables import accounts

    other_tenant = Tenant(server)
    name = tenant.client.post("/dogecoin", json={}).json()["address"]
    ids = {}
    for t in (tenant, other_tenant):
        [ids[t.name]] = [
            r[0] for r in _read(server, select(tenants.c.id).where(tenants.c.name == t.name))
        ]
    [row] = _read(
        server,
        select(accounts).where(accounts.c.tenant_id == ids[tenant.name], accounts.c.name == name),
    )
    copy = {k: v for k, v in row._mapping.items() if k != "id"}
    _write(server, insert(accounts).values(**{**copy, "tenant_id": ids[other_tenant.name]}))
    r = other_tenant.client.get(f"/dogecoin/{name}")
    assert r.status_code == 500 and r.json()["code"] == "integrity_failure", r.text
    assert tenant.client.get(f"/dogecoin/{name}").status_code == 200
    other_tenant.client.close()


def test_a_co_signer_added_to_an_hd_multisig_by_a_writer_derives_nothing(
    server: Server, tenant: Tenant
) -> None:
    """A writer swaps a member xpub of a wallet's multisig registration for one of theirs
    (and its descriptor with it): the registration fails its MAC, so no new index is
    derived from it, and it is not shown."""
    import os

    from chainkeys.chains import hd
    from chainkeys.store.tables import wallet_multisigs

    wallet = tenant.client.post("/wallets", json={"name": "treasury"}).json()["data"]
    path = "m/48'/2'/0'/2'"
    bob, mallory = (hd.Seed(os.urandom(64)) for _ in range(2))
    r = tenant.client.post(
        f"/wallets/{wallet['id']}/multisig",
        json={"family": "litecoin", "threshold": 2, "xpubs": [bob.xpub(path, "Ltub").xpub]},
    )
    assert r.status_code == 200, r.text
    made = r.json()["data"]
    base = f"/wallets/{wallet['id']}/multisig/{made['id']}"
    assert tenant.client.post(f"{base}/accounts", json={"count": 1}).status_code == 200
    theirs = mallory.xpub(path, "Ltub").xpub
    _write(
        server,
        update(wallet_multisigs)
        .where(wallet_multisigs.c.id == made["id"])
        .values(
            xpubs=f'["{theirs}"]',
            descriptor=made["descriptor"].replace(bob.xpub(path, "Ltub").xpub, theirs),
        ),
    )
    before = _failures(server, "wallet_multisigs")
    for r in (tenant.client.post(f"{base}/accounts", json={"count": 1}), tenant.client.get(base)):
        assert r.status_code == 500 and r.json()["code"] == "integrity_failure", r.text
    assert _failures(server, "wallet_multisigs") >= before + 2
