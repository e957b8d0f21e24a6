"""Votes that carry a signature (docs/approvals.md "Passkeys"): on a rule with
`"passkey": true` the approve token alone is refused; a script key enrolled with
`chainkeys approver add-key` (Ed25519, and P-256 in WebCrypto's r||s form) signs the
request's challenge and the client sends it with the vote; an assertion goes with it
the same way (one for nothing the server knows is refused as such)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import SIGNING_VECTORS, Server
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

from chainkeys_client import (
    ApprovalPending,
    Client,
    Conflict,
    Forbidden,
    KeySignature,
    challenge_bytes,
)

COSMOS = json.loads((SIGNING_VECTORS / "cosmos_signing.json").read_text())
ADDRESS: str = COSMOS["address"]
REQUEST = COSMOS["sign-transfer"]["request"]
TENANT = "pk-votes"


def enrol(server: Server, tmp: Path, label: str, key: ed25519.Ed25519PrivateKey |
          ec.EllipticCurvePrivateKey) -> str:  # fmt: skip
    pem = key.public_key().public_bytes(serialization.Encoding.PEM,
                                        serialization.PublicFormat.SubjectPublicKeyInfo)  # fmt: skip
    path = tmp / f"{label}.pem"
    path.write_bytes(pem)
    out = server.cli("approver", "add-key", "--tenant", TENANT, "--label", label, "--group",
                     "keys", "--key", str(path))  # fmt: skip
    return out.split()[2]  # "<kind> key <id> enrolled for …"


def test_a_vote_signed_by_a_script_key(server: Server, tmp_path: Path) -> None:
    requester = server.token(TENANT, "read,create,sign", label="payouts")
    alice_token = server.token(TENANT, "approve", label="alice", group="keys")
    bob_token = server.token(TENANT, "approve", label="bob", group="keys")
    server.policy(TENANT, {"family": "cosmos", "network": "cosmoshub",
                           "approval": {"quorum": 2, "group": "keys", "passkey": True}})  # fmt: skip
    alice_key, bob_key = (
        ed25519.Ed25519PrivateKey.generate(),
        ec.generate_private_key(ec.SECP256R1()),
    )
    alice_id, bob_id = (
        enrol(server, tmp_path, "alice", alice_key),
        enrol(server, tmp_path, "bob", bob_key),
    )
    with (Client(server.url, requester) as me, Client(server.url, alice_token) as alice,
          Client(server.url, bob_token) as bob):  # fmt: skip
        try:
            me.accounts.create("cosmos", private_key="00" * 31 + "01")
        except Conflict:
            pass
        with pytest.raises(ApprovalPending) as caught:
            me.signing.sign_transfer(ADDRESS, {**REQUEST, "sequence": 41})
        waiting = caught.value.approval
        assert waiting.passkey is True
        digest = waiting.digest or ""
        with pytest.raises(Forbidden) as alone:
            alice.approvals.approve(waiting, digest)
        assert alone.value.code == "passkey_required"
        with pytest.raises(Forbidden) as unknown:
            alice.approvals.approve(waiting, digest, assertion={
                "id": "AAAA", "rawId": "AAAA", "type": "public-key", "response": {}})  # fmt: skip
        assert unknown.value.code == "credential_refused"
        message = challenge_bytes(alice.approvals.challenge(waiting, "approve"), waiting, "approve")
        voted = alice.approvals.approve(
            waiting, digest, signature=KeySignature.of(alice_id, alice_key.sign(message))
        )
        assert voted.state == "pending" and voted.votes[0].signed == "key"
        der = bob_key.sign(message, ec.ECDSA(hashes.SHA256()))
        rs = b"".join(n.to_bytes(32, "big") for n in decode_dss_signature(der))
        done = bob.approvals.approve(waiting, digest, signature=KeySignature.of(bob_id, rs))
        assert done.state == "signed", done
        assert [v.signed for v in done.votes] == ["key", "key"]
