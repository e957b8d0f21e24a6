"""`chainkeys --url`: the daily commands against a running server over real HTTP, on
both engines. A governed tenant's policy is filed with `policy set --url`, two admins
approve it with their own keys (Ed25519 and P-256) through `changes approve`, and it
applies; on a shamir store the same commands ask for no share; commands that need the
store, an ungoverned tenant's policy, a server's refusal and an unreachable server are
each refused in one line, and nothing changes."""

from __future__ import annotations

import json
import socket
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.conftest import Server, chainkeys_cli, wait_for

from chainkeys import clock
from chainkeys.approvals.proofs import ADMINS

HOUR_MS = 3_600_000


def capped(amount: int) -> dict[str, Any]:
    rule = {"family": "cosmos", "network": "cosmoshub", "max_per_tx": {"uatom": str(amount)}}
    return {"rules": [rule]}


@dataclass
class Person:
    """An admin as the CLI knows one: a token file, a private key file, a credential."""

    token_file: Path
    key_file: Path
    credential: str


@dataclass
class Tenant:
    server: Server
    name: str
    tmp: Path
    admins: dict[str, Person] = field(default_factory=dict)

    def cli(self, who: str, *args: str, env: dict[str, str | None] | None = None) -> Any:
        """`chainkeys --url` as `who` (a token file of theirs; no store in sight)."""
        given = {"CHAINKEYS_TOKEN_FILE": str(self.admins[who].token_file), **(env or {})}
        return chainkeys_cli("--url", self.server.base_url, *args, env=given)

    def vote(self, who: str, change: str, decision: str = "approve") -> Any:
        person = self.admins[who]
        return self.cli(
            who,
            "changes",
            decision,
            change,
            "--key",
            str(person.key_file),
            "--credential",
            person.credential,
        )

    def policy(self) -> Any:
        assert self.server.services is not None
        shown = self.server.call(self.server.services.policies.show(self.name))
        document = shown.version.document if shown.version else None
        return json.loads(document) if document else None

    def file(self, document: dict[str, Any]) -> str:
        path = self.tmp / f"{uuid.uuid4().hex[:8]}.json"
        path.write_text(json.dumps(document))
        done = self.cli("alice", "policy", "set", self.name, str(path))
        assert done.returncode == 0, done.stderr
        change_id: str = done.stdout.strip().splitlines()[-1]
        assert change_id.startswith("chg_") and f"change {change_id} filed" in done.stdout
        return change_id


def enrol(server: Server, tenant: str, label: str, key: Any, tmp: Path) -> Person:
    """An admin token (that may read the policy and audit too) and an enrolled admin key
    for `label`, as files."""
    assert server.services is not None
    scopes = frozenset({"admin", "read"})
    _, token = server.call(server.services.tokens.create(tenant, label, scopes))
    public = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    row = server.call(
        server.services.approvals.passkeys.add_key(tenant, label, ADMINS, public.decode())
    )
    token_file, key_file = tmp / f"{label}.token", tmp / f"{label}.pem"
    token_file.write_text(token + "\n")
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return Person(token_file, key_file, row.id)


@pytest.fixture
def governed(server: Server, tmp_path: Path) -> Iterator[Tenant]:
    """A capped tenant governed by 2 of alice (Ed25519) and bob (P-256), 1 h delay."""
    assert server.services is not None
    name = f"r-{uuid.uuid4().hex[:10]}"
    server.new_token(name)
    server.call(server.services.policies.set(name, json.dumps(capped(1000)), "json"))
    made = Tenant(server, name, tmp_path)
    made.admins["alice"] = enrol(
        server, name, "alice", ed25519.Ed25519PrivateKey.generate(), tmp_path
    )
    made.admins["bob"] = enrol(
        server, name, "bob", ec.generate_private_key(ec.SECP256R1()), tmp_path
    )
    server.call(server.services.governance.set(name, 2, "1h"))
    yield made


def test_a_tightening_change_filed_and_approved_over_url_applies(governed: Tenant) -> None:
    change = governed.file(capped(500))
    shown = governed.cli("alice", "changes", "show", change)
    assert shown.returncode == 0, shown.stderr
    assert "only tightens" in shown.stdout and "1000 -> 500" in shown.stdout
    first = governed.vote("alice", change)
    assert first.returncode == 0, first.stderr
    assert f"change {change} is pending (1 of 2 approvals)" in first.stdout
    assert governed.policy() == capped(1000)
    second = governed.vote("bob", change)  # a P-256 key's signature
    assert second.returncode == 0, second.stderr
    assert f"change {change} is applied" in second.stdout
    assert governed.policy() == capped(500)
    shown = governed.cli("bob", "policy", "show", governed.name, "--json")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["policy"] == capped(500)
    again = governed.vote("alice", change)
    assert again.returncode == 1 and again.stderr.startswith("chainkeys: the server refused (409")


def test_a_loosening_change_waits_the_delay_and_can_be_cancelled(governed: Tenant) -> None:
    change = governed.file(capped(5000))
    for who in ("alice", "bob"):
        assert governed.vote(who, change).returncode == 0
    assert governed.policy() == capped(1000)
    listed = governed.cli("alice", "changes", "list", "--state", "scheduled", "--json")
    assert [json.loads(line)["id"] for line in listed.stdout.splitlines()] == [change]
    with clock.shift(HOUR_MS + 1000):  # the server's supervised round applies it once due
        wait_for(lambda: governed.policy() == capped(5000), "the change applied")
    other = governed.file(capped(9000))
    cancelled = governed.cli("bob", "changes", "cancel", other)
    assert cancelled.returncode == 0 and f"change {other} cancelled" in cancelled.stdout
    assert governed.vote("alice", other).returncode == 1
    assert governed.policy() == capped(5000)


def test_a_rejection_ends_the_change(governed: Tenant) -> None:
    change = governed.file(capped(10))
    done = governed.vote("bob", change, "reject")
    assert done.returncode == 0 and f"change {change} is rejected" in done.stdout
    assert governed.policy() == capped(1000)


def test_a_shamir_store_is_asked_for_no_share_under_url(governed: Tenant, tmp_path: Path) -> None:
    shamir = {
        "CHAINKEYS_DATA_DIR": str(tmp_path / "shamir"),
        "CHAINKEYS_MASTER_KEY_PROVIDER": "shamir",
        "CHAINKEYS_DATABASE_URL": None,
        "CHAINKEYS_MASTER_KEY": None,
    }
    made = chainkeys_cli("init", "--shares", "3", "--threshold", "2", env=shamir)
    assert made.returncode == 0, made.stderr
    path = tmp_path / "tight.json"
    path.write_text(json.dumps(capped(100)))
    local = chainkeys_cli("policy", "set", governed.name, str(path), env=shamir)
    assert local.returncode != 0 and "Shamir shares: give 2 of the 3" in local.stderr
    remote = governed.cli("alice", "policy", "set", governed.name, str(path), env=shamir)
    assert remote.returncode == 0, remote.stderr
    assert "share" not in remote.stderr.lower()
    change = remote.stdout.strip().splitlines()[-1]
    for who in ("alice", "bob"):
        voted = governed.vote(who, change)
        assert voted.returncode == 0 and "share" not in voted.stderr.lower()
    assert governed.policy() == capped(100)
    audit = governed.cli("alice", "audit", "--action", "change.applied", env=shamir)
    assert audit.returncode == 0 and "share" not in audit.stderr.lower()
    assert change in audit.stdout


def test_an_ungoverned_tenant_is_told_the_policy_needs_the_local_store(
    server: Server, tmp_path: Path
) -> None:
    name = f"u-{uuid.uuid4().hex[:10]}"
    server.new_token(name)
    plain = Tenant(server, name, tmp_path)
    plain.admins["alice"] = enrol(
        server, name, "alice", ed25519.Ed25519PrivateKey.generate(), tmp_path
    )
    path = tmp_path / "p.json"
    path.write_text(json.dumps(capped(1)))
    done = plain.cli("alice", "policy", "set", name, str(path))
    assert done.returncode == 1
    assert "(409 not_governed)" in done.stderr and "without --url" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert plain.policy() is None


def test_a_token_created_over_url_is_a_change_and_opens_nothing_until_it_applies(
    governed: Tenant,
) -> None:
    args = ("token", "create", "--tenant", governed.name, "--label", "payouts")
    done = governed.cli("alice", *args, "--scope", "sign")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    change, token = lines[-3], lines[-1]
    assert change.startswith("chg_") and token.startswith("ck_"), done.stdout
    assert "a new token for 'payouts' that may sign" in done.stdout
    with governed.server.client(token) as c:
        assert c.get("/tokens/self").status_code == 401  # filed, not applied
        for who in ("alice", "bob"):
            assert governed.vote(who, change).returncode == 0
        assert c.get("/tokens/self").status_code == 401  # it loosens: the delay runs
        with clock.shift(HOUR_MS + 1000):
            wait_for(lambda: c.get("/tokens/self").status_code == 200, "the token applied")
        assert c.get("/tokens/self").json()["data"]["scopes"] == ["sign"]
    mixed = governed.cli("alice", *args)  # the default scopes read, create, delete, sign
    assert mixed.returncode == 1 and "may only sign, export, approve or administer" in mixed.stderr
    other = governed.cli("alice", "token", "create", "--tenant", "elsewhere", "--scope", "sign")
    assert other.returncode == 1 and "not 'elsewhere'" in other.stderr


def test_a_candidate_policy_is_tried_by_the_server_over_url(governed: Tenant) -> None:
    from tests.api.test_sign_cosmos import ADDRESS, OTHER, PRIVATE, TRANSFER

    with governed.server.client(governed.server.new_token(governed.name)) as c:
        assert c.post("/cosmos", json={"private_key": PRIVATE}).status_code == 200
    transfer = {
        **TRANSFER,
        "fromAddress": ADDRESS,
        "toAddress": OTHER,
        "amount": "500",
        "feeAmount": "0",
    }
    asked = {"family": "cosmos", "account": ADDRESS, "kind": "sign-transfer", "request": transfer}
    request = governed.tmp / "request.json"
    request.write_text(json.dumps({**asked, "token": {"label": "ignored"}}))
    for cap, status, decision in ((100, 3, "deny"), (1000, 0, "allow")):
        candidate = governed.tmp / f"candidate-{cap}.json"
        candidate.write_text(json.dumps(capped(cap)))
        done = governed.cli("alice", "policy", "test", governed.name, str(candidate), str(request))
        assert done.returncode == status, done.stderr
        shown = json.loads(done.stdout)
        assert shown["decision"] == decision and shown["token"]["label"] == "alice", shown
        assert '"token" in the request file is not used' in done.stderr
    broken = governed.tmp / "broken.json"
    broken.write_text(json.dumps({"rules": [{"family": "cosmos", "max_per_tx": "x"}]}))
    done = governed.cli("alice", "policy", "test", governed.name, str(broken), str(request))
    assert done.returncode == 1 and "max_per_tx" in done.stderr, done.stderr
    with governed.server.client(governed.server.new_token(governed.name)) as c:
        r = c.post("/policy/test", json={**asked, "policy": {"rules": "x"}})
        assert r.status_code == 400 and r.json()["code"] == "invalid_policy", r.text
    assert governed.policy() == capped(1000)  # the policy in force: untouched


def test_what_needs_the_store_refuses_url_in_one_line(governed: Tenant, tmp_path: Path) -> None:
    path = tmp_path / "p.json"
    path.write_text(json.dumps(capped(1)))
    for args in (
        ("operator", "rekey", "--shares", "3", "--threshold", "2"),
        ("key", "rotate"),
        ("audit", "verify"),
        ("token", "list"),
        ("token", "revoke", "tok_x"),
        ("token", "create", "--tenant", governed.name, "--scope", "sign", "--break-glass"),
        ("policy", "set", governed.name, str(path), "--break-glass"),
    ):
        done = governed.cli("alice", *args)
        assert done.returncode in (1, 2), args
        assert "without --url" in done.stderr, (args, done.stderr)
    assert governed.policy() == capped(1000)


def test_refusals_and_unreachable_servers_are_one_clear_line(governed: Tenant) -> None:
    missing = governed.cli("alice", "changes", "show", "chg_nope")
    assert missing.returncode == 1
    assert missing.stderr.startswith("chainkeys: the server refused (404 ")
    other = governed.cli("alice", "policy", "show", "someone-else")
    assert other.returncode == 1 and f"the token is of tenant '{governed.name}'" in other.stderr
    no_token = chainkeys_cli(
        "--url", governed.server.base_url, "changes", "list", env={"CHAINKEYS_TOKEN_FILE": None}
    )
    assert no_token.returncode == 2 and "--token-file" in no_token.stderr
    wrong = governed.admins["alice"].token_file.parent / "wrong.token"
    wrong.write_text("ck_not_a_token\n")
    refused = chainkeys_cli(
        "--url",
        governed.server.base_url,
        "changes",
        "list",
        env={"CHAINKEYS_TOKEN_FILE": str(wrong)},
    )
    assert refused.returncode == 1 and "the server refused (401" in refused.stderr
    assert "ck_not_a_token" not in refused.stderr + refused.stdout
    url = free_loopback_url()
    token = {"CHAINKEYS_TOKEN_FILE": str(governed.admins["alice"].token_file)}
    down = chainkeys_cli("--url", url, "changes", "list", env=token)
    assert down.returncode == 2 and down.stderr.startswith(f"chainkeys: cannot reach {url}")
    assert len(down.stderr.strip().splitlines()) == 1


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(text=st.text(min_size=0, max_size=80))
def test_whatever_a_token_file_holds_it_is_refused_in_one_line_never_shown(
    governed: Tenant, text: str
) -> None:
    path = governed.tmp / "fuzzed.token"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    done = chainkeys_cli(
        "--url",
        governed.server.base_url,
        "changes",
        "list",
        env={"CHAINKEYS_TOKEN_FILE": str(path)},
    )
    assert done.returncode in (1, 2), done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and done.stdout == ""
    secret = text.strip()
    if len(secret) >= 4:
        assert secret not in done.stderr


def free_loopback_url() -> str:
    """A loopback URL whose port was just free (bound, then closed): nobody answers."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def test_the_token_is_never_taken_on_the_command_line() -> None:
    shown = chainkeys_cli("--help")
    assert "--token-file" in shown.stdout and "--token " not in shown.stdout


def test_an_admin_freezes_the_tenant_and_lists_it_over_url(governed: Tenant) -> None:
    none = governed.cli("alice", "freeze", "list", "--tenant", governed.name)
    assert none.returncode == 0 and f"no freeze holds in {governed.name}" in none.stdout
    made = governed.cli(
        "alice", "freeze", "create", "--tenant", governed.name, "--reason", "host compromised"
    )
    assert made.returncode == 0, made.stderr
    freeze_id = made.stdout.strip().split()[-1]
    assert freeze_id.startswith("frz_") and f"froze the tenant {governed.name}" in made.stdout
    listed = governed.cli("bob", "freeze", "list", "--tenant", governed.name, "--json")
    rows = [json.loads(line) for line in listed.stdout.splitlines()]
    assert [(r["id"], r["reason"]) for r in rows] == [(freeze_id, "host compromised")]
    local = chainkeys_cli("freeze", "create", "--tenant", governed.name, "--reason", "x")
    assert local.returncode == 1 and "give --url" in local.stderr
