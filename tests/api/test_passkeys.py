"""Approver passkeys through real HTTP on both engines, with a software authenticator
(tests/api/authenticator.py) and script keys: enrolment, votes that count only signed,
and what a stolen approve token, a replay, another request's or decision's assertion,
a revoked credential, a counter going backwards and a vote row written by hand get."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature
from sqlalchemy import insert
from tests.api.authenticator import Authenticator, b64url, unb64url
from tests.api.tenants import Tenant
from tests.api.test_approvals import SEND, send
from tests.api.test_sign_cosmos import PRIVATE
from tests.conftest import BACKENDS, Server, chainkeys_cli, own_server
from tests.masterkey.test_rotation import env_of

from chainkeys import clock
from chainkeys.approvals.proofs import challenge
from chainkeys.approvals.repository import Vote
from chainkeys.store.integrity import APPROVAL_VOTES
from chainkeys.store.tables import approval_votes

ORIGIN = "http://localhost:8443"  # the software authenticator is the browser: any port
RULE = {
    "family": "cosmos",
    "network": "cosmoshub",
    "approval": {"quorum": 2, "group": "treasury", "ttl": "1h", "passkey": True},
}


@pytest.fixture(scope="module", params=BACKENDS)
def pk_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    with own_server(request.param, tmp_path_factory.mktemp("passkeys"), public_url=ORIGIN) as srv:
        yield srv


@dataclass
class Approver:
    label: str
    client: httpx.Client
    device: Authenticator
    credential: str = ""

    def options(self, approval: dict[str, Any], decision: str = "approve") -> dict[str, Any]:
        r = self.client.get(f"/approvals/{approval['id']}/challenge", params={"decision": decision})
        assert r.status_code == 200, r.text
        options: dict[str, Any] = r.json()["data"]
        return options

    def vote(
        self,
        approval: dict[str, Any],
        assertion: dict[str, Any] | None = None,
        decision: str = "approve",
        **extra: Any,
    ) -> httpx.Response:
        body: dict[str, Any] = {"digest": approval["digest"]} if decision == "approve" else {}
        if assertion is not None:
            body["assertion"] = assertion
        body.update(extra)
        return self.client.post(f"/approvals/{approval['id']}/{decision}", json=body)

    def signed_vote(self, approval: dict[str, Any], decision: str = "approve") -> httpx.Response:
        return self.vote(approval, self.device.get(self.options(approval, decision)), decision)


def invite(server: Server, tenant: str, label: str, group: str = "treasury") -> str:
    assert server.services is not None
    code, _ = server.call(server.services.approvals.passkeys.invite(tenant, label, group))
    return code


def enrol(server: Server, tenant: Tenant, label: str) -> Approver:
    assert server.services is not None
    _, token = server.call(
        server.services.tokens.create(
            tenant.name, label, frozenset({"approve"}), None, None, "treasury"
        )
    )
    who = Approver(label, server.client(token), Authenticator(ORIGIN))
    code = invite(server, tenant.name, label)
    options = who.client.post("/approvers/me/credentials/options", json={"code": code})
    assert options.status_code == 200, options.text
    data = options.json()["data"]
    assert data["rp"]["id"] == "localhost" and data["authenticatorSelection"] == {
        "residentKey": "required",
        "requireResidentKey": True,
        "userVerification": "required",
    }
    made = who.client.post(
        "/approvers/me/credentials", json={"code": code, "credential": who.device.create(data)}
    )
    assert made.status_code == 200, made.text
    assert set(made.json()["data"]) == {"id", "created_at"}
    who.credential = made.json()["data"]["id"]
    again = who.client.post("/approvers/me/credentials/options", json={"code": code})
    assert again.status_code == 403 and again.json()["code"] == "invite_invalid"  # single use
    return who


@dataclass
class Team:
    tenant: Tenant
    alice: Approver
    bob: Approver
    carol: Approver


@pytest.fixture
def team(pk_server: Server) -> Iterator[Team]:
    t = Tenant(pk_server)
    assert t.client.post("/cosmos", json={"private_key": PRIVATE}).status_code == 200
    t.policy(RULE)
    team = Team(t, *(enrol(pk_server, t, name) for name in ("alice", "bob", "carol")))
    yield team
    for c in (t.client, team.alice.client, team.bob.client, team.carol.client):
        c.close()


def pending(t: Tenant, sequence: int) -> dict[str, Any]:
    r = t.sign(SEND, send(5000, sequence=sequence))
    assert r.status_code == 202, r.text
    data: dict[str, Any] = r.json()["data"]
    assert data["passkey"] is True
    return data


def refused(r: httpx.Response, code: str) -> None:
    assert r.status_code == 403, r.text
    assert r.json()["code"] == code, r.text


def test_enrol_and_approve_with_a_quorum_of_passkeys(team: Team) -> None:
    t = team.tenant
    waiting = pending(t, 1)
    listed = team.alice.client.get("/approvers/me/credentials").json()["data"]["credentials"]
    assert [(c["id"], c["kind"], c["label"]) for c in listed] == [
        (team.alice.credential, "webauthn", "alice")
    ]
    options = team.alice.options(waiting)
    assert unb64url(options["challenge"]) == challenge(
        waiting["id"], waiting["digest"], waiting["summary"], "approve"
    )
    assert options["rpId"] == "localhost" and options["userVerification"] == "required"
    first = team.alice.vote(waiting, team.alice.device.get(options))
    assert first.status_code == 200 and first.json()["data"]["state"] == "pending", first.text
    assert first.json()["data"]["votes"][0]["signed"] == "passkey"
    done = team.bob.signed_vote(waiting)
    assert done.status_code == 200 and done.json()["data"]["state"] == "signed", done.text
    actions = [(e["action"], e["outcome"]) for e in t.client.get("/audit").json()["data"]["events"]]
    assert ("approver.credential.add", "ok") in actions and ("approval.signed", "ok") in actions


def test_the_approve_token_alone_is_refused(team: Team) -> None:
    waiting = pending(team.tenant, 2)
    refused(team.alice.vote(waiting), "passkey_required")
    refused(team.alice.vote(waiting, decision="reject"), "passkey_required")
    view = team.tenant.client.get(f"/approvals/{waiting['id']}").json()["data"]
    assert view["state"] == "pending" and view["votes"] == []
    events = team.tenant.client.get("/audit").json()["data"]["events"]
    assert any(e["outcome"] == "passkey_required" for e in events)  # every refusal audited


def test_another_requests_or_decisions_assertion_and_a_replay_are_refused(team: Team) -> None:
    one, two = pending(team.tenant, 3), pending(team.tenant, 4)
    for_one = team.alice.device.get(team.alice.options(one))
    refused(team.alice.vote(two, for_one), "assertion_invalid")  # another request
    to_reject = team.alice.device.get(team.alice.options(one, "reject"))
    refused(team.alice.vote(one, to_reject), "assertion_invalid")  # another decision
    wrong_origin = Authenticator(
        "http://localhost:9999",
        team.alice.device.key,
        team.alice.device.credential_id,
        team.alice.device.counter,
    )
    refused(team.alice.vote(one, wrong_origin.get(team.alice.options(one))), "assertion_invalid")
    ok = team.alice.device.get(team.alice.options(one))
    assert team.alice.vote(one, ok).status_code == 200
    refused(team.alice.vote(one, ok), "sign_count_replay")  # the same assertion again
    stolen = team.bob.vote(one, ok)  # bob's token with alice's assertion
    refused(stolen, "credential_refused")


def test_a_counter_going_backwards_is_refused(team: Team) -> None:
    waiting = pending(team.tenant, 5)
    device = team.alice.device
    device.counter = 10
    team.alice.signed_vote(pending(team.tenant, 6))  # counter 11 stored
    refused(
        team.alice.vote(waiting, device.get(team.alice.options(waiting), counter=7)),
        "sign_count_replay",
    )
    assert (
        team.alice.vote(waiting, device.get(team.alice.options(waiting), counter=12)).status_code
        == 200
    )


def test_a_revoked_credential_is_refused_and_its_votes_count_for_nothing(
    team: Team, pk_server: Server
) -> None:
    waiting = pending(team.tenant, 7)
    gone = team.carol.client.delete(f"/approvers/me/credentials/{team.carol.credential}")
    assert gone.status_code == 200 and gone.json()["data"]["revoked_at"]
    refused(team.carol.signed_vote(waiting), "credential_refused")
    # a vote cast before its credential was revoked (by an operator) is verified again at
    # the quorum: it no longer counts, and nothing is signed
    assert team.alice.signed_vote(waiting).status_code == 200
    revoked = chainkeys_cli(
        "approver", "revoke", team.alice.credential, env=env_of(pk_server.settings)
    )
    assert revoked.returncode == 0 and team.alice.credential in revoked.stdout, revoked.stderr
    done = team.bob.signed_vote(waiting)
    assert done.json()["data"]["state"] == "failed", done.text
    assert "integrity" in done.json()["data"]["reason"]


def test_a_vote_row_written_by_hand_counts_for_nothing(team: Team, pk_server: Server) -> None:
    """A database writer adds votes: one without a MAC; one with a MAC (as if the key
    had leaked) but no assertion; one with a MAC carrying bob's real assertion under
    carol's name. None counts: nothing is signed."""
    assert pk_server.services is not None
    svc = pk_server.services
    waiting = pending(team.tenant, 8)
    assert team.bob.signed_vote(waiting).status_code == 200
    bobs = pk_server.call(_votes(pk_server, waiting["id"]))[0]
    integrity = svc.approvals.integrity
    assert integrity is not None
    forged = [
        Vote(
            waiting["id"],
            "mallory",
            "t",
            "approve",
            waiting["digest"],
            None,
            bobs.created_ms,
            mac="v1:" + "00" * 32,
        ),
        replace(bobs, voter_label="dave", voter_token_id="t", assertion=None),
        replace(bobs, voter_label="carol", voter_token_id="t"),
    ]
    forged = [
        v
        if v.voter_label == "mallory"
        else replace(v, mac=integrity.mac(APPROVAL_VOTES, v.covered()))
        for v in forged
    ]

    async def write() -> None:
        async with svc.db.write() as tx:
            for v in forged:
                await tx.execute(insert(approval_votes), v.covered())

    pk_server.call(write())
    view = team.tenant.client.get(f"/approvals/{waiting['id']}").json()["data"]
    assert view["state"] == "pending" and len(view["votes"]) == 4
    assert sum(1 for v in view["votes"] if "signed" in v) == 2  # bob's, and carol's copy
    # the forged copy carries an assertion, so the vote that follows reaches the count of
    # two at once; the quorum is recomputed at signing, each assertion verified again
    # against its credential: carol's copy is bob's passkey's, not hers
    settled = team.alice.signed_vote(waiting).json()["data"]
    assert settled["state"] == "signed", settled  # alice + bob: the real quorum
    three = pending(team.tenant, 9)
    assert team.bob.signed_vote(three).status_code == 200
    bobs = pk_server.call(_votes(pk_server, three["id"]))[0]
    copy = replace(bobs, voter_label="carol", voter_token_id="t")
    copy = replace(copy, mac=integrity.mac(APPROVAL_VOTES, copy.covered()))

    async def write_copy() -> None:
        async with svc.db.write() as tx:
            await tx.execute(insert(approval_votes), copy.covered())

    pk_server.call(write_copy())
    # ... and marks the request approved: the sweeper signs approved requests; the
    # quorum, recomputed from verified assertions, is one (bob): nothing is signed
    pk_server.call(_approve_by_hand(pk_server, three["id"]))
    pk_server.call(svc.signing.complete(pk_server.call(svc.approvals.row(three["id"]))))
    final = team.tenant.client.get(f"/approvals/{three['id']}").json()["data"]
    assert final["state"] == "failed" and "integrity" in final["reason"], final
    assert "result" not in final


async def _approve_by_hand(server: Server, approval_id: str) -> None:
    from sqlalchemy import update

    from chainkeys.store.tables import approvals

    assert server.services is not None
    async with server.services.db.write() as tx:
        await tx.execute(
            update(approvals)
            .where(approvals.c.id == approval_id)
            .values(state="approved", decided_ms=clock.now_ms())
        )


async def _votes_of(svc: Any, approval_id: str) -> list[Vote]:
    from chainkeys.approvals.repository import Votes

    async with svc.db.read() as tx:
        return await Votes.of(tx, approval_id)


def _votes(server: Server, approval_id: str) -> Any:
    return _votes_of(server.services, approval_id)


def test_script_keys_vote_with_a_signature(team: Team, pk_server: Server, tmp_path: Path) -> None:
    """`chainkeys approver add-key`: an Ed25519 and a P-256 key (WebCrypto's r||s form)
    sign the challenge; a signature of anything else is refused."""
    assert pk_server.services is not None
    ed, p256 = ed25519.Ed25519PrivateKey.generate(), ec.generate_private_key(ec.SECP256R1())
    keys = {}
    for label, key in (("erin", ed), ("frank", p256)):
        pem = key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        path = tmp_path / f"{label}.pem"
        path.write_bytes(pem)
        done = chainkeys_cli(
            "approver",
            "add-key",
            "--tenant",
            team.tenant.name,
            "--label",
            label,
            "--group",
            "treasury",
            "--key",
            str(path),
            env=env_of(pk_server.settings),
        )
        assert done.returncode == 0, done.stderr
        keys[label] = done.stdout.split()[2]
    _, erin_token = pk_server.call(
        pk_server.services.tokens.create(
            team.tenant.name, "erin", frozenset({"approve"}), None, None, "treasury"
        )
    )
    _, frank_token = pk_server.call(
        pk_server.services.tokens.create(
            team.tenant.name, "frank", frozenset({"approve"}), None, None, "treasury"
        )
    )
    waiting = pending(team.tenant, 10)
    options = team.alice.options(waiting)  # the challenge is the request's, not the caller's
    message = unb64url(options["challenge"])
    with pk_server.client(erin_token) as erin, pk_server.client(frank_token) as frank:
        wrong = {"credential": keys["erin"], "value": b64url(ed.sign(b"something else"))}
        refused(
            erin.post(
                f"/approvals/{waiting['id']}/approve",
                json={"digest": waiting["digest"], "signature": wrong},
            ),
            "assertion_invalid",
        )
        theirs = {"credential": keys["erin"], "value": b64url(ed.sign(message))}
        refused(
            frank.post(
                f"/approvals/{waiting['id']}/approve",
                json={"digest": waiting["digest"], "signature": theirs},
            ),
            "credential_refused",
        )
        r = erin.post(
            f"/approvals/{waiting['id']}/approve",
            json={"digest": waiting["digest"], "signature": theirs},
        )
        assert r.status_code == 200 and r.json()["data"]["votes"][0]["signed"] == "key", r.text
        der = p256.sign(message, ec.ECDSA(hashes.SHA256()))
        rs = b"".join(n.to_bytes(32, "big") for n in decode_dss_signature(der))
        sig = {"credential": keys["frank"], "value": b64url(rs)}
        r = frank.post(
            f"/approvals/{waiting['id']}/approve",
            json={"digest": waiting["digest"], "signature": sig},
        )
        assert r.json()["data"]["state"] == "signed", r.text
    listed = chainkeys_cli(
        "approver", "list", "--tenant", team.tenant.name, "--json", env=env_of(pk_server.settings)
    )
    kinds = sorted(json.loads(line)["kind"] for line in listed.stdout.splitlines())
    assert kinds == ["ed25519", "p256", "webauthn", "webauthn", "webauthn"]


def test_enrolment_codes(team: Team, pk_server: Server) -> None:
    """A code is the person's it names, single use (enrol checks), and lasts 15 minutes;
    a registration for another origin or without user verification is refused."""
    code = invite(pk_server, team.tenant.name, "alice")
    refused(
        team.bob.client.post("/approvers/me/credentials/options", json={"code": code}),
        "invite_invalid",
    )  # bob's token with alice's code
    refused(
        team.alice.client.post("/approvers/me/credentials/options", json={"code": "cki_guessed"}),
        "invite_invalid",
    )
    options = team.alice.client.post(
        "/approvers/me/credentials/options", json={"code": code}
    ).json()["data"]
    elsewhere = Authenticator("https://evil.example").create(options)
    r = team.alice.client.post(
        "/approvers/me/credentials", json={"code": code, "credential": elsewhere}
    )
    refused(r, "registration_invalid")
    with clock.shift(15 * 60_000 + 1):
        refused(
            team.alice.client.post("/approvers/me/credentials/options", json={"code": code}),
            "invite_invalid",
        )
    bad = team.alice.client.post(
        "/approvers/me/credentials", json={"code": code, "credential": "x"}
    )
    assert bad.status_code in (400, 403) and bad.status_code < 500
    assert pk_server.services is not None  # an invite is for someone with an approve token
    pk_server.call(
        pk_server.services.tokens.create(
            team.tenant.name, "gus", frozenset({"approve"}), None, None, "treasury"
        )
    )
    cli = chainkeys_cli(
        "approver",
        "invite",
        "--tenant",
        team.tenant.name,
        "--label",
        "gus",
        "--group",
        "treasury",
        env=env_of(pk_server.settings),
    )
    assert cli.returncode == 0 and cli.stdout.splitlines()[-1].startswith("cki_"), cli.stderr


def test_without_a_public_url_passkeys_are_refused_clearly(server: Server, tenant: Tenant) -> None:
    assert server.services is not None
    _, token = server.call(
        server.services.tokens.create(
            tenant.name, "zed", frozenset({"approve"}), None, None, "treasury"
        )
    )
    with server.client(token) as c:
        r = c.post("/approvers/me/credentials/options", json={"code": "cki_x"})
        assert r.status_code == 400 and r.json()["code"] == "passkeys_not_configured"
