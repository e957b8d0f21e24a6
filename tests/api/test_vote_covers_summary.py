"""A signed vote covers the summary people were shown, through real HTTP on both
engines: `GET /approvals/{id}/challenge` returns the summary beside the challenge
(SHA-256("chainkeys approval v2" || id || digest || SHA-256(canonical summary JSON) ||
decision)), and a script key's vote over another summary, or over the old v1
challenge, does not count."""

from __future__ import annotations

import copy
import hashlib
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519
from tests.api.authenticator import b64url, unb64url
from tests.api.test_passkeys import Team, pending, pk_server, refused, team  # noqa: F401
from tests.conftest import Server, chainkeys_cli
from tests.masterkey.test_rotation import env_of

from chainkeys.approvals.proofs import canonical, challenge


def _add_key(server: Server, tenant: str, label: str, tmp_path: Path) -> tuple[Any, str]:
    key = ed25519.Ed25519PrivateKey.generate()
    pem = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    path = tmp_path / f"{label}.pem"
    path.write_bytes(pem)
    done = chainkeys_cli(
        "approver",
        "add-key",
        "--tenant",
        tenant,
        "--label",
        label,
        "--group",
        "treasury",
        "--key",
        str(path),
        env=env_of(server.settings),
    )
    assert done.returncode == 0, done.stderr
    return key, done.stdout.split()[2]


def test_canonical_summary_json() -> None:
    assert canonical({"b": 1, "a": ["é", None, True]}) == '{"a":["é",null,true],"b":1}'.encode()
    assert canonical(None) == b"null"
    old = hashlib.sha256(b"chainkeys approval v1" + b"apr_1" + b"ab" + b"approve").digest()
    assert challenge("apr_1", "ab", {"x": 1}, "approve") != old
    assert challenge("apr_1", "ab", {"x": 1}, "approve") != challenge(
        "apr_1", "ab", {"x": 2}, "approve"
    )


def test_a_vote_over_another_summary_does_not_count(
    team: Team,  # noqa: F811
    pk_server: Server,  # noqa: F811
    tmp_path: Path,
) -> None:
    assert pk_server.services is not None
    key, credential = _add_key(pk_server, team.tenant.name, "erin", tmp_path)
    _, token = pk_server.call(
        pk_server.services.tokens.create(
            team.tenant.name, "erin", frozenset({"approve"}), None, None, "treasury"
        )
    )
    waiting = pending(team.tenant, 41)
    with pk_server.client(token) as erin:
        got = erin.get(f"/approvals/{waiting['id']}/challenge", params={"decision": "approve"})
        assert got.status_code == 200, got.text
        options = got.json()["data"]
        assert options["summary"] == waiting["summary"]
        honest = challenge(waiting["id"], waiting["digest"], waiting["summary"], "approve")
        assert unb64url(options["challenge"]) == honest

        def vote(message: bytes) -> Any:
            sig = {"credential": credential, "value": b64url(key.sign(message))}
            return erin.post(
                f"/approvals/{waiting['id']}/approve",
                json={"digest": waiting["digest"], "signature": sig},
            )

        shown = copy.deepcopy(waiting["summary"])  # what a compromised screen showed
        shown["items"][0]["amounts"][0].update(amount="9000", display="0.009 ATOM")
        other = challenge(waiting["id"], waiting["digest"], shown, "approve")
        refused(vote(other), "assertion_invalid")
        v1 = hashlib.sha256(
            b"chainkeys approval v1" + f"{waiting['id']}{waiting['digest']}approve".encode()
        ).digest()
        refused(vote(v1), "assertion_invalid")
        state = team.tenant.client.get(f"/approvals/{waiting['id']}").json()["data"]
        assert state["votes"] == [] and state["state"] == "pending"
        counted = vote(honest)
        assert counted.status_code == 200, counted.text
        assert counted.json()["data"]["votes"][0]["signed"] == "key"
