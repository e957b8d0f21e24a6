"""Emergency freezes through real HTTP on both engines: a freeze of a tenant and of one
account stops every signature, export and approving vote in its scope (423 `frozen`,
naming it), is announced by the webhook and audited, ends at `until` (the clock seam)
or when the operator lifts it, and holds on another replica of the same database at
once. POST /freezes refuses what it cannot take in words, never a 5xx."""

from __future__ import annotations

import hashlib
import hmac
import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.api.tenants import Tenant
from tests.api.test_multisig import keypair, send_doc
from tests.api.test_sign_cosmos import ADDRESS, PRIVATE, TRANSFER
from tests.conftest import (
    BACKENDS,
    Server,
    backend_settings,
    chainkeys_cli,
    drop_pg_database,
    own_server,
    wait_for,
)
from tests.masterkey.test_rotation import env_of
from tests.process.test_background import Recording

from chainkeys import clock

pytestmark = pytest.mark.long(20)  # seconds (busy run): scheduled early

SECRET = "whsec-freezes-0123456789abcdef"
SEND = f"/cosmos/{ADDRESS}/sign-transfer"
APPROVAL_RULE = {
    "family": "cosmos",
    "approval": {"quorum": 1, "group": "ops", "ttl": "2h"},
    "above": {"uatom": "10000000"},
}


@dataclass
class Rig:
    server: Server
    receiver: Recording

    def events(self, kind: str) -> list[dict[str, Any]]:
        """The webhook's events of `kind`, each signature checked as a receiver does."""
        out = []
        for header, body in list(self.receiver.received):
            parts = dict(p.split("=", 1) for p in header.split(","))
            mac = hmac.new(SECRET.encode(), parts["t"].encode() + b"." + body, hashlib.sha256)
            assert hmac.compare_digest(mac.hexdigest(), parts["v1"]), header
            event = json.loads(body)
            if event["type"] == kind:
                out.append(event)
        return out


@pytest.fixture(scope="module", params=BACKENDS)
def rig(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    receiver = Recording()
    url = f"http://127.0.0.1:{receiver.port}/hook"
    try:
        with own_server(
            request.param,
            tmp_path_factory.mktemp("freezes"),
            export_enabled=True,
            webhook_url=url,
            webhook_secret=SECRET,
        ) as srv:
            yield Rig(srv, receiver)
    finally:
        receiver.close()


@dataclass
class Team:
    tenant: Tenant
    alice: httpx.Client  # an approver
    cosmos_alice: httpx.Client  # an approver whose token is limited to cosmos
    doge: httpx.Client  # a reader limited to dogecoin


@pytest.fixture
def team(rig: Rig) -> Iterator[Team]:
    server = rig.server
    assert server.services is not None
    tenant = Tenant(server)
    _, full = server.call(
        server.services.tokens.create(
            tenant.name, "ops", frozenset({"read", "create", "sign", "export"})
        )
    )
    tenant.client.close()
    tenant.client = server.client(full)
    assert tenant.client.post("/cosmos", json={"private_key": PRIVATE}).status_code == 200

    def token(label: str, scopes: set[str], families: set[str] | None = None) -> httpx.Client:
        assert server.services is not None
        _, t = server.call(
            server.services.tokens.create(
                tenant.name,
                label,
                frozenset(scopes),
                None,
                frozenset(families) if families else None,
                "ops" if "approve" in scopes else None,
            )
        )
        return server.client(t)

    clients = [
        token("alice", {"approve"}),
        token("alice", {"approve"}, {"cosmos"}),
        token("doge-reader", {"read"}, {"dogecoin"}),
    ]
    yield Team(tenant, *clients)
    for c in (tenant.client, *clients):
        c.close()


def freeze(c: httpx.Client, **body: Any) -> dict[str, Any]:
    r = c.post("/freezes", json={"reason": "the payout host may be compromised", **body})
    assert r.status_code == 201, r.text
    assert r.json()["success"] is True
    data: dict[str, Any] = r.json()["data"]
    return data


def refused_frozen(r: httpx.Response, made: dict[str, Any]) -> None:
    assert r.status_code == 423, r.text
    body = r.json()
    assert body["success"] is False and body["code"] == "frozen"
    assert made["id"] in body["message"] and made["reason"] in body["message"], body


def transfer(sender: str = ADDRESS, amount: int = 1000, sequence: int = 1) -> dict[str, Any]:
    return {**TRANSFER, "fromAddress": sender, "amount": str(amount), "sequence": sequence}


def audit(c: httpx.Client, action: str) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = c.get("/audit", params={"action": action}).json()["data"][
        "events"
    ]
    return events


def test_a_tenant_freeze_stops_signs_exports_and_votes_until_the_operator_lifts_it(
    rig: Rig, team: Team
) -> None:
    t = team.tenant
    wallet = t.client.post("/wallets", json={}).json()["data"]["id"]
    assert t.sign(SEND, transfer()).status_code == 200
    made = freeze(team.alice)
    assert made["account"] is None and made["until"] is None
    assert made["created_by"] == "alice" and made["id"].startswith("frz_")
    refused_frozen(t.sign(SEND, transfer(sequence=2)), made)
    refused_frozen(t.sign(f"/cosmos/{ADDRESS}/sign-message", {"message": "hi"}), made)
    refused_frozen(t.client.post(f"/cosmos/{ADDRESS}/export"), made)
    refused_frozen(t.client.post(f"/wallets/{wallet}/export"), made)
    listed = t.client.get("/freezes").json()["data"]["freezes"]
    assert [f["id"] for f in listed] == [made["id"]]
    signs = audit(t.client, "sign")
    assert [e["outcome"] for e in signs[:2]] == ["frozen", "frozen"]
    assert signs[0]["details"]["freeze"] == made["id"]
    assert [e["outcome"] for e in audit(t.client, "export")] == ["frozen"]
    assert audit(t.client, "freeze.create")[0]["details"]["freeze"] == made["id"]
    wait_for(
        lambda: any(e["freeze"]["id"] == made["id"] for e in rig.events("freeze.created")),
        "the freeze.created event",
    )
    webhook = rig.server.settings.webhook_url or ""
    env = {
        **env_of(rig.server.settings),
        "CHAINKEYS_WEBHOOK_URL": webhook,
        "CHAINKEYS_WEBHOOK_SECRET": SECRET,
    }  # the servers' settings, as an operator's
    listing = chainkeys_cli("freeze", "list", "--tenant", t.name, "--json", env=env)
    assert listing.returncode == 0, listing.stderr
    assert json.loads(listing.stdout)["id"] == made["id"]
    lifted = chainkeys_cli("freeze", "lift", "--tenant", t.name, made["id"], env=env)
    assert lifted.returncode == 0 and made["id"] in lifted.stdout, lifted.stderr
    assert t.sign(SEND, transfer(sequence=2)).status_code == 200  # at once, no refresh
    assert t.client.get("/freezes").json()["data"]["freezes"] == []
    again = chainkeys_cli("freeze", "lift", "--tenant", t.name, made["id"], env=env)
    assert again.returncode == 1 and "ended already" in again.stderr
    assert audit(t.client, "freeze.lift")[0]["details"]["freeze"] == made["id"]
    wait_for(
        lambda: any(
            e["freeze"]["id"] == made["id"] and e["freeze"]["lifted_at"]
            for e in rig.events("freeze.lifted")
        ),
        "the freeze.lifted event",
    )


def test_an_account_freeze_holds_over_that_account_only_and_ends_at_until(
    rig: Rig, team: Team
) -> None:
    t = team.tenant
    t.policy(APPROVAL_RULE)
    other = t.client.post("/cosmos", json={}).json()["data"]["data"]["address"]
    waiting = t.sign(SEND, transfer(amount=20_000_000))  # opened before the freeze
    assert waiting.status_code == 202, waiting.text
    approval = waiting.json()["data"]
    until = datetime.now(UTC) + timedelta(hours=1)
    made = freeze(team.cosmos_alice, account=f"cosmos/{ADDRESS.upper()}", until=until.isoformat())
    assert made["account"] == f"cosmos/{ADDRESS}"  # canonical
    refused_frozen(t.sign(SEND, transfer(sequence=5)), made)
    refused_frozen(t.sign(SEND, transfer(amount=30_000_000, sequence=6)), made)  # no approval
    refused_frozen(t.client.post(f"/cosmos/{ADDRESS}/export"), made)
    assert t.sign(f"/cosmos/{other}/sign-transfer", transfer(other)).status_code == 200
    assert t.client.post(f"/cosmos/{other}/export").status_code == 200
    vote = {"digest": approval["digest"]}
    refused_frozen(team.alice.post(f"/approvals/{approval['id']}/approve", json=vote), made)
    assert team.alice.get(f"/approvals/{approval['id']}").json()["data"]["state"] == "pending"
    assert [e["outcome"] for e in audit(t.client, "approval.approve")] == ["frozen"]
    # seen by the tenant's tokens of its family; not by one limited to another family
    assert [f["id"] for f in team.cosmos_alice.get("/freezes").json()["data"]["freezes"]] == [
        made["id"]
    ]
    assert team.doge.get("/freezes").json()["data"]["freezes"] == []
    with clock.shift(3_600_000 + 1000):  # past `until`: it holds no more
        assert t.client.get("/freezes").json()["data"]["freezes"] == []
        assert t.sign(SEND, transfer(sequence=7)).status_code == 200
        done = team.alice.post(f"/approvals/{approval['id']}/approve", json=vote)
        assert done.status_code == 200 and done.json()["data"]["state"] == "signed", done.text


def test_a_rejection_is_taken_while_frozen(team: Team) -> None:
    """A freeze stops what moves funds or keys; a rejection can only stop a request."""
    t = team.tenant
    t.policy(APPROVAL_RULE)
    approval = t.sign(SEND, transfer(amount=20_000_000)).json()["data"]
    freeze(team.alice)
    r = team.alice.post(f"/approvals/{approval['id']}/reject", json={"reason": "frozen: no"})
    assert r.status_code == 200 and r.json()["data"]["state"] == "rejected", r.text


def test_who_may_freeze_and_what_is_refused_in_words(team: Team) -> None:
    t = team.tenant
    assert t.client.post("/freezes", json={"reason": "x"}).status_code == 403  # no approve
    limited = team.cosmos_alice.post("/freezes", json={"reason": "the whole tenant"})
    assert limited.status_code == 403 and "limited to families" in limited.json()["message"]
    other_family = team.cosmos_alice.post(
        "/freezes", json={"reason": "x", "account": "dogecoin/D8vFz4p1L37jdg47HXKtSHA5uYLYxbGgPD"}
    )
    assert other_family.status_code == 403
    future = (datetime.now(UTC) + timedelta(days=1)).isoformat()
    cases = [
        ({"reason": "x", "account": "bitcoin/x"}, 400, "invalid_account"),
        ({"reason": "x", "account": "cosmos"}, 400, "invalid_account"),
        ({"reason": "x", "account": "cosmos/cosmos1notanaddress"}, 404, "account_not_found"),
        ({"reason": "x", "account": "cosmos/has space"}, 400, None),
        ({"reason": "x", "until": "2001-01-01T00:00:00Z"}, 400, "invalid_until"),
        ({"reason": "x", "until": "2030-01-01T00:00:00"}, 400, None),  # no offset
        ({"reason": "x", "until": "tomorrow"}, 400, None),
        ({"reason": "   "}, 400, "invalid_reason"),
        ({"reason": "looks \u202eevil"}, 400, "invalid_reason"),
        ({"reason": "two\nlines"}, 400, "invalid_reason"),
        ({"reason": "x" * 501}, 400, None),
        ({"reason": "x", "until": future, "extra": 1}, 400, None),
        ({}, 400, None),
    ]
    for body, status, code in cases:
        r = team.alice.post("/freezes", json=body)
        assert r.status_code == status, (body, r.text)
        assert r.json()["success"] is False and r.json()["message"], r.text
        if code is not None:
            assert r.json()["code"] == code, (body, r.text)
    assert t.client.get("/freezes").json()["data"]["freezes"] == []
    refusals = [e["outcome"] for e in audit(t.client, "freeze.create")]
    assert {
        "invalid_account",
        "account_not_found",
        "invalid_until",
        "invalid_reason",
        "forbidden",
    } <= set(refusals)
    assert t.sign(SEND, transfer()).status_code == 200


def test_an_admin_freezes_and_a_signer_is_refused_and_audited(rig: Rig, team: Team) -> None:
    """`POST /freezes` takes an approve or an admin token (the tenant's people); any
    other token is a 403 naming both, audited, and freezes nothing."""
    server, t = rig.server, team.tenant
    assert server.services is not None
    _, admin_token = server.call(
        server.services.tokens.create(t.name, "carol", frozenset({"admin"}))
    )
    _, bot_token = server.call(
        server.services.tokens.create(t.name, "payout-bot", frozenset({"sign"}))
    )
    with server.client(admin_token) as admin, server.client(bot_token) as bot:
        refused = bot.post("/freezes", json={"reason": "a signer may not brake"})
        assert refused.status_code == 403, refused.text
        body = refused.json()
        assert body["success"] is False and body["code"] == "forbidden"
        assert "'approve'" in body["message"] and "'admin'" in body["message"], body
        assert t.client.get("/freezes").json()["data"]["freezes"] == []
        assert t.sign(SEND, transfer()).status_code == 200  # nothing was frozen
        denied = [e for e in audit(t.client, "denied") if e["details"]["path"] == "/freezes"]
        assert [(e["outcome"], e["details"]["scope"], e["details"]["method"]) for e in denied] == [
            ("forbidden", "approve|admin", "POST")
        ]
        made = freeze(admin, account=f"cosmos/{ADDRESS}", reason="carol saw odd withdrawals")
        assert made["created_by"] == "carol" and made["account"] == f"cosmos/{ADDRESS}"
        refused_frozen(t.sign(SEND, transfer(sequence=2)), made)
        refused_frozen(t.client.post(f"/cosmos/{ADDRESS}/export"), made)
        assert [f["id"] for f in admin.get("/freezes").json()["data"]["freezes"]] == [made["id"]]
        assert audit(t.client, "freeze.create")[0]["details"]["freeze"] == made["id"]
        whole = freeze(admin)  # an admin token not limited to families: the whole tenant
        other = t.client.post("/cosmos", json={}).json()["data"]["data"]["address"]
        refused_frozen(t.sign(f"/cosmos/{other}/sign-transfer", transfer(other)), whole)


def test_a_frozen_member_key_signs_for_no_multisig_and_a_frozen_multisig_combines_nothing(
    team: Team,
) -> None:
    c = team.tenant.client
    (a_secret, a_pub), (b_secret, b_pub) = keypair(), keypair()
    member = c.post("/cosmos", json={"private_key": a_secret}).json()["data"]["data"]["address"]
    assert c.post("/cosmos", json={"private_key": b_secret}).status_code == 200
    ms = c.post(
        "/cosmos/multisig", json={"threshold": 2, "public_keys": [a_pub, b_pub, keypair()[1]]}
    ).json()["data"]
    base, doc = f"/cosmos/{ms['address']}", send_doc(ms["address"], sequence=0)
    sigs = c.post(f"{base}/sign-amino", json={"signDoc": doc}).json()["data"]["signatures"]
    assert len(sigs) == 2
    of_member = freeze(team.alice, account=f"cosmos/{member}")
    refused_frozen(
        c.post(f"{base}/sign-amino", json={"signDoc": send_doc(ms["address"], 1)}), of_member
    )
    combine = {"signDoc": doc, "signatures": sigs}
    assert c.post(f"{base}/combine", json=combine).status_code == 200  # it opens no key
    of_multisig = freeze(team.alice, account=f"cosmos/{ms['address']}")
    refused_frozen(c.post(f"{base}/combine", json=combine), of_multisig)
    seen = [(e["details"]["kind"], e["outcome"]) for e in audit(c, "sign")[:3]]
    assert seen == [("combine", "frozen"), ("combine", "ok"), ("sign-amino", "frozen")]


TEXT = st.text(max_size=30) | st.sampled_from(["cosmos/", "cosmos/x", f"cosmos/{ADDRESS}", ""])
VALUES = TEXT | st.integers() | st.none() | st.booleans() | st.lists(st.integers(), max_size=2)
DATES = st.datetimes(timezones=st.none() | st.just(UTC)).map(lambda d: d.isoformat())


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    body=st.dictionaries(
        st.sampled_from(["reason", "account", "until", "other"]), VALUES | DATES, max_size=4
    )
    | VALUES
)
def test_any_body_is_a_freeze_or_a_clear_refusal_that_changes_nothing(
    team: Team, body: Any
) -> None:
    before = team.alice.get("/freezes").json()["data"]["freezes"]
    r = team.alice.post("/freezes", json=body)
    assert r.status_code in (201, 400, 403, 404, 409), (body, r.status_code, r.text[:300])
    after = team.alice.get("/freezes").json()["data"]["freezes"]
    if r.status_code == 201:
        assert r.json()["data"] in after
        return
    assert r.json()["success"] is False and r.json()["code"] and r.json()["message"]
    assert after == before


@pytest.mark.parametrize("backend", BACKENDS, indirect=True)
def test_a_freeze_made_on_one_replica_holds_on_the_other_at_once(
    backend: str, tmp_path: Path
) -> None:
    """Two servers on one database: what one makes or lifts, the other obeys at its next
    request (no cache of freezes to wait out)."""
    settings, pg_url = backend_settings(backend, tmp_path / "a")
    a, b = Server(settings, backend), Server(settings, backend)  # one store, two servers
    a.start()
    b.start()
    try:
        assert a.services is not None and b.services is not None
        tenant = f"r-{uuid.uuid4().hex[:8]}"
        _, signer = a.call(a.services.tokens.create(tenant, "ops"))
        _, approver = a.call(
            a.services.tokens.create(tenant, "alice", frozenset({"approve"}), group="ops")
        )
        with a.client(signer) as on_a, b.client(signer) as on_b, a.client(approver) as alice:
            assert on_a.post("/cosmos", json={"private_key": PRIVATE}).status_code == 200
            assert on_b.post(SEND, json=transfer()).status_code == 200  # B has read it all
            made = freeze(alice, account=f"cosmos/{ADDRESS}")
            refused_frozen(on_b.post(SEND, json=transfer(sequence=2)), made)
            b.call(b.services.freezes.lift(tenant, made["id"]))
            assert on_a.post(SEND, json=transfer(sequence=2)).status_code == 200
            assert on_b.post(SEND, json=transfer(sequence=3)).status_code == 200
    finally:
        b.stop()
        a.stop()
        if pg_url:
            drop_pg_database(pg_url)


def test_a_freeze_refuses_each_item_of_a_batch_in_its_place(team: Team) -> None:
    """`sign-batch`: every item of a frozen account is 423 in its place, audited as
    alone; another account's batch signs."""
    t = team.tenant
    other = t.client.post("/cosmos", json={}).json()["data"]["data"]["address"]
    made = freeze(team.cosmos_alice, account=f"cosmos/{ADDRESS}")
    items = [{"kind": "sign-transfer", **transfer(sequence=n)} for n in (1, 2)]
    r = t.client.post(f"/cosmos/{ADDRESS}/sign-batch", json={"items": items})
    assert r.status_code == 200, r.text
    results = r.json()["data"]["results"]
    assert [(x["status"], x["code"]) for x in results] == [(423, "frozen"), (423, "frozen")]
    assert made["id"] in results[0]["message"]
    assert [e["outcome"] for e in audit(t.client, "sign")[:2]] == ["frozen", "frozen"]
    theirs = [{"kind": "sign-transfer", **transfer(other)}]
    r = t.client.post(f"/cosmos/{other}/sign-batch", json={"items": theirs})
    assert r.json()["data"]["results"][0]["status"] == 200, r.text
