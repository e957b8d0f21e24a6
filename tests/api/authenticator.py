"""A software WebAuthn authenticator for the tests: the test acting as the approver's
device. It answers the service's creation and request options as a platform
authenticator would (attestation "none", user present and verified, a P-256 key, a
sign counter), so the API is driven without a browser; the service verifies with
py_webauthn. Chromium's own virtual authenticator is tests/verifiers/passkeys.mjs."""

from __future__ import annotations

import base64
import hashlib
import json
import os
from dataclasses import dataclass, field
from typing import Any

import cbor2
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


UP, UV, AT = 0x01, 0x04, 0x40


@dataclass
class Authenticator:
    """One passkey on one device, for `origin`."""

    origin: str
    key: ec.EllipticCurvePrivateKey = field(
        default_factory=lambda: ec.generate_private_key(ec.SECP256R1())
    )
    credential_id: bytes = field(default_factory=lambda: os.urandom(32))
    counter: int = 0
    user_handle: bytes = b""

    def _client_data(self, kind: str, challenge: str) -> bytes:
        return json.dumps(
            {"type": kind, "challenge": challenge, "origin": self.origin, "crossOrigin": False}
        ).encode()

    def create(self, options: dict[str, Any]) -> dict[str, Any]:
        """The registration response (PublicKeyCredential.toJSON()) for creation options."""
        self.user_handle = unb64url(options["user"]["id"])
        numbers = self.key.public_key().public_numbers()
        cose = {
            1: 2,
            3: -7,
            -1: 1,
            -2: numbers.x.to_bytes(32, "big"),
            -3: numbers.y.to_bytes(32, "big"),
        }
        attested = (
            bytes(16)
            + len(self.credential_id).to_bytes(2, "big")
            + self.credential_id
            + cbor2.dumps(cose)
        )
        auth_data = (
            hashlib.sha256(options["rp"]["id"].encode()).digest()
            + bytes([UP | UV | AT])
            + self.counter.to_bytes(4, "big")
            + attested
        )
        attestation = cbor2.dumps({"fmt": "none", "attStmt": {}, "authData": auth_data})
        client_data = self._client_data("webauthn.create", options["challenge"])
        return {
            "id": b64url(self.credential_id),
            "rawId": b64url(self.credential_id),
            "type": "public-key",
            "authenticatorAttachment": "platform",
            "clientExtensionResults": {"credProps": {"rk": True}},
            "response": {
                "clientDataJSON": b64url(client_data),
                "attestationObject": b64url(attestation),
                "transports": ["internal"],
            },
        }

    def get(
        self, options: dict[str, Any], counter: int | None = None, challenge: str | None = None
    ) -> dict[str, Any]:
        """An assertion (PublicKeyCredential.toJSON()) for request options; the counter
        moves on by one unless given."""
        self.counter = self.counter + 1 if counter is None else counter
        auth_data = (
            hashlib.sha256(options["rpId"].encode()).digest()
            + bytes([UP | UV])
            + self.counter.to_bytes(4, "big")
        )
        client_data = self._client_data("webauthn.get", challenge or options["challenge"])
        signature = self.key.sign(
            auth_data + hashlib.sha256(client_data).digest(), ec.ECDSA(hashes.SHA256())
        )
        return {
            "id": b64url(self.credential_id),
            "rawId": b64url(self.credential_id),
            "type": "public-key",
            "authenticatorAttachment": "platform",
            "clientExtensionResults": {},
            "response": {
                "clientDataJSON": b64url(client_data),
                "authenticatorData": b64url(auth_data),
                "signature": b64url(signature),
                "userHandle": b64url(self.user_handle),
            },
        }
