"""The master key wrapped by Vault's or OpenBao's transit engine, as Vault's transit seal.

The 32-byte master key is encrypted once by a transit key (CHAINKEYS_TRANSIT_ADDR,
CHAINKEYS_TRANSIT_MOUNT, CHAINKEYS_TRANSIT_KEY; an AEAD key such as aes256-gcm96)
with this store's id as associated data, so a blob from another store does not
decrypt here. At start it is decrypted once and the master key kept in memory: no
request calls Vault. The token is read from CHAINKEYS_TRANSIT_TOKEN_FILE at start
(a file an agent such as Vault Agent or OpenBao Agent keeps fresh).

After the transit key rotates, the blob is brought to its newest version at the next
start: Vault's `rewrap` endpoint takes no associated data, so the key just decrypted
is encrypted again (transit encrypts with the newest version) and the blob replaced.
Once every store has started, `min_decryption_version` may be raised. hvac is
imported here only.
"""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING, Any

from chainkeys.errors import StartupError
from chainkeys.vault.providers import Blobs, KeyProvider
from chainkeys.vault.wrapped import Fields, WrappedKeyProvider

if TYPE_CHECKING:
    from chainkeys.config import Settings

TIMEOUT_SECONDS = 5


def _version(ciphertext: str) -> int:
    """The key version in `vault:v3:…`."""
    prefix = ciphertext.split(":")
    if len(prefix) < 3 or prefix[0] != "vault" or not prefix[1][1:].isdigit():
        raise StartupError(
            "the transit ciphertext of this store's master key is malformed: "
            "the database was altered"
        )
    return int(prefix[1][1:])


class TransitWrapper:
    """`wrapped.Wrapper` for a transit key: encrypt/decrypt with associated data."""

    kind = "transit"

    def __init__(self, addr: str, mount: str, key: str, token: str, verify: str | bool) -> None:
        self.addr = addr.rstrip("/")
        self.mount = mount.strip("/")
        self.key = key
        self._token = token
        self._verify = verify
        self._client: Any = None
        self.description = f"transit key {self.mount}/{key} at {self.addr}"

    def __repr__(self) -> str:
        return f"TransitWrapper({self.description!r}, token=***)"

    def _hvac(self) -> Any:
        if self._client is None:
            import hvac  # type: ignore[import-untyped]

            self._client = hvac.Client(
                url=self.addr, token=self._token, verify=self._verify, timeout=TIMEOUT_SECONDS
            )
        return self._client

    def _call(self, action: str, **params: Any) -> dict[str, Any]:
        """One transit call; every failure a StartupError naming the server and what to
        do (never the token)."""
        import requests
        from hvac import exceptions as e

        transit = self._hvac().secrets.transit
        try:
            answer: dict[str, Any] = getattr(transit, action)(
                name=self.key, mount_point=self.mount, **params
            )
        except requests.exceptions.RequestException:
            raise StartupError(
                f"Vault/OpenBao at {self.addr} is unreachable, so {self.description} cannot "
                "unwrap this store's master key; the service does not start without it "
                "(check CHAINKEYS_TRANSIT_ADDR and the network)"
            ) from None
        except e.Forbidden:
            raise StartupError(
                f"{self.description}: permission denied for the token in "
                f"CHAINKEYS_TRANSIT_TOKEN_FILE (expired, or its policy lacks update on "
                f"{self.mount}/encrypt/{self.key} and {self.mount}/decrypt/{self.key}, "
                "docs/deploy.md)"
            ) from None
        except e.InvalidPath:
            raise StartupError(
                f"{self.description}: no such transit key or mount (create "
                "it: an aes256-gcm96 key, docs/deploy.md)"
            ) from None
        except e.VaultDown:
            raise StartupError(
                f"Vault/OpenBao at {self.addr} is sealed: unseal it, then start chainkeys"
            ) from None
        except e.InvalidRequest:
            raise StartupError(
                f"{self.description} refuses to {action.split('_')[0]} this store's master "
                "key: a blob made for another store (associated data), a version below the "
                "key's min_decryption_version, or altered in the database"
            ) from None
        except e.VaultError as exc:
            raise StartupError(f"{self.description}: {type(exc).__name__}") from None
        return answer

    def wrap(self, material: bytes, store: str) -> dict[str, Any]:
        answer = self._call(
            "encrypt_data",
            plaintext=base64.b64encode(material).decode(),
            associated_data=base64.b64encode(store.encode()).decode(),
        )
        ciphertext = str(answer["data"]["ciphertext"])
        return {
            "mount": self.mount,
            "key": self.key,
            "ciphertext": ciphertext,
            "key_version": _version(ciphertext),
        }

    def unwrap(self, fields: Fields, store: str) -> bytes:
        answer = self._call(
            "decrypt_data",
            ciphertext=str(fields["ciphertext"]),
            associated_data=base64.b64encode(store.encode()).decode(),
        )
        return base64.b64decode(answer["data"]["plaintext"])

    def same_place(self, fields: Fields) -> bool:
        return (fields.get("mount"), fields.get("key")) == (self.mount, self.key)

    def rewrap(self, fields: Fields, material: bytes, store: str) -> dict[str, Any] | None:
        """Encrypted again under the newest version when the key rotated (reading the
        key's latest_version needs read on {mount}/keys/{key})."""
        latest = int(self._call("read_key")["data"]["latest_version"])
        if _version(str(fields["ciphertext"])) >= latest:
            return None
        return self.wrap(material, store)


def from_settings(settings: Settings, blobs: Blobs) -> KeyProvider:
    """The registry's factory (vault/providers.py PROVIDERS)."""
    missing = [
        name
        for name, value in (
            ("CHAINKEYS_TRANSIT_ADDR", settings.transit_addr),
            ("CHAINKEYS_TRANSIT_KEY", settings.transit_key),
            ("CHAINKEYS_TRANSIT_TOKEN_FILE", settings.transit_token_file),
        )
        if not value
    ]
    if missing or not (settings.transit_addr and settings.transit_key):
        raise StartupError(f"CHAINKEYS_MASTER_KEY_PROVIDER=transit needs {', '.join(missing)}")
    path = settings.transit_token_file
    try:
        token = path.read_text().strip() if path is not None else ""
    except OSError as exc:
        raise StartupError(f"CHAINKEYS_TRANSIT_TOKEN_FILE {path}: {exc.strerror}") from None
    if not token:
        raise StartupError(f"CHAINKEYS_TRANSIT_TOKEN_FILE {path} is empty")
    verify: str | bool = str(settings.transit_ca) if settings.transit_ca is not None else True
    wrapper = TransitWrapper(
        settings.transit_addr, settings.transit_mount, settings.transit_key, token, verify
    )
    return WrappedKeyProvider(wrapper, blobs)
