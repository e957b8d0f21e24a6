"""Governance through real HTTP on both engines: a governed tenant's policy changes only
by a quorum of its admins' signed votes; a change that loosens waits the delay (the
clock seam moves it) and any one admin may cancel it; one that only tightens applies
at the quorum; a vote over another digest, by another's key or by a token alone counts
for nothing; and a database writer who edits a change is refused."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519
from sqlalchemy import update
from tests.api.authenticator import b64url
from tests.conftest import Server, chainkeys_cli, wait_for
from tests.masterkey.test_rotation import env_of

from chainkeys import clock
from chainkeys.approvals.proofs import ADMINS, change_challenge
from chainkeys.errors import IntegrityFailure
from chainkeys.store.tables import changes, governance

HOUR_MS = 3_600_000
CAPPED = {"rules": [{"family": "cosmos", "network": "cosmoshub", "max_per_tx": {"uatom": "1000"}}]}


def capped(amount: int, **more: Any) -> dict[str, Any]:
    rule = {"family": "cosmos", "network": "cosmoshub", "max_per_tx": {"uatom": str(amount)}}
    return {"rules": [{**rule, **more}]}


@dataclass
class Admin:
    label: str
    client: httpx.Client
    key: ed25519.Ed25519PrivateKey
    credential: str

    def signature(
        self, change: dict[str, Any], decision: str = "approve", digest: str | None = None
    ) -> dict[str, str]:
        message = change_challenge(change["id"], digest or change["digest"], decision)
        return {"credential": self.credential, "value": b64url(self.key.sign(message))}

    def vote(
        self, change: dict[str, Any], decision: str = "approve", **body: Any
    ) -> httpx.Response:
        sent = {"digest": change["digest"], "signature": self.signature(change, decision), **body}
        return self.client.post(f"/changes/{change['id']}/{decision}", json=sent)


@dataclass
class Governed:
    server: Server
    name: str
    admins: dict[str, Admin] = field(default_factory=dict)

    def file(self, by: str, document: dict[str, Any] | None) -> dict[str, Any]:
        r = self.admins[by].client.post("/changes", json={"kind": "policy", "document": document})
        assert r.status_code == 202, r.text
        data: dict[str, Any] = r.json()["data"]
        assert {"id", "digest", "diff", "loosens", "effective_at"} <= set(data)
        return data

    def get(self, change: dict[str, Any]) -> dict[str, Any]:
        r = self.admins["alice"].client.get(f"/changes/{change['id']}")
        assert r.status_code == 200, r.text
        data: dict[str, Any] = r.json()["data"]
        return data

    def policy(self) -> Any:
        assert self.server.services is not None
        shown = self.server.call(self.server.services.policies.show(self.name))
        document = shown.version.document if shown.version else None
        return json.loads(document) if document else None


def admin(server: Server, tenant: str, label: str) -> Admin:
    assert server.services is not None
    key = ed25519.Ed25519PrivateKey.generate()
    pem = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    _, token = server.call(server.services.tokens.create(tenant, label, frozenset({"admin"})))
    row = server.call(
        server.services.approvals.passkeys.add_key(tenant, label, ADMINS, pem.decode())
    )
    return Admin(label, server.client(token), key, row.id)


@pytest.fixture
def governed(server: Server) -> Iterator[Governed]:
    """A tenant with a capped policy, governed by 2 of alice, bob and carol, 1 h delay."""
    assert server.services is not None
    name = f"g-{uuid.uuid4().hex[:10]}"
    server.new_token(name)
    server.call(server.services.policies.set(name, json.dumps(CAPPED), "json"))
    server.call(server.services.governance.set(name, 2, "1h"))
    made = Governed(server, name)
    for label in ("alice", "bob", "carol"):
        made.admins[label] = admin(server, name, label)
    yield made
    for a in made.admins.values():
        a.client.close()


def test_a_loosening_change_waits_for_the_quorum_and_then_the_delay(governed: Governed) -> None:
    alice, bob = governed.admins["alice"], governed.admins["bob"]
    change = governed.file("alice", capped(5000))
    assert change["loosens"] is True and change["state"] == "pending"
    assert change["diff"] == [
        "rule (cosmos/cosmoshub): per-transaction cap raised for uatom: 1000 -> 5000"
    ]
    r = alice.vote(change)
    assert r.status_code == 200, r.text
    assert r.json()["data"]["state"] == "pending" and r.json()["data"]["approvals"] == 1
    r = bob.vote(change)
    data = r.json()["data"]
    assert data["state"] == "scheduled", r.text
    assert 3590 <= data["countdown_seconds"] <= 3600 and data["effective_at"] is not None
    assert governed.policy() == CAPPED  # not yet
    assert governed.server.services is not None
    with clock.shift(HOUR_MS - 60_000):
        assert governed.server.call(governed.server.services.governance.due()) == 0
        assert governed.get(change)["state"] == "scheduled"
    with clock.shift(HOUR_MS + 1000):  # the supervised round applies it once due
        wait_for(lambda: governed.get(change)["state"] == "applied", "the change applied")
    assert governed.policy() == capped(5000)
    listed = alice.client.get("/changes", params={"state": "applied"}).json()["data"]
    assert [c["id"] for c in listed["changes"]] == [change["id"]]


def test_one_admin_cancels_a_change_another_filed(governed: Governed) -> None:
    alice, bob, carol = (governed.admins[n] for n in ("alice", "bob", "carol"))
    change = governed.file("alice", None)  # clearing the policy loosens
    assert change["loosens"] is True
    assert alice.vote(change).status_code == 200
    assert bob.vote(change).json()["data"]["state"] == "scheduled"
    r = carol.client.post(f"/changes/{change['id']}/cancel")
    assert r.status_code == 200, r.text
    assert r.json()["data"]["state"] == "cancelled" and r.json()["data"]["ended_by"] == "carol"
    again = alice.client.post(f"/changes/{change['id']}/cancel")
    assert again.status_code == 409 and again.json()["code"] == "change_ended"
    assert governed.server.services is not None
    with clock.shift(HOUR_MS + 1000):
        assert governed.server.call(governed.server.services.governance.due()) == 0
    assert governed.get(change)["state"] == "cancelled"
    assert governed.policy() == CAPPED


def test_a_tightening_change_applies_at_the_quorum(governed: Governed) -> None:
    change = governed.file("carol", capped(500))
    assert change["loosens"] is False
    assert governed.admins["alice"].vote(change).json()["data"]["state"] == "pending"
    done = governed.admins["carol"].vote(change).json()["data"]
    assert done["state"] == "applied" and done["ended_at"] is not None
    assert governed.policy() == capped(500)
    # a change filed against the old version is superseded, never applied onto the new
    stale = governed.file("bob", capped(400))
    other = governed.file("bob", capped(300))
    assert governed.admins["alice"].vote(other).status_code == 200
    assert governed.admins["bob"].vote(other).json()["data"]["state"] == "applied"
    assert governed.admins["alice"].vote(stale).status_code == 200
    ended = governed.admins["bob"].vote(stale).json()["data"]
    assert ended["state"] == "rejected" and "superseded" in ended["reason"]
    assert governed.policy() == capped(300)


def test_only_a_signed_vote_on_this_digest_by_its_own_key_counts(governed: Governed) -> None:
    alice, bob = governed.admins["alice"], governed.admins["bob"]
    change = governed.file("alice", capped(2000))
    other = "0" * 64
    r = alice.vote(change, digest=other)  # the body names another digest
    assert r.status_code == 409 and r.json()["code"] == "digest_mismatch", r.text
    signed_other = alice.signature(change, digest=other)  # signed over another digest
    r = alice.client.post(
        f"/changes/{change['id']}/approve",
        json={"digest": change["digest"], "signature": signed_other},
    )
    assert r.status_code == 403 and r.json()["code"] == "assertion_invalid", r.text
    as_reject = alice.signature(change, decision="reject")  # a rejection's signature
    r = alice.client.post(
        f"/changes/{change['id']}/approve",
        json={"digest": change["digest"], "signature": as_reject},
    )
    assert r.status_code == 403 and r.json()["code"] == "assertion_invalid", r.text
    r = bob.client.post(
        f"/changes/{change['id']}/approve",
        json={"digest": change["digest"], "signature": alice.signature(change)},
    )
    assert r.status_code == 403 and r.json()["code"] == "credential_refused", r.text
    r = bob.client.post(f"/changes/{change['id']}/approve", json={"digest": change["digest"]})
    assert r.status_code == 403 and r.json()["code"] == "signature_required", r.text
    assert governed.get(change)["approvals"] == 0
    assert alice.vote(change).status_code == 200
    twice = alice.vote(change)
    assert twice.status_code == 409 and twice.json()["code"] == "already_voted"
    assert governed.get(change)["state"] == "pending"
    rejected = bob.vote(change, decision="reject").json()["data"]
    assert rejected["state"] == "rejected" and rejected["ended_by"] == "bob"


def test_who_may_file_and_where(governed: Governed, server: Server) -> None:
    with server.client(server.new_token(governed.name)) as plain:
        for r in (
            plain.post("/changes", json={"kind": "policy", "document": None}),
            plain.get("/changes"),
        ):
            assert r.status_code == 403 and r.json()["code"] == "forbidden", r.text
    alice = governed.admins["alice"]
    r = alice.client.post("/changes", json={"kind": "webhook", "document": None})
    assert r.status_code == 400 and r.json()["code"] == "unsupported_change_kind"
    r = alice.client.post("/changes", json={"kind": "policy", "document": {"rules": [{}]}})
    assert r.status_code == 400 and r.json()["code"] == "invalid_policy"
    assert alice.client.get("/changes/chg_nope").json()["code"] == "change_not_found"
    loner = f"g-{uuid.uuid4().hex[:10]}"
    ungoverned = admin(server, loner, "dave")
    r = ungoverned.client.post("/changes", json={"kind": "policy", "document": None})
    assert r.status_code == 409 and r.json()["code"] == "not_governed"
    ungoverned.client.close()
    assert server.services is not None
    with pytest.raises(Exception, match="governed already"):
        server.call(server.services.governance.set(governed.name, 1, "0"))


def _write(server: Server, change_id: str, **values: Any) -> None:
    """A database writer (no master key) edits a change's row."""
    assert server.services is not None
    db = server.services.db

    async def edit() -> None:
        async with db.write() as tx:
            await tx.execute(update(changes).where(changes.c.id == change_id).values(**values))

    server.call(edit())


def test_a_database_writer_who_edits_a_change_is_refused(governed: Governed) -> None:
    alice, bob = governed.admins["alice"], governed.admins["bob"]
    first = governed.file("alice", capped(9000))
    _write(governed.server, first["id"], state="applied")
    r = alice.client.get(f"/changes/{first['id']}")
    assert r.status_code == 500 and r.json()["code"] == "integrity_failure", r.text
    r = alice.vote(first)
    assert r.json()["code"] == "integrity_failure", r.text
    assert governed.policy() == CAPPED
    # put back as it was: usable again (the MAC and the head agree)
    _write(governed.server, first["id"], state="pending")
    assert governed.get(first)["state"] == "pending"
    assert alice.vote(first).status_code == 200
    assert bob.vote(first).json()["data"]["state"] == "scheduled"
    # the scheduled document swapped for one nobody signed: never applied
    _write(governed.server, first["id"], document=json.dumps(capped(10**9)))
    assert governed.server.services is not None
    with clock.shift(HOUR_MS + 1000):
        assert governed.server.call(governed.server.services.governance.due()) == 0
    assert governed.policy() == CAPPED


def test_a_database_writer_who_deletes_the_governance_is_refused(governed: Governed) -> None:
    """Ungoverning a tenant by hand (to set its policy alone) fails closed: its head
    pins its governance row, so no change is filed and no policy is set there."""
    server = governed.server
    assert server.services is not None
    db, tokens = server.services.db, server.services.tokens

    async def delete() -> None:
        tenant_id = await tokens.tenant_id(governed.name)
        async with db.write() as tx:
            await tx.execute(governance.delete().where(governance.c.tenant_id == tenant_id))

    server.call(delete())
    r = governed.admins["alice"].client.post("/changes", json={"kind": "policy", "document": None})
    assert r.status_code == 500 and r.json()["code"] == "integrity_failure", r.text
    with pytest.raises(IntegrityFailure):
        server.call(server.services.governance.set_policy(governed.name, None))
    assert governed.policy() == CAPPED


def test_the_last_two_votes_at_once_decide_once(governed: Governed) -> None:
    """Two admins' votes that both see the other's missing (a barrier releases them
    together): the change is decided once, in the transaction of the vote that
    reached the quorum, never twice nor not at all."""
    change = governed.file("alice", capped(700))  # only tightens: applies at the quorum
    start = threading.Barrier(2)
    answers: list[httpx.Response] = []

    def vote(name: str) -> None:
        start.wait()
        answers.append(governed.admins[name].vote(change))

    threads = [threading.Thread(target=vote, args=(n,)) for n in ("alice", "bob")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(r.status_code for r in answers) == [200, 200], [r.text for r in answers]
    assert sorted(r.json()["data"]["state"] for r in answers) == ["applied", "pending"]
    assert governed.policy() == capped(700)
    assert governed.server.services is not None
    history = governed.server.call(governed.server.services.policies.history(governed.name))
    assert len(history) == 2  # the operator's first version, and this change's alone


def test_the_operator_cli_governs_and_files(server: Server, tmp_path: Path) -> None:
    """`admin add-key`, `governance set/show`, and `policy set` on a governed tenant
    (a change, its id printed) or with `--break-glass` (applied, audited as such)."""
    env = env_of(server.settings)
    name = f"g-{uuid.uuid4().hex[:10]}"
    made = chainkeys_cli(
        "token", "create", "--tenant", name, "--scope", "admin", "--label", "carol", env=env
    )
    assert made.returncode == 0, made.stderr
    key = ed25519.Ed25519PrivateKey.generate()
    pem = tmp_path / "carol.pem"
    pem.write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    added = chainkeys_cli(
        "admin", "add-key", "--tenant", name, "--label", "carol", "--key", str(pem), env=env
    )
    assert added.returncode == 0, added.stderr
    assert added.stdout.splitlines()[-1].startswith("apc_")
    shown = chainkeys_cli("governance", "show", name, "--json", env=env)
    assert json.loads(shown.stdout)["governance"] is None, shown.stderr
    assert (
        chainkeys_cli(
            "governance", "set", name, "--quorum", "1", "--delay", "24h", env=env
        ).returncode
        == 0
    )
    shown = chainkeys_cli("governance", "show", name, "--json", env=env)
    assert json.loads(shown.stdout)["governance"]["quorum"] == 1
    again = chainkeys_cli("governance", "set", name, "--quorum", "2", "--delay", "1h", env=env)
    assert again.returncode == 1 and "governed already" in again.stderr
    policy = tmp_path / "p.json"
    policy.write_text(json.dumps(CAPPED))
    filed = chainkeys_cli("policy", "set", name, str(policy), env=env)
    assert filed.returncode == 0, filed.stderr
    change_id = filed.stdout.splitlines()[-1]
    assert change_id.startswith("chg_")
    with server.client(made.stdout.splitlines()[-1]) as carol:
        seen = carol.get(f"/changes/{change_id}").json()["data"]
        assert seen["state"] == "pending" and seen["created_by"] == "operator"
    glass = chainkeys_cli("policy", "set", name, str(policy), "--break-glass", env=env)
    assert glass.returncode == 0 and "break glass" in glass.stdout, glass.stderr
    assert server.services is not None
    assert server.call(server.services.policies.show(name)).version is not None
    audit = chainkeys_cli("audit", "--tenant", name, "--json", env=env)
    actions = [json.loads(line)["action"] for line in audit.stdout.splitlines()]
    assert "break_glass" in actions and "governance.set" in actions, audit.stdout
