"""The master key wrapped by an AES key inside an HSM (PKCS#11), as Vault's auto-unseal.

The HSM key is created non-extractable and sensitive (`chainkeys hsm init`) and
never leaves the token. The 32-byte master key is encrypted by it with
CKM_AES_GCM inside the token (SoftHSM2 and most HSMs offer it for C_Encrypt;
the 12-byte IV is ours, the associated data binds the blob to its purpose and
HSM key id). The blob (vault/wrapped.py) is stored beside the data (the `meta`
table); at start it is unwrapped once and the master key is kept in memory only, so
signing never calls the HSM. Blobs from before the provider registry name no
`provider`: they are this module's, and read as they were written.

python-pkcs11 is imported here only: a file-key install never loads it.
"""

from __future__ import annotations

import base64
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from chainkeys.errors import StartupError
from chainkeys.vault.providers import Blobs, KeyProvider
from chainkeys.vault.wrapped import Fields, WrappedKeyProvider

if TYPE_CHECKING:
    from chainkeys.config import Settings

MECHANISM = "CKM_AES_GCM"
AAD = b"chainkeys master key v1\x00"


@dataclass(frozen=True, slots=True)
class Hsm:
    """Where the HSM key is: module, token, key label, and the PIN (never shown)."""

    module: Path
    token_label: str
    key_label: str
    pin: str = field(repr=False)

    @property
    def description(self) -> str:
        return f"HSM key {self.key_label!r} in token {self.token_label!r}"


def hsm_from_settings(settings: Settings) -> Hsm:
    """The HSM named by CHAINKEYS_PKCS11_*."""
    if settings.pkcs11_module is None:
        raise StartupError("CHAINKEYS_PKCS11_MODULE is not set: give the path of the PKCS#11 .so")
    token = settings.pkcs11_token_label
    if not token:
        raise StartupError("CHAINKEYS_PKCS11_TOKEN_LABEL is not set: name the token to use")
    return Hsm(settings.pkcs11_module, token, settings.pkcs11_key_label, _pin(settings))


def _pin(settings: Settings) -> str:
    if settings.pkcs11_pin is not None:
        return settings.pkcs11_pin.get_secret_value()
    if settings.pkcs11_pin_file is not None:
        try:
            return settings.pkcs11_pin_file.read_text().strip()
        except OSError as exc:
            raise StartupError(
                f"CHAINKEYS_PKCS11_PIN_FILE {settings.pkcs11_pin_file}: {exc.strerror}"
            ) from None
    raise StartupError("set CHAINKEYS_PKCS11_PIN or CHAINKEYS_PKCS11_PIN_FILE (the user PIN)")


def _session(hsm: Hsm, rw: bool = False) -> Any:
    import pkcs11
    from pkcs11 import exceptions as e

    try:
        lib = pkcs11.lib(str(hsm.module))
    except (e.PKCS11Error, OSError):
        raise StartupError(
            f"CHAINKEYS_PKCS11_MODULE {hsm.module}: cannot load it as a PKCS#11 module"
        ) from None
    try:
        token = lib.get_token(token_label=hsm.token_label)
    except e.NoSuchToken:
        labels = sorted(t.label for t in lib.get_tokens()) or ["none"]
        raise StartupError(
            f"no PKCS#11 token labelled {hsm.token_label!r} in {hsm.module} "
            f"(tokens: {', '.join(labels)})"
        ) from None
    try:
        return token.open(user_pin=hsm.pin, rw=rw)
    except (e.PinIncorrect, e.PinInvalid, e.PinLenRange):
        raise StartupError(f"the PIN was refused by PKCS#11 token {hsm.token_label!r}") from None
    except e.PinLocked:
        raise StartupError(f"the user PIN of PKCS#11 token {hsm.token_label!r} is locked") from None


def _find_key(session: Any, hsm: Hsm) -> Any | None:
    from pkcs11 import KeyType
    from pkcs11 import exceptions as e

    try:
        return session.get_key(label=hsm.key_label, key_type=KeyType.AES)
    except e.NoSuchKey:
        return None
    except e.MultipleObjectsReturned:
        raise StartupError(
            f"token {hsm.token_label!r} holds several AES keys labelled {hsm.key_label!r}; keep one"
        ) from None


def _key(session: Any, hsm: Hsm) -> Any:
    key = _find_key(session, hsm)
    if key is None:
        raise StartupError(
            f"token {hsm.token_label!r} holds no AES key labelled {hsm.key_label!r}; "
            "create it with `chainkeys hsm init`"
        )
    return key


def _key_id(key: Any) -> str:
    from pkcs11 import Attribute

    return bytes(key[Attribute.ID]).hex()


def init_key(hsm: Hsm) -> tuple[str, bool]:
    """Create the HSM key if the token has none by that label: AES-256, non-extractable,
    sensitive, a token object with a random CKA_ID. Returns (key id, created)."""
    from pkcs11 import Attribute, KeyType

    with _session(hsm, rw=True) as session:
        found = _find_key(session, hsm)
        if found is not None:
            return _key_id(found), False
        key_id = secrets.token_bytes(16)
        template = {
            Attribute.EXTRACTABLE: False,
            Attribute.SENSITIVE: True,
            Attribute.TOKEN: True,
            Attribute.PRIVATE: True,
            Attribute.ID: key_id,
        }
        session.generate_key(KeyType.AES, 256, label=hsm.key_label, store=True, template=template)
        return key_id.hex(), True


def wrap(hsm: Hsm, material: bytes) -> dict[str, Any]:
    """The master key encrypted inside the token: the blob's fields (vault/wrapped.py)."""
    from pkcs11 import Mechanism
    from pkcs11.mechanisms import GCMParams

    with _session(hsm) as session:
        hsm_key = _key(session, hsm)
        key_id = _key_id(hsm_key)
        iv = secrets.token_bytes(12)
        params = GCMParams(iv, AAD + key_id.encode(), 128)
        sealed = hsm_key.encrypt(material, mechanism=Mechanism.AES_GCM, mechanism_param=params)
    return {
        "mechanism": MECHANISM,
        "token_label": hsm.token_label,
        "key_label": hsm.key_label,
        "hsm_key_id": key_id,
        "iv": base64.b64encode(iv).decode(),
        "wrapped": base64.b64encode(sealed).decode(),
    }


def unwrap(hsm: Hsm, fields: Fields) -> bytes:
    """The master key's bytes from a blob's fields; StartupError naming what does not
    match."""
    from pkcs11 import Mechanism
    from pkcs11 import exceptions as e
    from pkcs11.mechanisms import GCMParams

    with _session(hsm) as session:
        hsm_key = _key(session, hsm)
        key_id = _key_id(hsm_key)
        if key_id != fields["hsm_key_id"]:
            raise StartupError(
                f"{hsm.description} (id {key_id or 'none'}) is not the HSM key that wrapped "
                f"this store's master key (id {fields['hsm_key_id']}, label "
                f"{fields['key_label']!r}); start with that key"
            )
        try:
            material = hsm_key.decrypt(
                base64.b64decode(fields["wrapped"]),
                mechanism=Mechanism.AES_GCM,
                mechanism_param=GCMParams(
                    base64.b64decode(fields["iv"]), AAD + key_id.encode(), 128
                ),
            )
        except e.PKCS11Error:
            raise StartupError(
                f"{hsm.description} fails to unwrap this store's master key: a different key "
                "with the same label and id, or the wrapped key in the database was altered"
            ) from None
    return bytes(material)


class Pkcs11Wrapper:
    """`wrapped.Wrapper` for an AES key in a PKCS#11 token (the HSM binds the blob to its
    key id; the blob's format predates the store id, which it records but does not bind)."""

    kind = "pkcs11"

    def __init__(self, hsm: Hsm) -> None:
        self.hsm = hsm
        self.description = hsm.description

    def wrap(self, material: bytes, store: str) -> dict[str, Any]:
        return wrap(self.hsm, material)

    def unwrap(self, fields: Fields, store: str) -> bytes:
        return unwrap(self.hsm, fields)

    def same_place(self, fields: Fields) -> bool:
        return (fields.get("key_label"), fields.get("token_label")) == (
            self.hsm.key_label,
            self.hsm.token_label,
        )

    def rewrap(self, fields: Fields, material: bytes, store: str) -> dict[str, Any] | None:
        return None  # an HSM key has no versions


def from_settings(settings: Settings, blobs: Blobs) -> KeyProvider:
    """The registry's factory (vault/providers.py PROVIDERS)."""
    return WrappedKeyProvider(Pkcs11Wrapper(hsm_from_settings(settings)), blobs)
