"""What a new user met following the README and docs (issue 67), as that user meets it:
an approver invite for someone who cannot vote is refused and says why; the approvals
list is newest first, as the docs say, and its pages follow on; a sealed server says so
in its log and says when it is unsealed; the console opened at 127.0.0.1 says where
passkeys work, and an EOS account's QR code is labelled as its account name."""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import tests.conftest as harness
from tests.api.tenants import Tenant
from tests.api.test_approvals import Team, pending, send, team  # noqa: F401
from tests.api.test_sign_cosmos import ADDRESS, PRIVATE
from tests.api.test_sign_eos import NAME
from tests.conftest import TLS, Server, chainkeys_cli, own_server, wait_for
from tests.masterkey.test_rotation import env_of
from tests.node import chromium, run_node
from tests.process.test_process import start

from chainkeys.vault.shares import parse_share


def test_an_invite_is_refused_for_someone_who_cannot_vote(server: Server, tenant: Tenant) -> None:
    """`approver invite` for a label with no live approve token of that group is refused
    (exit 1, the command that makes one in the message, no code printed) and audited:
    the code could never be used, and it is nearly always a typo."""
    assert server.services is not None
    env = env_of(server.settings)

    def invite(label: str, group: str = "treasury") -> Any:
        return chainkeys_cli(
            "approver",
            "invite",
            "--tenant",
            tenant.name,
            "--label",
            label,
            "--group",
            group,
            env=env,
        )

    nobody = invite("alice")
    assert nobody.returncode == 1 and "cki_" not in nobody.stdout
    assert nobody.stderr == (
        f"chainkeys: alice holds no live approve token of group treasury in {tenant.name}, "
        "so a passkey enrolled with this code could never vote; create one first: chainkeys "
        f"token create --tenant {tenant.name} --scope approve --group treasury --label alice\n"
    )
    server.call(
        server.services.tokens.create(
            tenant.name, "alice", frozenset({"approve"}), None, None, "ops"
        )
    )
    elsewhere = invite("alice")  # a typo of the group, most likely: say which she holds
    assert elsewhere.returncode == 1
    assert "(their approve tokens are of ops)" in elsewhere.stderr
    server.call(server.services.tokens.create(tenant.name, "Alice", frozenset({"read"})))
    assert invite("alice").returncode == 1  # her token, but without the approve scope
    revoked, _ = server.call(
        server.services.tokens.create(
            tenant.name, "ALICE", frozenset({"approve"}), None, None, "treasury"
        )
    )
    server.call(server.services.tokens.revoke(revoked.id))
    assert invite("alice").returncode == 1  # revoked: votes no more
    server.call(
        server.services.tokens.create(
            tenant.name, "Alice", frozenset({"approve"}), None, None, "treasury"
        )
    )
    done = invite("alice")  # "Alice" is alice: one person, as votes count them
    assert done.returncode == 0 and done.stdout.splitlines()[-1].startswith("cki_"), done.stderr
    audit = chainkeys_cli(
        "audit", "--tenant", tenant.name, "--action", "approver.invite", "--json", env=env
    ).stdout.splitlines()
    events = [json.loads(line) for line in audit]
    assert [e["outcome"] for e in events] == ["refused"] * 4 + ["ok"]
    assert events[0]["details"] == {
        "label": "alice",
        "group": "treasury",
        "code": "no_approve_token",
    }


def test_approvals_are_listed_newest_first_page_after_page(team: Team) -> None:  # noqa: F811
    """docs/approvals.md says newest first: every page is, and a page's cursor leads to
    the next older ones, none twice, none skipped, with a state filter too."""
    made = [pending(team.tenant, send(5000 + n, sequence=n))["id"] for n in range(5)]
    rejected = team.bob.post(f"/approvals/{made[1]}/reject", json={"reason": "no"})
    assert rejected.status_code == 200, rejected.text
    newest_first = list(reversed(made))

    def every_page(client: httpx.Client, limit: int, state: str | None) -> list[list[str]]:
        pages: list[list[str]] = []
        params: dict[str, Any] = {"limit": limit, **({"state": state} if state else {})}
        while True:
            r = client.get("/approvals", params=params)
            assert r.status_code == 200, r.text
            data = r.json()["data"]
            pages.append([a["id"] for a in data["approvals"]])
            if "next_cursor" not in data:
                return pages
            params["cursor"] = data["next_cursor"]

    assert every_page(team.tenant.client, 2, None) == [
        newest_first[:2],
        newest_first[2:4],
        newest_first[4:],
    ]
    waiting = [i for i in newest_first if i != made[1]]
    assert every_page(team.bob, 3, "pending") == [waiting[:3], waiting[3:]]
    assert every_page(team.alice, 100, "rejected") == [[made[1]]]
    # a sign request made after the first page was read is not in the pages that follow
    first = team.alice.get("/approvals", params={"limit": 2, "state": "pending"}).json()["data"]
    newer = pending(team.tenant, send(9000, sequence=9))["id"]
    rest = team.alice.get(
        "/approvals", params={"limit": 100, "state": "pending", "cursor": first["next_cursor"]}
    )
    assert [a["id"] for a in rest.json()["data"]["approvals"]] == waiting[2:]
    assert every_page(team.alice, 100, "pending")[0][0] == newer


SHARE = re.compile(r"share \d+: (\S+)")


def test_a_sealed_server_says_so_in_its_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`chainkeys serve` under shamir logs one line at start saying it is sealed and how
    many shares it waits for (not the share set's id), and one when it is unsealed.
    A process of its own: its log is the subject."""
    for var in ("CHAINKEYS_MASTER_KEY", "CHAINKEYS_DATABASE_URL"):
        monkeypatch.delenv(var, raising=False)
    env = {"CHAINKEYS_DATA_DIR": str(tmp_path / "data"), "CHAINKEYS_MASTER_KEY_PROVIDER": "shamir"}
    made = chainkeys_cli("init", "--shares", "3", "--threshold", "2", env=env)
    assert made.returncode == 0, made.stderr
    shares = SHARE.findall(made.stdout)
    set_id = parse_share(shares[0]).set_id
    proc = start(env, tmp_path / "serve.log")
    try:
        log = proc.log_path
        wait_for(lambda: "sealed: waiting for 2 of 3 shares" in log.read_text(), "the sealed line")
        assert "unsealed" not in log.read_text()
        with httpx.Client(base_url=proc.base_url, verify=TLS, timeout=30) as c:
            for share in shares[:2]:
                assert c.post("/sys/unseal", json={"share": share}).status_code == 200
        wait_for(lambda: "unsealed: " in log.read_text(), "the unsealed line")
    finally:
        text = proc.stop()
    assert text.count("sealed: waiting for") == 1
    assert set_id not in text and not any(share in text for share in shares)


@contextlib.contextmanager
def at_localhost(backend: str, data_dir: Path) -> Iterator[tuple[Server, int]]:
    """A server whose CHAINKEYS_PUBLIC_URL is http://localhost:<its port> (the harness
    picks the port: it is picked here first and handed to it)."""
    port = harness.free_port()
    real = harness.free_port
    harness.free_port = lambda: port
    try:
        with own_server(backend, data_dir, public_url=f"http://localhost:{port}") as srv:
            harness.free_port = real
            yield srv, port
    finally:
        harness.free_port = real


def test_the_console_at_127_0_0_1_says_where_passkeys_work(tmp_path: Path) -> None:
    """The README once said http://127.0.0.1:8000; passkeys are bound to a name
    (localhost) and browsers refuse them on an IP address: enrolling there says where
    to go. And an EOS account's QR code is its account name, labelled so (it must exist
    on chain), where other families show a deposit address. SQLite: no storage here
    differs by engine."""
    browser = chromium()
    with at_localhost("sqlite", tmp_path) as (server, port):
        assert server.services is not None
        t = Tenant(server)
        for family, body in (
            ("eos", {"private_key": PRIVATE, "name": NAME}),
            ("cosmos", {"private_key": PRIVATE}),
        ):
            assert t.client.post(f"/{family}", json=body).status_code == 200
        _, alice = server.call(
            server.services.tokens.create(
                t.name, "alice", frozenset({"approve"}), None, None, "treasury"
            )
        )
        code, _ = server.call(
            server.services.approvals.passkeys.invite(t.name, "alice", "treasury")
        )
        seen = run_node(
            "new_user.mjs",
            {
                "url": f"http://127.0.0.1:{port}",
                "chromium": browser,
                "approver": alice,
                "code": code,
                "token": server.new_token(t.name),
                "eos": NAME,
                "cosmos": ADDRESS,
            },
            timeout=180,
        )
        t.client.close()
    assert "failure" not in seen, seen
    assert seen["secure"] is True  # the browser would try: 127.0.0.1 is a secure context
    assert seen["enrolMessage"] == (
        "no passkey was made: this page is at 127.0.0.1, but passkeys here are bound to "
        "localhost (CHAINKEYS_PUBLIC_URL): open the console at localhost (browsers never "
        "allow passkeys on an IP address such as 127.0.0.1: use a name, such as localhost)"
    )
    assert seen["eos"]["caption"] == (
        "Account name (it must exist on chain before funds are sent to it)"
    )
    assert "Account name" in seen["eos"]["facts"] and "Address" not in seen["eos"]["facts"]
    assert seen["cosmos"]["caption"] == "Deposit address" and "Address" in seen["cosmos"]["facts"]
    assert seen["errors"] == []
