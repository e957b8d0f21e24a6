"""The operator's grants on a governed tenant defer to its admins (issue 64), on both
engines, against a real server: `token create` of a token that may sign, export or
approve, `approver add-key` and `admin add-key` file a governed change (id, digest and
diff printed; a token change's token once) and change nothing until the quorum and the
delay (the clock seam); then the token works, the key votes. `--break-glass` applies
at once, audited; a `read` token, and every grant on a tenant that is not governed,
is given at once as before."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric import ed25519
from tests.api.test_governance import Admin, Governed, admin, capped
from tests.api.test_governance_kinds import (
    applied_details,
    approver,
    audited,
    pass_the_delay,
    pem,
)
from tests.conftest import Server, chainkeys_cli
from tests.masterkey.test_rotation import env_of

pytestmark = pytest.mark.long(15)  # seconds (busy run): scheduled early


@pytest.fixture
def team(server: Server) -> Iterator[Governed]:
    """A tenant governed by 2 of alice, bob and carol, 1 h delay."""
    assert server.services is not None
    name = f"c-{uuid.uuid4().hex[:10]}"
    server.new_token(name)
    server.call(server.services.governance.set(name, 2, "1h"))
    made = Governed(server, name)
    for label in ("alice", "bob", "carol"):
        made.admins[label] = admin(server, name, label)
    yield made
    for a in made.admins.values():
        a.client.close()


def cli(server: Server, *args: str) -> tuple[int, list[str], str]:
    done = chainkeys_cli(*args, env=env_of(server.settings))
    return done.returncode, done.stdout.splitlines(), done.stderr


def change_of(team: Governed, lines: list[str], at: int = -1) -> dict[str, Any]:
    """The change the CLI filed, as the admins read it (its id printed at `at`), after
    checking the digest it printed is the one they sign."""
    found = team.get({"id": lines[at]})
    assert f"digest {found['digest']}" in lines, lines
    assert found["state"] == "pending" and found["created_by"] == "operator", found
    return found


def key_file(tmp_path: Path, key: ed25519.Ed25519PrivateKey) -> str:
    path = tmp_path / f"{uuid.uuid4().hex[:8]}.pem"
    path.write_text(pem(key))
    return str(path)


def test_token_create_files_a_change_and_its_token_opens_once_applied(team: Governed) -> None:
    code, lines, err = cli(
        team.server,
        "token",
        "create",
        "--tenant",
        team.name,
        "--label",
        "payouts",
        "--scope",
        "sign",
        "--family",
        "cosmos",
    )
    assert code == 0, err
    token = lines[-1]
    assert token.startswith("ck_") and "governed" in lines[0] and "loosens" in lines[0], lines
    assert "a new token for 'payouts' that may sign, for cosmos" in lines[0]
    change = change_of(team, lines, -3)
    assert change["kind"] == "token" and change["token"] is None  # printed once, by the CLI
    with team.server.client(token) as bot:
        assert bot.get("/tokens/self").status_code == 401  # nothing opens it yet
        pass_the_delay(team, change)
        r = bot.get("/tokens/self")
        assert r.status_code == 200, r.text
        assert r.json()["data"]["scopes"] == ["sign"] and r.json()["data"]["label"] == "payouts"
    assert applied_details(team, change)["scopes"] == ["sign"]


def test_an_admin_token_files_a_change_and_files_changes_once_applied(team: Governed) -> None:
    code, lines, err = cli(
        team.server, "token", "create", "--tenant", team.name, "--label", "dave", "--scope", "admin"
    )
    assert code == 0, err
    change = change_of(team, lines, -3)
    assert change["kind"] == "token" and change["loosens"] is True, change
    with team.server.client(lines[-1]) as dave:
        assert dave.get("/changes").status_code == 401  # nothing opens it yet
        pass_the_delay(team, change)
        listed = dave.get("/changes")
        assert listed.status_code == 200, listed.text
        assert change["id"] in [c["id"] for c in listed.json()["data"]["changes"]]
        assert dave.get("/tokens/self").json()["data"]["scopes"] == ["admin"]
    assert applied_details(team, change)["scopes"] == ["admin"]


def test_a_token_with_a_governed_scope_and_others_is_refused(team: Governed) -> None:
    for scope in (None, "read,sign", "admin,sign"):
        asked = ["--scope", scope] if scope else []
        code, lines, err = cli(
            team.server, "token", "create", "--tenant", team.name, "--label", "x", *asked
        )
        assert code == 1, lines
        assert "token of its own" in err and "--break-glass" in err, err
    refusals = [e["outcome"] for e in audited(team, "change.file")]
    assert refusals == ["invalid_scope"] * 3, refusals
    assert team.server.services is not None
    listed = team.server.call(team.server.services.tokens.list(team.name))
    assert "x" not in [t.label for t in listed]


def test_a_read_token_is_given_at_once_on_a_governed_tenant(team: Governed) -> None:
    code, lines, err = cli(
        team.server, "token", "create", "--tenant", team.name, "--label", "dash", "--scope", "read"
    )
    assert code == 0 and "break glass" not in lines[0], err
    with team.server.client(lines[-1]) as dash:
        assert dash.get("/tokens/self").json()["data"]["scopes"] == ["read"]
    assert audited(team, "change.file") == []


def test_admin_add_key_files_a_change_and_the_key_votes_once_applied(
    team: Governed, tmp_path: Path
) -> None:
    dave_key = ed25519.Ed25519PrivateKey.generate()
    code, lines, err = cli(
        team.server,
        "admin",
        "add-key",
        "--tenant",
        team.name,
        "--label",
        "dave",
        "--key",
        key_file(tmp_path, dave_key),
    )
    assert code == 0, err
    assert "enrolled for 'dave' as an admin" in lines[0], lines
    change = change_of(team, lines)
    assert change["kind"] == "admin" and change["loosens"] is True
    assert team.server.services is not None
    _, token = team.server.call(
        team.server.services.tokens.create(team.name, "dave", frozenset({"admin"}))
    )
    pass_the_delay(team, change)
    credential = applied_details(team, change)["credential"]
    dave = Admin("dave", team.server.client(token), dave_key, credential)
    team.admins["dave"] = dave  # closed with the others
    tighter = team.file("dave", capped(10))
    assert dave.vote(tighter).status_code == 200
    assert team.admins["bob"].vote(tighter).json()["data"]["state"] == "applied"
    assert team.policy() == capped(10)


def test_approver_add_key_files_a_change_and_enrols_once_applied(
    team: Governed, tmp_path: Path
) -> None:
    key = ed25519.Ed25519PrivateKey.generate()
    code, lines, err = cli(
        team.server,
        "approver",
        "add-key",
        "--tenant",
        team.name,
        "--label",
        "erin",
        "--group",
        "ops",
        "--key",
        key_file(tmp_path, key),
    )
    assert code == 0, err
    change = change_of(team, lines)
    assert change["kind"] == "approver" and change["document"]["group"] == "ops"
    with approver(team) as erin:
        assert erin.get("/approvers/me/credentials").json()["data"]["credentials"] == []
        pass_the_delay(team, change)
        listed = erin.get("/approvers/me/credentials").json()["data"]["credentials"]
        assert [c["id"] for c in listed] == [applied_details(team, change)["credential"]]


def test_break_glass_applies_at_once_and_is_audited(team: Governed, tmp_path: Path) -> None:
    code, lines, err = cli(
        team.server,
        "token",
        "create",
        "--tenant",
        team.name,
        "--label",
        "urgent",
        "--scope",
        "sign",
        "--break-glass",
    )
    assert code == 0 and "break glass" in lines[0], err
    with team.server.client(lines[-1]) as bot:
        assert bot.get("/tokens/self").status_code == 200
    key = key_file(tmp_path, ed25519.Ed25519PrivateKey.generate())
    code, lines, err = cli(
        team.server,
        "admin",
        "add-key",
        "--tenant",
        team.name,
        "--label",
        "dave",
        "--key",
        key,
        "--break-glass",
    )
    assert code == 0 and lines[-1].startswith("apc_") and "break glass" in err, (lines, err)
    glass = audited(team, "break_glass")
    assert [(e["outcome"], e["details"]["what"]) for e in glass] == [
        ("ok", "token"),
        ("ok", "admin"),
    ], glass
    assert audited(team, "change.file") == []


def test_an_ungoverned_tenant_is_given_at_once(server: Server, tmp_path: Path) -> None:
    name = f"u-{uuid.uuid4().hex[:10]}"
    code, lines, err = cli(
        server, "token", "create", "--tenant", name, "--label", "bot", "--scope", "sign"
    )
    assert code == 0 and "governed" not in lines[0], err
    with server.client(lines[-1]) as bot:
        assert bot.get("/tokens/self").status_code == 200
    key = key_file(tmp_path, ed25519.Ed25519PrivateKey.generate())
    code, lines, err = cli(
        server,
        "approver",
        "add-key",
        "--tenant",
        name,
        "--label",
        "erin",
        "--group",
        "ops",
        "--key",
        key,
    )
    assert code == 0 and "enrolled for erin (ops)" in lines[-1], (lines, err)
    events = chainkeys_cli("audit", "--tenant", name, "--json", env=env_of(server.settings))
    assert '"break_glass"' not in events.stdout and '"change.file"' not in events.stdout
