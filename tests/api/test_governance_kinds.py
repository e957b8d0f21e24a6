"""Governed changes other than a policy, through real HTTP on both engines: lifting a
freeze (it loosens: it waits the delay after the quorum, the supervised round applies
it, a freeze that ended meanwhile leaves it superseded, and the operator's own lift is
refused on a governed tenant); the tenant's quorum and delay themselves (raising
applies at the quorum, lowering waits the current delay, a quorum no set of live
admin keys could meet is refused); a new token (answered once to its filer, stored
nowhere in clear, opening nothing until applied); an approver's or admin's key. Any
malformed body is a 400 in the envelope that changes nothing."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import select
from tests.api.test_freezes import SECRET, Rig
from tests.api.test_governance import CAPPED, HOUR_MS, Admin, Governed, admin, capped
from tests.conftest import BACKENDS, Server, chainkeys_cli, own_server, wait_for
from tests.masterkey.test_rotation import env_of
from tests.process.test_background import Recording

from chainkeys import clock
from chainkeys.store.tables import audit as audit_table
from chainkeys.store.tables import changes

pytestmark = pytest.mark.long(45)  # seconds (busy run): scheduled early


@pytest.fixture
def team(server: Server) -> Iterator[Governed]:
    """A tenant with a capped policy, governed by 2 of alice, bob and carol, 1 h delay
    (as test_governance.py's `governed`)."""
    assert server.services is not None
    name = f"k-{uuid.uuid4().hex[:10]}"
    server.new_token(name)
    server.call(server.services.policies.set(name, json.dumps(CAPPED), "json"))
    server.call(server.services.governance.set(name, 2, "1h"))
    made = Governed(server, name)
    for label in ("alice", "bob", "carol"):
        made.admins[label] = admin(server, name, label)
    yield made
    for a in made.admins.values():
        a.client.close()


def file(team: Governed, by: str, body: dict[str, Any]) -> dict[str, Any]:
    r = team.admins[by].client.post("/changes", json=body)
    assert r.status_code == 202, r.text
    data: dict[str, Any] = r.json()["data"]
    return data


def refused(r: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert r.status_code == status, r.text
    body: dict[str, Any] = r.json()
    assert body["success"] is False and body["code"] == code, body
    return body


def approver(team: Governed) -> httpx.Client:
    """An approver of the tenant (who freezes it)."""
    services = team.server.services
    assert services is not None
    _, token = team.server.call(
        services.tokens.create(team.name, "erin", frozenset({"approve"}), None, None, "ops")
    )
    return team.server.client(token)


def freeze(client: httpx.Client, **body: Any) -> dict[str, Any]:
    r = client.post("/freezes", json={"reason": "the payout host may be compromised", **body})
    assert r.status_code == 201, r.text
    data: dict[str, Any] = r.json()["data"]
    return data


def holding(client: httpx.Client) -> list[str]:
    r = client.get("/freezes")
    assert r.status_code == 200, r.text
    return [f["id"] for f in r.json()["data"]["freezes"]]


def due(team: Governed) -> int:
    assert team.server.services is not None
    return team.server.call(team.server.services.governance.due())


def governance(team: Governed) -> tuple[int, int]:
    assert team.server.services is not None
    row = team.server.call(team.server.services.governance.show(team.name))
    assert row is not None
    return row.quorum, row.delay_ms


def audited(team: Governed, action: str) -> list[dict[str, Any]]:
    env = env_of(team.server.settings)
    shown = chainkeys_cli("audit", "--tenant", team.name, "--json", env=env)
    assert shown.returncode == 0, shown.stderr
    events = [json.loads(line) for line in shown.stdout.splitlines()]
    return [e for e in events if e["action"] == action]


def test_a_freeze_is_lifted_by_the_quorum_after_the_delay(team: Governed) -> None:
    alice, bob = team.admins["alice"], team.admins["bob"]
    with approver(team) as erin:
        made = freeze(erin)
        change = file(team, "alice", {"kind": "freeze.lift", "freeze": made["id"]})
        assert change["kind"] == "freeze.lift" and change["loosens"] is True
        assert change["document"] == {"freeze": made["id"]}
        assert change["diff"] == [
            f"freeze {made['id']} over the whole tenant (the payout host may be compromised) "
            "is lifted: what it stops may be done again"
        ]
        assert alice.vote(change).json()["data"]["state"] == "pending"
        scheduled = bob.vote(change).json()["data"]
        assert scheduled["state"] == "scheduled", scheduled
        assert holding(erin) == [made["id"]]  # the quorum alone lifts nothing
        with clock.shift(HOUR_MS - 60_000):
            assert due(team) == 0
            assert holding(erin) == [made["id"]]
        with clock.shift(HOUR_MS + 1000):  # the supervised round applies it once due
            wait_for(lambda: team.get(change)["state"] == "applied", "the lift applied")
            assert holding(erin) == []
    lifts = audited(team, "freeze.lift")
    assert [(e["outcome"], e["details"]["change"]) for e in lifts] == [("ok", change["id"])]
    applied = audited(team, "change.applied")
    assert applied[0]["details"]["freeze"] == made["id"], applied


def test_a_freeze_that_ended_meanwhile_leaves_its_lift_superseded(team: Governed) -> None:
    alice, bob = team.admins["alice"], team.admins["bob"]
    until = datetime.now(UTC) + timedelta(minutes=30)
    with approver(team) as erin:
        made = freeze(erin, until=until.isoformat())
        change = file(team, "carol", {"kind": "freeze.lift", "freeze": made["id"]})
        alice.vote(change)
        assert bob.vote(change).json()["data"]["state"] == "scheduled"
        with clock.shift(HOUR_MS + 1000):  # the freeze ended at its until, before this
            wait_for(lambda: team.get(change)["state"] == "rejected", "the lift superseded")
            assert holding(erin) == []
            # and a freeze that ended cannot be filed for lifting at all
            r = alice.client.post("/changes", json={"kind": "freeze.lift", "freeze": made["id"]})
            refused(r, 409, "freeze_ended")
    ended = team.get(change)
    assert ended["reason"].startswith("superseded: freeze"), ended
    assert [e["details"]["change"] for e in audited(team, "change.superseded")] == [change["id"]]


def test_what_cannot_be_lifted_is_refused_when_filed(team: Governed) -> None:
    alice = team.admins["alice"]
    r = alice.client.post("/changes", json={"kind": "freeze.lift", "freeze": "frz_nope"})
    refused(r, 404, "freeze_not_found")
    with approver(team) as erin:
        made = freeze(erin)
        other = Governed(team.server, f"k-{uuid.uuid4().hex[:10]}")
        team.server.new_token(other.name)
        outsider = admin(team.server, other.name, "dave")
        assert team.server.services is not None
        team.server.call(team.server.services.governance.set(other.name, 1, "0"))
        # another tenant's admin never reaches this tenant's freeze
        r = outsider.client.post("/changes", json={"kind": "freeze.lift", "freeze": made["id"]})
        refused(r, 404, "freeze_not_found")
        outsider.client.close()
        assert holding(erin) == [made["id"]]
    rejected = audited(team, "change.file")
    assert any(e["outcome"] == "freeze_not_found" for e in rejected), rejected


def test_the_operator_cannot_lift_a_freeze_of_a_governed_tenant_alone(team: Governed) -> None:
    env = env_of(team.server.settings)
    with approver(team) as erin:
        made = freeze(erin)
        lifted = chainkeys_cli("freeze", "lift", "--tenant", team.name, made["id"], env=env)
        assert lifted.returncode == 1, lifted.stdout
        assert "governed" in lifted.stderr and "/changes" in lifted.stderr, lifted.stderr
        assert '"freeze.lift"' in lifted.stderr
        assert holding(erin) == [made["id"]]
    outcomes = [e["outcome"] for e in audited(team, "freeze.lift")]
    assert outcomes == ["governed"]


def test_a_freeze_of_an_ungoverned_tenant_is_still_lifted_by_the_operator(server: Server) -> None:
    assert server.services is not None
    name = f"k-{uuid.uuid4().hex[:10]}"
    server.new_token(name)
    _, token = server.call(
        server.services.tokens.create(name, "erin", frozenset({"approve"}), None, None, "ops")
    )
    with server.client(token) as erin:
        made = freeze(erin)
        lifted = chainkeys_cli(
            "freeze", "lift", "--tenant", name, made["id"], env=env_of(server.settings)
        )
        assert lifted.returncode == 0 and made["id"] in lifted.stdout, lifted.stderr
        assert holding(erin) == []


@pytest.fixture(scope="module", params=BACKENDS)
def hooked(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Rig]:
    """A server of its own whose webhook this test receives (as test_freezes.py's rig)."""
    receiver = Recording()
    url = f"http://127.0.0.1:{receiver.port}/hook"
    try:
        with own_server(
            request.param, tmp_path_factory.mktemp("kinds"), webhook_url=url, webhook_secret=SECRET
        ) as srv:
            yield Rig(srv, receiver)
    finally:
        receiver.close()


def test_a_lift_by_change_is_announced_as_a_change_and_as_a_lift(hooked: Rig) -> None:
    server = hooked.server
    assert server.services is not None
    team = Governed(server, f"k-{uuid.uuid4().hex[:10]}")
    server.new_token(team.name)
    server.call(server.services.governance.set(team.name, 2, "1h"))
    for label in ("alice", "bob"):
        team.admins[label] = admin(server, team.name, label)
    with approver(team) as erin:
        made = freeze(erin)
    change = file(team, "alice", {"kind": "freeze.lift", "freeze": made["id"]})
    team.admins["alice"].vote(change)
    team.admins["bob"].vote(change)
    for a in team.admins.values():
        a.client.close()

    def announced(kind: str) -> list[dict[str, Any]]:
        return [e for e in hooked.events(kind) if e["change"]["id"] == change["id"]]

    wait_for(lambda: len(announced("change.scheduled")) == 1, "change.scheduled announced")
    # the round applies it, and the outbox sends what it queued, on the moved clock
    with clock.shift(HOUR_MS + 1000):
        wait_for(lambda: len(announced("change.applied")) == 1, "change.applied announced")
        wait_for(
            lambda: any(
                e["freeze"]["id"] == made["id"] and e["freeze"].get("lifted_at")
                for e in hooked.events("freeze.lifted")
            ),
            "freeze.lifted announced",
        )
    applied = announced("change.applied")[0]["change"]
    assert applied["kind"] == "freeze.lift" and applied["state"] == "applied"


def test_raising_the_quorum_applies_at_the_quorum_and_then_counts(team: Governed) -> None:
    alice, bob, carol = (team.admins[n] for n in ("alice", "bob", "carol"))
    change = file(team, "alice", {"kind": "governance", "quorum": 3, "delay": "2h"})
    assert change["loosens"] is False
    assert change["diff"] == ["quorum raised: 2 -> 3 admins", "delay raised: 1h -> 2h"]
    assert change["document"] == {
        "quorum": 3,
        "delay_ms": 2 * HOUR_MS,
        "from": {"quorum": 2, "delay_ms": HOUR_MS},
    }
    alice.vote(change)
    assert bob.vote(change).json()["data"]["state"] == "applied"
    assert governance(team) == (3, 2 * HOUR_MS)
    # a change filed now needs all three
    tighter = team.file("bob", capped(100))
    assert tighter["quorum"] == 3
    alice.vote(tighter)
    assert bob.vote(tighter).json()["data"]["state"] == "pending"
    assert carol.vote(tighter).json()["data"]["state"] == "applied"
    assert team.policy() == capped(100)
    assert audited(team, "change.applied")[0]["details"]["quorum"] == 3


def test_lowering_the_delay_waits_the_current_delay(team: Governed) -> None:
    alice, carol = team.admins["alice"], team.admins["carol"]
    change = file(team, "carol", {"kind": "governance", "quorum": 2, "delay": "0"})
    assert change["loosens"] is True and change["diff"] == ["delay lowered: 1h -> 0"]
    alice.vote(change)
    scheduled = carol.vote(change).json()["data"]
    assert scheduled["state"] == "scheduled" and scheduled["delay_seconds"] == 3600
    assert governance(team) == (2, HOUR_MS)
    with clock.shift(HOUR_MS + 1000):
        wait_for(lambda: team.get(change)["state"] == "applied", "the new delay applied")
    assert governance(team) == (2, 0)
    # now a loosening change applies at its quorum
    looser = team.file("alice", capped(5000))
    alice.vote(looser)
    assert carol.vote(looser).json()["data"]["state"] == "applied"
    assert team.policy() == capped(5000)


def test_a_quorum_beyond_the_live_admin_keys_is_refused(team: Governed) -> None:
    alice = team.admins["alice"]
    r = alice.client.post("/changes", json={"kind": "governance", "quorum": 4, "delay": "1h"})
    body = refused(r, 409, "quorum_unreachable")
    assert "3 admins with a live key" in body["message"]
    # a quorum filed when reachable is rejected, not applied, once keys are revoked
    change = file(team, "alice", {"kind": "governance", "quorum": 3, "delay": "1h"})
    other = file(team, "bob", {"kind": "governance", "quorum": 1, "delay": "1h"})
    assert other["loosens"] is True and other["diff"] == ["quorum lowered: 2 -> 1 admins"]
    services = team.server.services
    assert services is not None
    team.admins["alice"].vote(change)
    team.admins["bob"].vote(other)
    team.admins["carol"].vote(other)  # scheduled: lowering waits the delay
    assert team.get(other)["state"] == "scheduled"
    team.server.call(services.approvals.passkeys.revoke(team.admins["carol"].credential))
    team.admins["bob"].vote(change)  # the quorum of 2 now, but 2 live keys for 3
    ended = team.get(change)
    assert ended["state"] == "rejected" and "2 admins with a live key" in ended["reason"]
    assert governance(team) == (2, HOUR_MS)


def test_a_governance_change_made_against_an_older_governance_is_superseded(
    team: Governed,
) -> None:
    alice, bob = team.admins["alice"], team.admins["bob"]
    first = file(team, "alice", {"kind": "governance", "quorum": 3, "delay": "1h"})
    second = file(team, "bob", {"kind": "governance", "quorum": 2, "delay": "3h"})
    alice.vote(first)
    assert bob.vote(first).json()["data"]["state"] == "applied"
    alice.vote(second)
    bob.vote(second)
    assert team.get(second)["state"] == "pending"  # filed at 2, it needs the quorum now: 3
    team.admins["carol"].vote(second)
    ended = team.get(second)
    assert ended["state"] == "rejected" and "superseded" in ended["reason"], ended
    assert governance(team) == (3, HOUR_MS)


def pem(key: ed25519.Ed25519PrivateKey) -> str:
    return (
        key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )


def applied_details(team: Governed, change: dict[str, Any]) -> dict[str, Any]:
    found = [e for e in audited(team, "change.applied") if e["details"]["change"] == change["id"]]
    assert len(found) == 1, found
    details: dict[str, Any] = found[0]["details"]
    return details


def pass_the_delay(team: Governed, change: dict[str, Any]) -> None:
    """Two admins approve a loosening change; the due round applies it after the delay."""
    team.admins["alice"].vote(change)
    assert team.admins["bob"].vote(change).json()["data"]["state"] == "scheduled"
    with clock.shift(HOUR_MS + 1000):
        wait_for(lambda: team.get(change)["state"] == "applied", "the change applied")


def stored_anywhere(team: Governed, secret: str) -> bool:
    """Whether `secret` is in any text column of the changes or audit tables."""
    assert team.server.services is not None
    db = team.server.services.db

    async def scan() -> bool:
        async with db.read() as tx:
            for table in (changes, audit_table):
                for row in (await tx.execute(select(table))).all():
                    if any(isinstance(v, str) and secret in v for v in row):
                        return True
        return False

    return team.server.call(scan())


def test_a_token_by_change_reaches_its_filer_once_and_opens_only_once_applied(
    team: Governed,
) -> None:
    body = {
        "kind": "token",
        "label": "payouts-bot",
        "scopes": ["sign"],
        "families": ["cosmos"],
        "expires": "30d",
    }
    change = file(team, "carol", body)
    token = change["token"]
    assert token.startswith("ck_") and change["loosens"] is True
    assert change["diff"] == [
        "a new token for 'payouts-bot' that may sign, for cosmos, expiring 30d after it applies"
    ]
    assert "token_digest" not in change["document"]
    assert change["document"]["scopes"] == ["sign"]
    assert team.get(change)["token"] is None  # shown once, in the filing's answer
    assert not stored_anywhere(team, token)
    with team.server.client(token) as bot:
        assert bot.get("/tokens/self").status_code == 401  # nothing opens it yet
        pass_the_delay(team, change)
        r = bot.get("/tokens/self")
        assert r.status_code == 200, r.text
        assert r.json()["data"]["scopes"] == ["sign"] and r.json()["data"]["label"] == "payouts-bot"
        made = applied_details(team, change)["token_id"]
        assert team.server.services is not None
        team.server.call(team.server.services.tokens.revoke(made))  # immediate, no change
        assert bot.get("/tokens/self").status_code == 401
    assert not stored_anywhere(team, token)


def test_a_token_change_cancelled_never_opens(team: Governed) -> None:
    change = file(team, "alice", {"kind": "token", "label": "x", "scopes": ["export"]})
    team.admins["alice"].vote(change)
    team.admins["bob"].vote(change)
    assert team.admins["carol"].client.post(f"/changes/{change['id']}/cancel").status_code == 200
    with clock.shift(HOUR_MS + 1000):
        assert due(team) == 0
        with team.server.client(change["token"]) as c:
            assert c.get("/tokens/self").status_code == 401
    refused(
        team.admins["alice"].client.post(
            "/changes", json={"kind": "token", "label": "y", "scopes": ["approve"]}
        ),
        400,
        "invalid_scope",  # an approve token is a person's of a group
    )


def test_an_admin_key_by_change_signs_once_applied(team: Governed) -> None:
    dave_key = ed25519.Ed25519PrivateKey.generate()
    change = file(team, "alice", {"kind": "admin", "label": "dave", "key": pem(dave_key)})
    assert change["loosens"] is True
    assert change["diff"][0].startswith("an ed25519 key (sha256 ")
    assert change["diff"][0].endswith(
        "enrolled for 'dave' as an admin: it signs governance changes"
    )
    pass_the_delay(team, change)
    credential = applied_details(team, change)["credential"]
    assert team.server.services is not None
    _, token = team.server.call(
        team.server.services.tokens.create(team.name, "dave", frozenset({"admin"}))
    )
    dave = Admin("dave", team.server.client(token), dave_key, credential)
    team.admins["dave"] = dave  # closed with the others
    tighter = team.file("dave", capped(10))
    assert dave.vote(tighter).status_code == 200
    assert team.admins["bob"].vote(tighter).json()["data"]["state"] == "applied"
    assert team.policy() == capped(10)


def test_an_approver_key_by_change_is_enrolled_once_applied(team: Governed) -> None:
    key = ed25519.Ed25519PrivateKey.generate()
    body = {"kind": "approver", "label": "erin", "group": "ops", "key": pem(key)}
    change = file(team, "bob", body)
    assert change["document"]["group"] == "ops" and change["loosens"] is True
    with approver(team) as erin:
        assert erin.get("/approvers/me/credentials").json()["data"]["credentials"] == []
        pass_the_delay(team, change)
        listed = erin.get("/approvers/me/credentials").json()["data"]["credentials"]
        assert [c["id"] for c in listed] == [applied_details(team, change)["credential"]]
    bad = dict(body, key="not a key")
    refused(team.admins["bob"].client.post("/changes", json=bad), 400, "invalid_key")


KEY = pem(ed25519.Ed25519PrivateKey.generate())
KINDS = ("policy", "freeze.lift", "governance", "token", "approver", "admin")
VALID: dict[str, dict[str, Any]] = {
    "policy": {"document": None},
    "freeze.lift": {"freeze": "frz_0123"},
    "governance": {"quorum": 2, "delay": "1h"},
    "token": {"label": "bot", "scopes": ["sign"]},
    "approver": {"label": "erin", "group": "ops", "key": KEY},
    "admin": {"label": "dave", "key": KEY},
}
RANGE: dict[str, list[dict[str, Any]]] = {
    "policy": [{"document": {}}, {"document": {"rules": [{}]}}, {"document": {"rules": "x"}}],
    "freeze.lift": [{"freeze": ""}, {"freeze": "f" * 41}],
    "governance": [{"quorum": 0}, {"quorum": 21}, {"delay": "31d"}, {"delay": "1h1m"}],
    "token": [
        {"scopes": []},
        {"scopes": ["read"]},
        {"scopes": ["sign", "sign"]},
        {"scopes": ["admin", "sign"]},
        {"label": ""},
        {"families": ["nochain"]},
        {"families": []},
        {"expires": "0"},
        {"expires": "soon"},
        {"approver_group": "ops"},
        {"scopes": ["approve"], "approver_group": "*admins"},
    ],
    "approver": [{"key": "not a key"}, {"group": "*admins"}, {"label": " "}, {"key": ""}],
    "admin": [{"key": KEY[:60]}, {"label": "x" * 129}],
}
WRONG = st.one_of(
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False).filter(lambda f: not f.is_integer()),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=4), st.integers(), max_size=2),
)
BAD_DELAYS = st.sampled_from(["", " ", "5x", "31d", "-1h", "1.5h", "9999999999s", "h", "1h1m"])


def _fits(name: str, value: Any) -> bool:
    """Whether a WRONG value happens to be right for the field after all."""
    if name == "document":
        return isinstance(value, dict)
    return name == "quorum" and type(value) is int and 1 <= value <= 20


@st.composite
def malformed(draw: st.DrawFn) -> Any:
    """A body that is not a valid change by construction: not an object, no kind or
    an unknown one, a field missing, one too many, or one of the wrong type or range."""
    how = draw(st.sampled_from(["not-object", "kind", "missing", "extra", "type", "range"]))
    if how == "not-object":
        return draw(st.one_of(st.none(), st.integers(), st.text(max_size=8), st.lists(st.none())))
    kind = draw(st.sampled_from(KINDS))
    body: dict[str, Any] = {"kind": kind, **VALID[kind]}
    if how == "kind":
        body["kind"] = draw(st.one_of(st.text(max_size=12).filter(lambda k: k not in KINDS), WRONG))
        if draw(st.booleans()):
            del body["kind"]
    elif how == "missing" and kind != "policy":
        del body[draw(st.sampled_from(sorted(VALID[kind])))]
    elif how == "extra" or (how == "missing" and kind == "policy"):
        name = draw(st.sampled_from(["other", "document", "freeze", "quorum", "delay", "Kind"]))
        if name in body:
            name = "other"
        body[name] = draw(st.one_of(st.none(), st.integers(), st.text(max_size=4)))
    elif how == "type":
        name = draw(st.sampled_from(sorted(VALID[kind])))
        body[name] = draw(WRONG.filter(lambda v: not _fits(name, v)))
    elif kind == "governance" and draw(st.booleans()):
        if draw(st.booleans()):
            body["quorum"] = draw(st.integers().filter(lambda q: not 1 <= q <= 20))
        else:
            body["delay"] = draw(BAD_DELAYS)
    else:
        body.update(draw(st.sampled_from(RANGE[kind])))
    return body


@pytest.fixture
def reader(team: Governed) -> Iterator[httpx.Client]:
    """A token of the tenant that reads its audit log."""
    with team.server.client(team.server.new_token(team.name)) as c:
        yield c


def refusals(reader: httpx.Client) -> list[str]:
    """The outcomes of the tenant's `change.file` events, newest first."""
    r = reader.get("/audit", params={"action": "change.file", "limit": 500})
    assert r.status_code == 200, r.text
    return [e["outcome"] for e in r.json()["data"]["events"]]


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(body=malformed())
def test_any_malformed_change_is_a_400_that_changes_nothing(
    team: Governed, reader: httpx.Client, body: Any
) -> None:
    alice = team.admins["alice"]
    before = alice.client.get("/changes").json()["data"]["changes"]
    seen = refusals(reader)
    r = alice.client.post("/changes", content=json.dumps(body))
    assert r.status_code == 400, (body, r.text)
    answer = r.json()
    assert answer["success"] is False and answer["code"] and answer["message"], answer
    assert alice.client.get("/changes").json()["data"]["changes"] == before
    assert governance(team) == (2, HOUR_MS)
    assert refusals(reader) == [answer["code"], *seen]  # refused, and audited
