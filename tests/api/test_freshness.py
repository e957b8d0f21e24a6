"""A row put back from an older copy is refused (vault/heads.py), on both engines,
through real HTTP against a running server: a database writer (SQL on the live store,
no master key) puts back a token row from before its revocation, a credential from
before its revocation, a spent enrolment code, an ended approval as pending, an older
latest policy, a lowered cap total, and swaps two tenants' names. Each ends in a
refusal; the tenant's other rows keep working where they do not depend on it."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519
from sqlalchemy import Table, delete, select, update
from tests.api.tenants import Tenant
from tests.api.test_approvals import SEND, send
from tests.api.test_sign_cosmos import PRIVATE
from tests.conftest import BACKENDS, Server, own_server

from chainkeys.errors import IntegrityFailure
from chainkeys.store.tables import (
    approvals,
    approver_credentials,
    approver_invites,
    freezes,
    policy_totals,
    policy_versions,
    tenants,
    tokens,
)

ORIGIN = "http://localhost:8443"


@pytest.fixture(scope="module", params=BACKENDS)
def srv(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    with own_server(request.param, tmp_path_factory.mktemp("fresh"), public_url=ORIGIN) as s:
        yield s


@pytest.fixture
def t(srv: Server) -> Iterator[Tenant]:
    made = Tenant(srv)
    yield made
    made.client.close()


def _sql(srv: Server, stmt: Any) -> list[Any]:
    assert srv.services is not None
    db = srv.services.db

    async def run() -> list[Any]:
        async with db.write() as tx:
            result = await tx.execute(stmt)
            try:
                return [dict(r._mapping) for r in result.all()]
            except Exception:  # no rows to return (an UPDATE or DELETE)
                return []

    return srv.call(run())


def _row(srv: Server, table: Table, **where: Any) -> dict[str, Any]:
    stmt = select(table).where(*(table.c[k] == v for k, v in where.items()))
    [found] = _sql(srv, stmt)
    return dict(found)


def _put_back(srv: Server, table: Table, old: dict[str, Any], *keys: str) -> None:
    """What a writer with an older copy of the row does: every column as it was."""
    where = [table.c[k] == old[k] for k in keys]
    _sql(srv, update(table).where(*where).values(**{k: v for k, v in old.items() if k not in keys}))


def _tenant_id(srv: Server, t: Tenant) -> str:
    return str(_row(srv, tenants, name=t.name)["id"])


def test_a_token_put_back_from_before_its_revocation_is_refused(srv: Server, t: Tenant) -> None:
    assert srv.services is not None
    row, token = srv.call(srv.services.tokens.create(t.name, "leaked"))
    before = _row(srv, tokens, id=row.id)
    with srv.client(token) as c:
        assert c.get("/cosmos").status_code == 200
        srv.call(srv.services.tokens.revoke(row.id))
        assert c.get("/cosmos").status_code == 401
        _put_back(srv, tokens, before, "id")
        assert c.get("/cosmos").status_code == 401  # at once, on the running server
    assert t.client.get("/cosmos").status_code == 401  # the tenant's set no longer proves
    assert srv.services is not None


def test_an_ended_approval_set_open_again_is_never_signed(srv: Server, t: Tenant) -> None:
    """A rejected request set pending by SQL takes no vote; a cancelled one set
    approved is not signed by the sweep (failed, not signed)."""
    assert srv.services is not None
    assert t.client.post("/cosmos", json={"private_key": PRIVATE}).status_code == 200
    t.policy(
        {
            "family": "cosmos",
            "network": "cosmoshub",
            "approval": {"quorum": 1, "group": "treasury", "ttl": "1h"},
        }
    )
    _, approve = srv.call(
        srv.services.tokens.create(
            t.name, "alice", frozenset({"approve", "read"}), None, None, "treasury"
        )
    )
    first = t.sign(SEND, send(10, sequence=1)).json()["data"]
    second = t.sign(SEND, send(10, sequence=2)).json()["data"]
    with srv.client(approve) as alice:
        r = alice.post(f"/approvals/{first['id']}/reject", json={"reason": "no"})
        assert r.json()["data"]["state"] == "rejected", r.text
        _sql(
            srv,
            update(approvals)
            .where(approvals.c.id == first["id"])
            .values(state="pending", decided_ms=None, reason=None),
        )
        r = alice.post(f"/approvals/{first['id']}/approve", json={"digest": first["digest"]})
        assert r.status_code >= 400 and r.json()["code"] == "integrity_failure", r.text
        r = t.client.post(f"/approvals/{second['id']}/cancel")
        assert r.json()["data"]["state"] == "cancelled", r.text
        _sql(
            srv,
            update(approvals)
            .where(approvals.c.id == second["id"])
            .values(state="approved", decided_ms=1, reason=None),
        )
        srv.call(srv.services.signing.sweep())
        ended = alice.get(f"/approvals/{second['id']}").json()["data"]
        assert ended["state"] == "failed" and "result" not in ended, ended
    assert not [e for e in t.sign_events() if e["outcome"] == "ok"]  # nothing signed


def test_a_deleted_latest_policy_fails_closed(srv: Server, t: Tenant) -> None:
    """Version 2 refuses raw messages; deleting it leaves version 1, which allowed
    them: nothing signs (integrity_failure), until an operator sets a policy again."""
    assert t.client.post("/dogecoin", json={}).status_code == 200
    [name] = t.client.get("/dogecoin").json()["data"]["keys"]
    path = f"/dogecoin/{name}/sign-message"
    t.policy({"family": "dogecoin", "raw_messages": True})
    assert t.sign(path, {"message": "v1"}).status_code == 200
    t.policy({"family": "dogecoin", "raw_messages": False})
    assert t.sign(path, {"message": "v2"}).status_code == 403
    tenant_id = _tenant_id(srv, t)
    _sql(
        srv,
        delete(policy_versions).where(
            policy_versions.c.tenant_id == tenant_id, policy_versions.c.version == 2
        ),
    )
    assert srv.services is not None
    with pytest.raises(IntegrityFailure):
        srv.call(srv.services.policies.current(tenant_id, fresh=True))
    r = t.sign(path, {"message": "after"})
    assert (r.status_code, r.json()["code"]) == (500, "integrity_failure"), r.text
    t.policy({"family": "dogecoin", "raw_messages": True})  # the operator sets it again
    assert t.sign(path, {"message": "again"}).status_code == 200


def test_a_lowered_cap_total_fails_closed(srv: Server, t: Tenant) -> None:
    assert t.client.post("/cosmos", json={"private_key": PRIVATE}).status_code == 200
    t.policy({"family": "cosmos", "network": "cosmoshub", "max_per_day": {"uatom": "15000"}})
    assert t.sign(SEND, send(10000, sequence=1)).status_code == 200
    tenant_id = _tenant_id(srv, t)
    _sql(srv, update(policy_totals).where(policy_totals.c.tenant_id == tenant_id).values(total="0"))
    r = t.sign(SEND, send(10000, sequence=2))
    assert (r.status_code, r.json()["code"]) == (500, "integrity_failure"), r.text
    assert t.sign(SEND, send(1, sequence=3)).status_code == 500  # nothing under that cap


def test_swapped_tenant_names_are_followed_nowhere(srv: Server) -> None:
    """prod's and mallory's names swapped: an operator's token for "mallory" is not
    issued into prod, and the tenants' tokens stop working (their rows fail)."""
    assert srv.services is not None
    prod, mallory = Tenant(srv), Tenant(srv)
    try:
        a, b = _row(srv, tenants, name=prod.name), _row(srv, tenants, name=mallory.name)
        _sql(srv, update(tenants).where(tenants.c.id == a["id"]).values(name="swap-" + a["id"][:8]))
        _sql(srv, update(tenants).where(tenants.c.id == b["id"]).values(name=prod.name))
        _sql(srv, update(tenants).where(tenants.c.id == a["id"]).values(name=mallory.name))
        with pytest.raises(IntegrityFailure):
            srv.call(srv.services.tokens.create(mallory.name, "operator"))
        assert prod.client.get("/cosmos").status_code == 401
        assert mallory.client.get("/cosmos").status_code == 401
    finally:
        prod.client.close()
        mallory.client.close()


def _script_key(srv: Server, t: Tenant, label: str) -> tuple[ed25519.Ed25519PrivateKey, str]:
    assert srv.services is not None
    key = ed25519.Ed25519PrivateKey.generate()
    pem = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    row = srv.call(srv.services.approvals.passkeys.add_key(t.name, label, "treasury", pem.decode()))
    return key, row.id


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def test_a_credential_put_back_from_before_its_revocation_votes_no_more(
    srv: Server, t: Tenant
) -> None:
    assert srv.services is not None
    assert t.client.post("/cosmos", json={"private_key": PRIVATE}).status_code == 200
    t.policy(
        {
            "family": "cosmos",
            "network": "cosmoshub",
            "approval": {"quorum": 1, "group": "treasury", "ttl": "1h", "passkey": True},
        }
    )
    key, credential = _script_key(srv, t, "erin")
    before = _row(srv, approver_credentials, id=credential)
    srv.call(srv.services.approvals.passkeys.revoke(credential))
    _put_back(srv, approver_credentials, before, "id")
    _, token = srv.call(
        srv.services.tokens.create(
            t.name, "erin", frozenset({"approve", "read"}), None, None, "treasury"
        )
    )
    waiting = t.sign(SEND, send(10, sequence=1)).json()["data"]
    with srv.client(token) as erin:
        options = erin.get(
            f"/approvals/{waiting['id']}/challenge", params={"decision": "approve"}
        ).json()["data"]
        challenge = base64.urlsafe_b64decode(options["challenge"] + "==")
        signature = {"credential": credential, "value": _b64url(key.sign(challenge))}
        r = erin.post(
            f"/approvals/{waiting['id']}/approve",
            json={"digest": waiting["digest"], "signature": signature},
        )
        assert r.status_code >= 400 and r.json()["code"] == "integrity_failure", r.text
        assert erin.get(f"/approvals/{waiting['id']}").json()["data"]["state"] == "pending"
    refusals = [
        e
        for e in t.client.get("/audit").json()["data"]["events"]
        if e["action"] == "approval.approve"
    ]
    assert refusals and refusals[0]["outcome"] == "integrity_failure"


def test_a_spent_enrolment_code_put_back_enrols_no_one(srv: Server, t: Tenant) -> None:
    from tests.api.test_passkeys import enrol, invite

    assert srv.services is not None
    code = invite(srv, t.name, "gus")
    tenant_id = _tenant_id(srv, t)
    [unused] = _sql(srv, select(approver_invites).where(approver_invites.c.tenant_id == tenant_id))
    # enrol() makes its own code: spend this one the way enrol does, through HTTP
    approver = enrol(srv, t, "gus")
    approver.client.close()
    _, token = srv.call(
        srv.services.tokens.create(t.name, "gus", frozenset({"approve"}), None, None, "treasury")
    )
    with srv.client(token) as gus:
        from tests.api.authenticator import Authenticator

        device = Authenticator(ORIGIN)
        options = gus.post("/approvers/me/credentials/options", json={"code": code})
        assert options.status_code == 200, options.text
        created = device.create(options.json()["data"])
        assert (
            gus.post(
                "/approvers/me/credentials", json={"code": code, "credential": created}
            ).status_code
            == 200
        )
        _put_back(srv, approver_invites, unused, "code_digest")  # spent: put back unused
        again = gus.post("/approvers/me/credentials/options", json={"code": code})
        assert again.status_code >= 400, again.text
        assert again.json()["code"] == "integrity_failure", again.text


def test_a_token_row_that_fails_stops_no_round(srv: Server, t: Tenant) -> None:
    """A requester token edited by a writer: the sweep goes on without raising (that
    tenant's requests are cancelled: its tokens prove nothing now), and another
    tenant's pending request is untouched."""
    assert srv.services is not None
    other = Tenant(srv)
    try:
        for each in (t, other):
            assert each.client.post("/cosmos", json={"private_key": PRIVATE}).status_code == 200
            each.policy(
                {
                    "family": "cosmos",
                    "network": "cosmoshub",
                    "approval": {"quorum": 1, "group": "treasury", "ttl": "1h"},
                }
            )
        mine = t.sign(SEND, send(10, sequence=1)).json()["data"]
        theirs = other.sign(SEND, send(10, sequence=1)).json()["data"]
        tenant_id = _tenant_id(srv, t)
        _sql(srv, update(tokens).where(tokens.c.tenant_id == tenant_id).values(label="edited"))
        srv.call(srv.services.signing.sweep())  # raises nothing
        srv.call(srv.services.signing.sweep())  # and again, every round
        state = other.client.get(f"/approvals/{theirs['id']}").json()["data"]["state"]
        assert state == "pending"
        assert t.client.get(f"/approvals/{mine['id']}").status_code == 401
    finally:
        other.client.close()


def test_a_freeze_deleted_or_lifted_by_a_writer_fails_closed(srv: Server, t: Tenant) -> None:
    """A tenant frozen; a writer deletes the freeze (or sets it lifted) to sign in the
    emergency: nothing signs (integrity_failure), never a signature."""
    assert srv.services is not None
    assert t.client.post("/dogecoin", json={}).status_code == 200
    [name] = t.client.get("/dogecoin").json()["data"]["keys"]
    path = f"/dogecoin/{name}/sign-message"
    _, approve = srv.call(
        srv.services.tokens.create(
            t.name, "alice", frozenset({"approve", "read"}), None, None, "treasury"
        )
    )
    with srv.client(approve) as alice:
        made = alice.post("/freezes", json={"reason": "the payout host may be compromised"})
        assert made.status_code == 201, made.text
    r = t.sign(path, {"message": "frozen"})
    assert (r.status_code, r.json()["code"]) == (423, "frozen"), r.text
    tenant_id = _tenant_id(srv, t)
    [row] = _sql(srv, select(freezes).where(freezes.c.tenant_id == tenant_id))
    _sql(srv, update(freezes).where(freezes.c.id == row["id"]).values(lifted_ms=1))
    r = t.sign(path, {"message": "lifted by hand"})
    assert (r.status_code, r.json()["code"]) == (500, "integrity_failure"), r.text
    _sql(srv, delete(freezes).where(freezes.c.id == row["id"]))
    r = t.sign(path, {"message": "deleted by hand"})
    assert (r.status_code, r.json()["code"]) == (500, "integrity_failure"), r.text
    assert not [e for e in t.sign_events() if e["outcome"] == "ok"]
