"""The console's Changes page, its layout on a phone, readable times and a sealed
server's /ui (issues 64 and 67), in headless Chromium (tests/verifiers/console_changes.mjs).

On both engines: an admin invited with `chainkeys admin invite` (the service's
invite, group `*admins`) enrols a passkey in the console with their admin token; a
change another admin filed through the API is on the Changes page with its diff in
words; the admin approves it with the passkey, by keyboard, and it is scheduled (it
loosens) with its countdown; another is cancelled from the page. A read token is
offered no Changes page. At 390 px no page scrolls sideways; the audit's times read
as local time with the ISO time in their title. A sealed server's /ui says it is
sealed and how to unseal, and nothing of the share set. WebAuthn needs a secure
context: the console is opened at http://localhost, the RP id."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.api.authenticator import Authenticator
from tests.api.test_console_passkeys import localhost_server
from tests.api.test_governance import CAPPED, admin, capped
from tests.api.test_passkeys import ORIGIN, pk_server  # noqa: F401
from tests.api.test_sign_cosmos import PRIVATE
from tests.conftest import BACKENDS, TLS, Server, chainkeys_cli
from tests.masterkey.test_rotation import env_of
from tests.node import chromium, run_node
from tests.process.test_process import start

from chainkeys.approvals.proofs import ADMINS, b64url, change_challenge
from chainkeys.vault.shares import parse_share

pytestmark = [pytest.mark.slow, pytest.mark.long(35)]
ARTIFACTS = Path(os.environ.get("CHAINKEYS_TEST_ARTIFACTS", "build/test-artifacts"))
SHARE = re.compile(r"share \d+: (\S+)")


def ok(r: httpx.Response) -> Any:
    assert r.status_code in (200, 202), r.text
    return r.json()["data"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_admin_votes_on_a_change_with_a_passkey(backend: str, tmp_path: Path) -> None:
    browser = chromium()
    shots = ARTIFACTS.resolve()
    shots.mkdir(parents=True, exist_ok=True)
    with localhost_server(backend, tmp_path) as (server, url):
        svc = server.services
        assert svc is not None
        name = f"g-{backend}-{os.urandom(4).hex()}"
        reader = server.new_token(name)
        server.call(svc.policies.set(name, json.dumps(CAPPED), "json"))
        server.call(svc.governance.set(name, 2, "1h"))
        bob = admin(server, name, "bob")  # a script key: his vote is the first of two
        _, alice = server.call(svc.tokens.create(name, "alice", frozenset({"admin"})))
        code, _ = server.call(svc.approvals.passkeys.invite(name, "alice", ADMINS))
        loosen = ok(bob.client.post("/changes", json={"kind": "policy", "document": capped(5000)}))
        assert ok(bob.vote(loosen))["approvals"] == 1
        tighten = ok(bob.client.post("/changes", json={"kind": "policy", "document": capped(500)}))
        with server.client(reader) as r:
            ok(r.post("/cosmos", json={"private_key": PRIVATE}))  # an audit row with an account
        seen = run_node(
            "console_changes.mjs",
            {
                "url": url,
                "chromium": browser,
                "shots": str(shots),
                "tag": backend,
                "admin": alice,
                "code": code,
                "loosen": loosen["id"],
                "tighten": tighten["id"],
                "reader": reader,
            },
            timeout=300,
        )
        after = ok(bob.client.get(f"/changes/{loosen['id']}"))
        cancelled = ok(bob.client.get(f"/changes/{tighten['id']}"))
        bob.client.close()

    assert "failure" not in seen, json.dumps(seen)
    assert seen["errors"] == [], seen["errors"]
    # an admin token: Changes (and Passkeys) in the menu, and the console opens there
    assert "Changes" in seen["adminMenu"] and "Overview" not in seen["adminMenu"]
    assert seen["adminFirst"][1] == "Changes"
    assert seen["enrolMessage"].startswith("Passkey apc_"), seen["enrolMessage"]
    # the list: state, the diff in words, loosens, votes
    diff = "rule (cosmos/cosmoshub): per-transaction cap raised for uatom: 1000 -> 5000"
    card = seen["loosenCard"]
    assert "PENDING" in card.upper() and diff in card and "1 of 2 approvals" in card, card
    assert "yes: it waits the delay" in card and "1 h after the quorum" in card, card
    assert "bob approved" in card
    assert "no: it only tightens" in seen["tightenCard"], seen["tightenCard"]
    assert loosen["digest"] in seen["detail"]
    # approved with the passkey, by keyboard: scheduled, its countdown shown
    assert seen["tabbedToApprove"]
    assert seen["approveMessage"] == f"{loosen['id']}: approved by you; now scheduled"
    assert "in 1 h" in seen["scheduledCard"] or "in 59 min" in seen["scheduledCard"]
    assert after["state"] == "scheduled" and [v["label"] for v in after["votes"]] == [
        "bob",
        "alice",
    ]
    assert seen["effectiveTitle"] == after["effective_at"].replace("+00:00", "Z") or seen[
        "effectiveTitle"
    ].startswith(after["effective_at"][:19])
    # cancelled from the page
    assert seen["cancelMessage"] == f"{tighten['id']}: cancelled by you; now cancelled"
    assert cancelled["state"] == "cancelled" and cancelled["ended_by"] == "alice"
    # a read token: no Changes, and its page refused
    assert "Changes" not in seen["readerMenu"] and "Not here" in seen["readerChanges"]
    # times: local and readable, the ISO time in the title
    text, title, stamp = seen["auditTime"]
    assert title == stamp and re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", title)
    assert "T" not in text and "Z" not in text, text
    assert seen["auditAccountWidth"] >= 250  # the account column is not cramped at 1280 px
    # at 390 px, no page scrolls sideways
    wide = {page: w for page, w in seen["widths"].items() if w[0] != w[1]}
    assert len(seen["widths"]) == 12 and wide == {}, wide


def test_admin_invite_enrols_an_admins_passkey(pk_server: Server) -> None:  # noqa: F811
    """`chainkeys admin invite` prints a code an admin token spends on a passkey (here the
    software authenticator) of the group *admins, which then signs the admin's vote on
    a change; an approve token of the same person cannot spend an admin's code."""
    server = pk_server
    assert server.services is not None
    svc = server.services
    name = f"g-{os.urandom(4).hex()}"
    server.new_token(name)
    server.call(svc.policies.set(name, json.dumps(CAPPED), "json"))
    server.call(svc.governance.set(name, 1, "1h"))
    _, token = server.call(svc.tokens.create(name, "dana", frozenset({"admin"})))
    _, approve = server.call(
        svc.tokens.create(name, "dana", frozenset({"approve"}), None, None, "treasury")
    )
    env = env_of(server.settings)
    made = chainkeys_cli("admin", "invite", "--tenant", name, "--label", "dana", env=env)
    assert made.returncode == 0, made.stderr
    code = made.stdout.splitlines()[-1]
    assert code.startswith("cki_") and "admin dana" in made.stdout
    with server.client(approve) as wrong:
        refused = wrong.post("/approvers/me/credentials/options", json={"code": code})
        assert refused.status_code == 403 and refused.json()["code"] == "invite_invalid"
    device = Authenticator(ORIGIN)
    with server.client(token) as dana:
        options = ok(dana.post("/approvers/me/credentials/options", json={"code": code}))
        ok(
            dana.post(
                "/approvers/me/credentials",
                json={"code": code, "credential": device.create(options)},
            )
        )
        [held] = ok(dana.get("/approvers/me/credentials"))["credentials"]
        assert held["group"] == ADMINS and held["kind"] == "webauthn"
        change = ok(dana.post("/changes", json={"kind": "policy", "document": capped(500)}))
        request = {
            "challenge": b64url(change_challenge(change["id"], change["digest"], "approve")),
            "rpId": "localhost",
            "userVerification": "required",
        }
        done = ok(
            dana.post(
                f"/changes/{change['id']}/approve",
                json={"digest": change["digest"], "assertion": device.get(request)},
            )
        )
    assert done["state"] == "applied"  # it only tightens: at the quorum of one


def test_a_sealed_server_says_so_in_the_console(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """/ui of a sealed server: a page saying it is sealed, how to unseal and how many
    shares are given (what /sys/seal-status says to anyone), never the share set's id;
    its style loads, the console's scripts do not. A process of its own: the sealed
    state is a process's (SQLite: nothing of it differs by engine)."""
    browser = chromium()
    for var in ("CHAINKEYS_MASTER_KEY", "CHAINKEYS_DATABASE_URL"):
        monkeypatch.delenv(var, raising=False)
    env = {"CHAINKEYS_DATA_DIR": str(tmp_path / "data"), "CHAINKEYS_MASTER_KEY_PROVIDER": "shamir"}
    made = chainkeys_cli("init", "--shares", "3", "--threshold", "2", env=env)
    assert made.returncode == 0, made.stderr
    shares = SHARE.findall(made.stdout)
    set_id = parse_share(shares[0]).set_id
    proc = start(env, tmp_path / "serve.log")
    shots = ARTIFACTS.resolve()
    shots.mkdir(parents=True, exist_ok=True)
    try:
        with httpx.Client(base_url=proc.base_url, verify=TLS, timeout=30) as c:
            page = c.get("/ui")
            assert page.status_code == 503 and page.headers["content-type"].startswith("text/html")
            assert "Content-Security-Policy" in page.headers
            assert c.get("/ui/console.css").status_code == 200
            assert c.get("/ui/app.mjs").json()["code"] == "sealed"  # the console stays shut
            assert c.get("/ui/sealed.html").json()["code"] == "sealed"
            assert c.post("/sys/unseal", json={"share": shares[0]}).status_code == 200
        seen = run_node(
            "console_changes.mjs",
            {
                "walk": "sealed",
                "url": proc.base_url,
                "chromium": browser,
                "shots": str(shots),
                "tag": "sealed",
            },
            timeout=120,
        )
    finally:
        proc.stop()
    assert "failure" not in seen, json.dumps(seen)
    assert seen["errors"] == [], seen["errors"]
    assert seen["status"] == 503
    assert "This server is sealed" in seen["text"] and "chainkeys operator unseal" in seen["text"]
    assert seen["progress"] == "1 of 2 shares given so far."
    assert set_id not in seen["text"] and not any(s in seen["text"] for s in shares)
    assert seen["widths"]["sealed"][0] == seen["widths"]["sealed"][1]
