"""What a signed vote is: the challenge it signs, the proof it carries, the script keys
that may sign one, and the refusals (approvals/passkeys.py verifies; docs/approvals.md
"Passkeys").

The challenge binds a vote to one request, its digest, the summary people were shown
(derived from the request: approvals/summaries.py) and one decision, so an assertion
made for anything else verifies for nothing here. Script keys (`chainkeys approver
add-key`) are P-256 or Ed25519 public keys; their signatures are checked with
`cryptography`, a WebAuthn assertion with py_webauthn (in passkeys.py).
"""

from __future__ import annotations

import base64
import hashlib
import json
import unicodedata
from dataclasses import dataclass
from typing import Any, Final

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

from chainkeys.approvals.credentials import CredentialRow
from chainkeys.errors import BadRequest, Forbidden, NotFound

CHALLENGE_PREFIX: Final = b"chainkeys approval v2"
CHANGE_PREFIX: Final = b"chainkeys change v1"
WEBAUTHN, P256, ED25519 = "webauthn", "p256", "ed25519"
DECISIONS: Final = ("approve", "reject")
# The group an admin's credential carries (`chainkeys admin add-key`): no approver group
# can be named so (approver groups start with a letter or digit), so an admin's key
# never signs an approval and an approver's key never signs a governance change.
ADMINS: Final = "*admins"


def canonical(summary: dict[str, Any] | None) -> bytes:
    """A summary's canonical JSON: keys sorted, no whitespace, UTF-8 (only what JSON
    requires escaped); `null` when there is none."""
    return json.dumps(
        summary, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode()


def challenge(
    approval_id: str, digest: str, summary: dict[str, Any] | None, decision: str
) -> bytes:
    """What a vote signs: SHA-256("chainkeys approval v2" || id || digest ||
    SHA-256(canonical summary JSON) || decision), each part as the API shows it (UTF-8;
    the digest and the summary's SHA-256 in lowercase hex): a vote over another summary
    than the one derived from the request verifies for nothing."""
    shown = hashlib.sha256(canonical(summary)).hexdigest()
    parts = CHALLENGE_PREFIX + (approval_id + digest + shown + decision).encode()
    return hashlib.sha256(parts).digest()


def change_challenge(change_id: str, digest: str, decision: str) -> bytes:
    """What an admin's vote on a governance change signs: SHA-256("chainkeys change v1"
    || id || digest || decision), as `challenge` (another prefix: a signature made for
    an approval never counts on a change, nor the reverse)."""
    parts = CHANGE_PREFIX + change_id.encode() + digest.encode() + decision.encode()
    return hashlib.sha256(parts).digest()


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64url(text: str) -> bytes:
    """base64url with or without padding (ValueError when it is not)."""
    if not isinstance(text, str) or len(text) > 8192:
        raise ValueError("not base64url")
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def person(label: str) -> str:
    """Who a label names: two tokens whose labels differ only in case or Unicode form
    (`frank`, `Frank`, and `frank` in fullwidth letters) are one person, with one vote."""
    return unicodedata.normalize("NFKC", label).casefold().strip()


# -- refusals ------------------------------------------------------------------------


class PasskeysOff(BadRequest):
    code = "passkeys_not_configured"
    message = (
        "passkeys need CHAINKEYS_PUBLIC_URL (the console's address: its origin and "
        "host bind every passkey)"
    )


class PasskeyRequired(Forbidden):
    code = "passkey_required"
    message = (
        "this request's rule counts only votes signed with the approver's passkey "
        'or key: send "assertion" (GET /approvals/{id}/challenge) or '
        '"signature"'
    )


class AssertionRefused(Forbidden):
    code = "assertion_invalid"
    message = "the assertion or signature does not verify for this request and decision"


class CredentialRefused(Forbidden):
    code = "credential_refused"
    message = "no live credential of this approver signed this (unknown, another's or revoked)"


class CounterRefused(Forbidden):
    code = "sign_count_replay"
    message = (
        "the authenticator's sign counter did not move forward: a replayed assertion "
        "or a cloned authenticator"
    )


class InviteRefused(Forbidden):
    code = "invite_invalid"
    message = (
        "this enrolment code is unknown, used, expired or another approver's: ask an "
        "operator for a new one (chainkeys approver invite)"
    )


class CredentialNotFound(NotFound):
    code, message = "credential_not_found", "no such credential"


@dataclass(frozen=True, slots=True)
class Proof:
    """What a vote carries: a WebAuthn assertion (the authentication response JSON), or
    a script key's signature of the challenge (`credential`: the key's id)."""

    assertion: dict[str, Any] | None = None
    credential: str | None = None
    signature: str | None = None


def plain(value: Any) -> dict[str, Any]:
    """A WebAuthn response as JSON data (py_webauthn parses it), or ValueError."""
    if not isinstance(value, dict):
        raise ValueError("the credential is a JSON object (PublicKeyCredential.toJSON())")
    return value


def script_key(text: str) -> tuple[str, bytes]:
    """(kind, DER SubjectPublicKeyInfo) of a P-256 or Ed25519 public key given as PEM
    or base64 DER; BadRequest for anything else."""
    text = text.strip()
    try:
        if text.startswith("-----BEGIN"):
            key = serialization.load_pem_public_key(text.encode())
        else:
            key = serialization.load_der_public_key(base64.b64decode(text, validate=True))
    except ValueError:
        raise BadRequest(
            "the key is a PEM or base64 DER public key (P-256 or Ed25519)", code="invalid_key"
        ) from None
    if isinstance(key, ed25519.Ed25519PublicKey):
        kind = ED25519
    elif isinstance(key, ec.EllipticCurvePublicKey) and isinstance(key.curve, ec.SECP256R1):
        kind = P256
    else:
        raise BadRequest("the key is P-256 or Ed25519", code="invalid_key")
    der = key.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return kind, der


def verify_key(credential: CredentialRow, signature: bytes, message: bytes) -> None:
    """InvalidSignature unless `signature` is the key's of `message`: Ed25519's 64 bytes,
    or ECDSA P-256 with SHA-256, DER or raw r||s (WebCrypto's form)."""
    key = serialization.load_der_public_key(unb64url(credential.public_key))
    if isinstance(key, ed25519.Ed25519PublicKey):
        key.verify(signature, message)
    elif isinstance(key, ec.EllipticCurvePublicKey):
        if len(signature) == 64:
            r, s = int.from_bytes(signature[:32], "big"), int.from_bytes(signature[32:], "big")
            signature = encode_dss_signature(r, s)
        key.verify(signature, message, ec.ECDSA(hashes.SHA256()))
    else:
        raise InvalidSignature()
