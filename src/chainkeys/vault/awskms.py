"""The master key wrapped by an AWS KMS key (`Encrypt`/`Decrypt`), as Vault's awskms seal.

The 32-byte master key is sent to KMS once to be encrypted under the KMS key
(CHAINKEYS_AWSKMS_KEY_ID: a key id, ARN or alias/…), with an encryption context
naming the store (`chainkeys:store`, this store's id from `meta`): a key policy may
require it (`kms:EncryptionContext:chainkeys:store`) and CloudTrail records it with
every Decrypt. At start the blob is decrypted once and the master key kept in memory:
no request calls KMS. Region, credentials and endpoint come the AWS SDK's usual way
(AWS_REGION, AWS_PROFILE or the instance role, AWS_ENDPOINT_URL for a local KMS).

KMS's automatic key rotation keeps every older backing key, so a blob stays
decryptable after it; nothing is rewrapped. boto3 is imported here only.
"""

from __future__ import annotations

import base64
import os
from typing import TYPE_CHECKING, Any

from chainkeys.errors import StartupError
from chainkeys.vault.providers import Blobs, KeyProvider
from chainkeys.vault.wrapped import Fields, WrappedKeyProvider

if TYPE_CHECKING:
    from chainkeys.config import Settings

CONTEXT_STORE = "chainkeys:store"
CONTEXT_PURPOSE = "chainkeys:purpose"
PURPOSE = "master key"
TIMEOUT_SECONDS = 5  # connect and read: a start waits this long, twice, for a KMS that is down

# KMS's own error codes, in the words an operator acts on.
REFUSALS = {
    "DisabledException": "is disabled: enable it (aws kms enable-key), or start with the "
    "key this store was moved from",
    "KMSInvalidStateException": "is not usable (pending deletion or import): cancel its "
    "deletion (aws kms cancel-key-deletion) and enable it",
    "NotFoundException": "does not exist in this account and region (AWS_REGION)",
    "AccessDeniedException": "refuses these credentials: the key policy must allow "
    "kms:Encrypt and kms:Decrypt with this store's encryption context (docs/deploy.md)",
    "InvalidCiphertextException": "cannot decrypt this store's wrapped key: it was made "
    "for another store (encryption context) or altered in the database",
    "IncorrectKeyException": "did not encrypt this store's wrapped key",
    "UnrecognizedClientException": "refuses these credentials (an unknown access key)",
    "InvalidSignatureException": "refuses these credentials (a wrong secret key)",
    "ExpiredTokenException": "refuses these credentials (the session token expired)",
}


class AwsKmsWrapper:
    """`wrapped.Wrapper` for an AWS KMS symmetric key."""

    kind = "awskms"

    def __init__(self, key_id: str) -> None:
        self.key_id = key_id
        self.description = f"AWS KMS key {key_id}"
        self._client: Any = None

    def _kms(self) -> Any:
        if self._client is None:
            import boto3  # type: ignore[import-untyped]
            from botocore.config import Config  # type: ignore[import-untyped]
            from botocore.exceptions import BotoCoreError  # type: ignore[import-untyped]

            config = Config(
                connect_timeout=TIMEOUT_SECONDS,
                read_timeout=TIMEOUT_SECONDS,
                retries={"max_attempts": 2, "mode": "standard"},
            )
            # AWS_REGION as the other AWS SDKs read it (botocore reads AWS_DEFAULT_REGION
            # and the profile, which stay the fallback).
            region = os.environ.get("AWS_REGION") or None
            try:
                self._client = boto3.client("kms", region_name=region, config=config)
            except BotoCoreError as exc:  # no region, a malformed endpoint
                raise StartupError(f"AWS KMS: {exc} (set AWS_REGION; docs/deploy.md)") from None
        return self._client

    def _call(self, action: str, **params: Any) -> dict[str, Any]:
        """One KMS call; every failure a StartupError naming KMS and what to do."""
        from botocore.exceptions import (
            BotoCoreError,
            ClientError,
            ConnectionError,
            HTTPClientError,
            NoCredentialsError,
        )

        kms = self._kms()
        try:
            answer: dict[str, Any] = getattr(kms, action)(**params)
        except NoCredentialsError:
            raise StartupError(
                f"{self.description}: no AWS credentials found (AWS_ACCESS_KEY_ID and "
                "AWS_SECRET_ACCESS_KEY, AWS_PROFILE or an instance role)"
            ) from None
        except (ConnectionError, HTTPClientError):
            raise StartupError(
                f"AWS KMS at {kms.meta.endpoint_url} is unreachable, so {self.description} "
                "cannot unwrap this store's master key; the service does not start without "
                "it (check the network, AWS_REGION and AWS_ENDPOINT_URL)"
            ) from None
        except ClientError as exc:
            code = str(exc.response.get("Error", {}).get("Code", "unknown"))
            why = REFUSALS.get(code, f"answered {code}")
            raise StartupError(f"AWS KMS: {self.description} {why} ({code})") from None
        except BotoCoreError as exc:
            raise StartupError(f"AWS KMS: {self.description}: {type(exc).__name__}") from None
        return answer

    @staticmethod
    def _context(store: str) -> dict[str, str]:
        return {CONTEXT_STORE: store, CONTEXT_PURPOSE: PURPOSE}

    def wrap(self, material: bytes, store: str) -> dict[str, Any]:
        answer = self._call(
            "encrypt", KeyId=self.key_id, Plaintext=material, EncryptionContext=self._context(store)
        )
        return {
            "key": self.key_id,
            "key_arn": str(answer["KeyId"]),
            "wrapped": base64.b64encode(answer["CiphertextBlob"]).decode(),
        }

    def unwrap(self, fields: Fields, store: str) -> bytes:
        answer = self._call(
            "decrypt",
            CiphertextBlob=base64.b64decode(fields["wrapped"]),
            KeyId=str(fields["key_arn"]),
            EncryptionContext=self._context(store),
        )
        return bytes(answer["Plaintext"])

    def same_place(self, fields: Fields) -> bool:
        return self.key_id in (fields.get("key"), fields.get("key_arn"))

    def rewrap(self, fields: Fields, material: bytes, store: str) -> dict[str, Any] | None:
        return None  # KMS keeps every backing key of a rotated key: the blob still opens


def from_settings(settings: Settings, blobs: Blobs) -> KeyProvider:
    """The registry's factory (vault/providers.py PROVIDERS)."""
    if not settings.awskms_key_id:
        raise StartupError(
            "CHAINKEYS_MASTER_KEY_PROVIDER=awskms needs CHAINKEYS_AWSKMS_KEY_ID "
            "(a KMS key id, ARN or alias/name)"
        )
    return WrappedKeyProvider(AwsKmsWrapper(settings.awskms_key_id), blobs)
