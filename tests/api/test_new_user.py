"""What a new user met following the README and docs (issue 67), as that user meets it:
an approver invite for someone who cannot vote is refused and says why."""

from __future__ import annotations

import json
from typing import Any

from tests.api.tenants import Tenant
from tests.conftest import Server, chainkeys_cli
from tests.test_rotation import env_of


def test_an_invite_is_refused_for_someone_who_cannot_vote(server: Server, tenant: Tenant) -> None:
    """`approver invite` for a label with no live approve token of that group is refused
    (exit 1, the command that makes one in the message, no code printed) and audited:
    the code could never be used, and it is nearly always a typo."""
    assert server.services is not None
    env = env_of(server.settings)

    def invite(label: str, group: str = "treasury") -> Any:
        return chainkeys_cli("approver", "invite", "--tenant", tenant.name, "--label", label,
                             "--group", group, env=env)  # fmt: skip

    nobody = invite("alice")
    assert nobody.returncode == 1 and "cki_" not in nobody.stdout
    assert nobody.stderr == (
        f"chainkeys: alice holds no live approve token of group treasury in {tenant.name}, "
        "so a passkey enrolled with this code could never vote; create one first: chainkeys "
        f"token create --tenant {tenant.name} --scope approve --group treasury --label alice\n"
    )
    server.call(server.services.tokens.create(
        tenant.name, "alice", frozenset({"approve"}), None, None, "ops"))  # fmt: skip
    elsewhere = invite("alice")  # a typo of the group, most likely: say which she holds
    assert elsewhere.returncode == 1
    assert "(their approve tokens are of ops)" in elsewhere.stderr
    server.call(server.services.tokens.create(tenant.name, "Alice", frozenset({"read"})))
    assert invite("alice").returncode == 1  # her token, but without the approve scope
    revoked, _ = server.call(server.services.tokens.create(
        tenant.name, "ALICE", frozenset({"approve"}), None, None, "treasury"))  # fmt: skip
    server.call(server.services.tokens.revoke(revoked.id))
    assert invite("alice").returncode == 1  # revoked: votes no more
    server.call(server.services.tokens.create(
        tenant.name, "Alice", frozenset({"approve"}), None, None, "treasury"))  # fmt: skip
    done = invite("alice")  # "Alice" is alice: one person, as votes count them
    assert done.returncode == 0 and done.stdout.splitlines()[-1].startswith("cki_"), done.stderr
    audit = chainkeys_cli("audit", "--tenant", tenant.name, "--action", "approver.invite",
                          "--json", env=env).stdout.splitlines()  # fmt: skip
    events = [json.loads(line) for line in audit]
    assert [e["outcome"] for e in events] == ["refused"] * 4 + ["ok"]
    assert events[0]["details"] == {"label": "alice", "group": "treasury",
                                    "code": "no_approve_token"}  # fmt: skip
