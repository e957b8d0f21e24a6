"""Approver passkeys in the console, in headless Chromium with a CDP virtual
authenticator (tests/verifiers/passkeys.mjs), on both engines: an approver signs in
with her approve token, enrols a passkey with an operator's code, approves one request
and rejects another with it, keyboard only; a second approver's passkey (the software
authenticator of tests/api/authenticator.py) completes the quorum, and every vote
carries its assertion. WebAuthn needs a secure context: the page is opened at
http://localhost (one), which is also the RP id."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import tests.conftest as harness
from tests.api.authenticator import Authenticator
from tests.api.tenants import Tenant
from tests.api.test_approvals import SEND, send
from tests.api.test_sign_cosmos import PRIVATE
from tests.conftest import BACKENDS, Server, own_server
from tests.node import chromium, run_node

pytestmark = [pytest.mark.slow, pytest.mark.long(15)]
RULE = {
    "family": "cosmos",
    "network": "cosmoshub",
    "approval": {"quorum": 2, "group": "treasury", "ttl": "1h", "passkey": True},
}


@contextlib.contextmanager
def localhost_server(backend: str, data_dir: Path) -> Iterator[tuple[Server, str]]:
    """A server whose CHAINKEYS_PUBLIC_URL is http://localhost:<its port> (the harness
    picks the port: it is picked here first and handed to it)."""
    port = harness.free_port()
    url = f"http://localhost:{port}"
    real = harness.free_port
    harness.free_port = lambda: port
    try:
        with own_server(backend, data_dir, public_url=url) as srv:
            harness.free_port = real
            yield srv, url
    finally:
        harness.free_port = real


@pytest.mark.parametrize("backend", BACKENDS)
def test_enrol_approve_and_reject_with_a_passkey_by_keyboard(backend: str, tmp_path: Path) -> None:
    browser = chromium()
    with localhost_server(backend, tmp_path) as (server, url):
        assert server.services is not None
        svc = server.services
        t = Tenant(server)
        assert t.client.post("/cosmos", json={"private_key": PRIVATE}).status_code == 200
        t.policy(RULE)
        _, alice = server.call(
            svc.tokens.create(t.name, "alice", frozenset({"approve"}), None, None, "treasury")
        )
        _, bob = server.call(
            svc.tokens.create(t.name, "bob", frozenset({"approve"}), None, None, "treasury")
        )
        code, _ = server.call(svc.approvals.passkeys.invite(t.name, "alice", "treasury"))
        approve, reject = (ok(t.sign(SEND, send(5000, sequence=n))) for n in (1, 2))
        seen = run_node(
            "passkeys.mjs",
            {
                "url": url,
                "chromium": browser,
                "token": alice,
                "code": code,
                "approve": approve["id"],
                "reject": reject["id"],
                "rejectReason": "not this payee",
            },
            timeout=180,
        )
        assert "failure" not in seen, seen
        assert seen["secure"] is True and "Passkeys" in seen["menu"]
        assert seen["tabbedToMenu"] and seen["tabbedToCode"] and seen["tabbedToApprove"]
        assert (
            seen["enrolMessage"].startswith("Passkey apc_") and "enrolled" in seen["enrolMessage"]
        )
        assert len(seen["listed"]) == 1 and "passkey" in seen["listed"][0]
        assert [(c["resident"], c["rpId"]) for c in seen["held"]] == [(True, "localhost")]
        assert "each vote signed with a passkey" in seen["card"]
        assert "approved by you" in seen["approveMessage"], seen["approveMessage"]
        assert "alice approved (signed with a passkey)" in seen["votedCard"]
        assert seen["tabbedToReason"] and seen["tabbedToReject"]
        assert "rejected" in seen["rejectMessage"], seen["rejectMessage"]
        # two assertions: the authenticator's counter moved with each (the service checks it)
        assert seen["signCount"] == [seen["held"][0]["signCount"] + 2]
        assert seen["errors"] == [] and seen["foreign"] == []
        rejected = t.client.get(f"/approvals/{reject['id']}").json()["data"]
        assert rejected["state"] == "rejected" and rejected["votes"][0]["signed"] == "passkey"
        # bob, with his own passkey (the software authenticator), completes the quorum
        with server.client(bob) as b:
            device = Authenticator(url)
            bob_code, _ = server.call(svc.approvals.passkeys.invite(t.name, "bob", "treasury"))
            options = ok(b.post("/approvers/me/credentials/options", json={"code": bob_code}))
            ok(
                b.post(
                    "/approvers/me/credentials",
                    json={"code": bob_code, "credential": device.create(options)},
                )
            )
            only_token = b.post(
                f"/approvals/{approve['id']}/approve", json={"digest": approve["digest"]}
            )
            assert only_token.status_code == 403
            assert only_token.json()["code"] == "passkey_required"
            request = ok(
                b.get(f"/approvals/{approve['id']}/challenge", params={"decision": "approve"})
            )
            done = ok(
                b.post(
                    f"/approvals/{approve['id']}/approve",
                    json={"digest": approve["digest"], "assertion": device.get(request)},
                )
            )
        assert done["state"] == "signed", done
        assert [v.get("signed") for v in done["votes"]] == ["passkey", "passkey"]
        t.client.close()


def ok(r: Any) -> Any:
    assert r.status_code in (200, 202), r.text
    return r.json()["data"]
