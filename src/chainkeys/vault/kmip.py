"""The master key wrapped by a KMIP server's AES key (KMIP Encrypt/Decrypt over mutual TLS).

The AES key (CHAINKEYS_KMIP_KEY_ID, its unique identifier) stays in the KMIP server,
which does the encryption. PyKMIP's stock client drops GCM's authentication tag, so
the mode is one both ends support: AES-CBC with PKCS#5 padding and a random IV of
ours. CBC authenticates nothing, so what is encrypted is the master key followed by
this store's id, and both are checked after decryption: a changed ciphertext changes
the master key (its id, recorded beside the blob, no longer matches: refused); a blob
from another store ends in another id (refused). At start the blob is decrypted once
and the master key kept in memory: no request calls the KMIP server.

PyKMIP is imported here only.
"""

from __future__ import annotations

import base64
import logging
import os
import secrets
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

from chainkeys.errors import StartupError
from chainkeys.vault.providers import KEY_BYTES, Blobs, KeyProvider
from chainkeys.vault.wrapped import Fields, WrappedKeyProvider

if TYPE_CHECKING:
    from chainkeys.config import Settings

MODE = "AES-CBC-PKCS5"


class KmipWrapper:
    """`wrapped.Wrapper` for an AES key in a KMIP server."""

    kind = "kmip"

    def __init__(self, host: str, port: int, cert: Path, key: Path, ca: Path, key_id: str) -> None:
        self.host, self.port = host, port
        self._tls = (str(cert), str(key), str(ca))
        self.key_id = key_id
        self.description = f"KMIP key {key_id} at {host}:{port}"

    def _call(self, action: str, data: bytes, iv: bytes) -> bytes:
        """One Encrypt or Decrypt on its own connection; every failure a StartupError
        naming the KMIP server and what to do."""
        with warnings.catch_warnings():  # PyKMIP's SQLAlchemy 1.x idioms, on first import
            warnings.simplefilter("ignore")
            from kmip import enums  # type: ignore[import-untyped]
            from kmip.pie import exceptions as e  # type: ignore[import-untyped]
            from kmip.pie.client import ProxyKmipClient  # type: ignore[import-untyped]
        # PyKMIP logs each failure at ERROR; the StartupError below says it once, in words.
        logging.getLogger("kmip").setLevel(logging.CRITICAL)

        cert, key, ca = self._tls
        client = ProxyKmipClient(
            hostname=self.host, port=self.port, cert=cert, key=key, ca=ca, config_file=os.devnull
        )  # no pykmip.conf search
        params = {
            "cryptographic_algorithm": enums.CryptographicAlgorithm.AES,
            "block_cipher_mode": enums.BlockCipherMode.CBC,
            "padding_method": enums.PaddingMethod.PKCS5,
        }
        try:
            with warnings.catch_warnings():  # its ssl.PROTOCOL_TLS context (the CA is checked)
                warnings.simplefilter("ignore", DeprecationWarning)
                client.open()
        except (e.ClientConnectionFailure, OSError):
            raise StartupError(
                f"the KMIP server at {self.host}:{self.port} is unreachable or refused our TLS "
                f"certificate, so {self.description} cannot unwrap this store's master key; "
                "the service does not start without it (check CHAINKEYS_KMIP_HOST, _PORT, "
                "_CERT, _KEY and _CA)"
            ) from None
        try:
            result = getattr(client, action)(
                data, uid=self.key_id, cryptographic_parameters=params, iv_counter_nonce=iv
            )
        except e.KmipOperationFailure as exc:
            reason = getattr(exc.reason, "name", "unknown").lower().replace("_", " ")
            raise StartupError(
                f"{self.description}: the KMIP server refused to {action} ({reason})"
            ) from None
        except OSError:
            raise StartupError(
                f"the KMIP server at {self.host}:{self.port} dropped the connection during {action}"
            ) from None
        finally:
            client.close()
        return bytes(result[0] if isinstance(result, tuple) else result)

    def wrap(self, material: bytes, store: str) -> dict[str, Any]:
        iv = secrets.token_bytes(16)
        sealed = self._call("encrypt", material + store.encode(), iv)
        return {
            "key_id": self.key_id,
            "mode": MODE,
            "iv": base64.b64encode(iv).decode(),
            "wrapped": base64.b64encode(sealed).decode(),
        }

    def unwrap(self, fields: Fields, store: str) -> bytes:
        if fields.get("mode") != MODE:
            raise StartupError(
                f"the KMIP-wrapped master key uses mode {fields.get('mode')!r}, "
                f"not {MODE}: the database was altered"
            )
        plain = self._call(
            "decrypt", base64.b64decode(fields["wrapped"]), base64.b64decode(fields["iv"])
        )
        if plain[KEY_BYTES:] != store.encode():
            raise StartupError(
                f"{self.description} decrypts this store's wrapped key to one made for "
                "another store, or the wrapped key in the database was altered"
            )
        return plain[:KEY_BYTES]

    def same_place(self, fields: Fields) -> bool:
        return fields.get("key_id") == self.key_id

    def rewrap(self, fields: Fields, material: bytes, store: str) -> dict[str, Any] | None:
        return None  # a KMIP key has no versions: a new key is a move (`--key`)


def from_settings(settings: Settings, blobs: Blobs) -> KeyProvider:
    """The registry's factory (vault/providers.py PROVIDERS)."""
    named = {
        "CHAINKEYS_KMIP_HOST": settings.kmip_host,
        "CHAINKEYS_KMIP_CERT": settings.kmip_cert,
        "CHAINKEYS_KMIP_KEY": settings.kmip_key,
        "CHAINKEYS_KMIP_CA": settings.kmip_ca,
        "CHAINKEYS_KMIP_KEY_ID": settings.kmip_key_id,
    }
    missing = [name for name, value in named.items() if not value]
    host, cert, key, ca = (
        settings.kmip_host,
        settings.kmip_cert,
        settings.kmip_key,
        settings.kmip_ca,
    )
    if missing or not (host and cert and key and ca and settings.kmip_key_id):
        raise StartupError(f"CHAINKEYS_MASTER_KEY_PROVIDER=kmip needs {', '.join(missing)}")
    for name, path in (
        ("CHAINKEYS_KMIP_CERT", cert),
        ("CHAINKEYS_KMIP_KEY", key),
        ("CHAINKEYS_KMIP_CA", ca),
    ):
        if not path.is_file():
            raise StartupError(f"{name} {path}: no such file")
    wrapper = KmipWrapper(host, settings.kmip_port, cert, key, ca, settings.kmip_key_id)
    return WrappedKeyProvider(wrapper, blobs)
