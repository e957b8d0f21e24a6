"""The master key held by nobody: wrapped by an unseal key that only a quorum of
operators' Shamir shares rebuilds (`CHAINKEYS_MASTER_KEY_PROVIDER=shamir`).

As Vault's Shamir seal: nothing on disk or in the environment opens the store.
`chainkeys init --shares N --threshold K` makes a random 256-bit *unseal key*,
splits it into N shares of which any K rebuild it, and prints them once. The
unseal key AES-256-GCM-wraps the master key; the wrapped blob is kept beside the
data (`meta`, as the HSM-wrapped key is), so

- rekeying (new shares, perhaps a new N and K) re-wraps the same master key
  under a new unseal key: the data is not touched, old shares open nothing;
- rotating the master key is the other wrapped providers' rotation: the next key
  waits wrapped under the same unseal key beside the current one.

The shares (the split of the unseal key, a share's text, its check digits and the
commitments that authenticate it) are vault/shares.py; this module keeps the wrapped
master key, the provider, and the small API through which the rest of chainkeys
makes, gives and replaces shares: `init_shares` (a new set: its texts and an opaque
unsealer), `unseal` (a quorum proven against the wrapped key), `AskedShares` (an
unsealer that asks someone for a quorum), `rekey`. The unseal key is made, split and
combined here and in vault/shares.py only (tests/masterkey/test_unseal_key_in_vault.py).

The blob records the share set: format 1 (N, K, set id), or format 2 with the set's
check key and commitments, bound with the rest into the wrap's associated data (an
edited commitment fails the unwrap as an edited count does).
"""

from __future__ import annotations

import base64
import secrets
from collections.abc import Callable, Iterable
from contextvars import ContextVar
from typing import TYPE_CHECKING, Protocol

import msgspec
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from chainkeys.errors import BadRequest, StartupError
from chainkeys.vault.providers import (
    KEY_BYTES,
    WRAPPED,
    WRAPPED_NEXT,
    Blobs,
    MasterKey,
    kept_by,
)
from chainkeys.vault.shares import (
    InvalidShare,
    Share,
    ShareSet,
    UnsealKey,
    check_set,
    combine,
    split,
)

if TYPE_CHECKING:
    from chainkeys.config import Settings
    from chainkeys.vault.providers import KeyProvider

# The wrapped master key is kept where the HSM's and the KMSes' are (one wrapped key per
# store), its blob naming its provider, so a start with another provider says which.
SHAMIR_WRAPPED = WRAPPED
SHAMIR_NEXT = WRAPPED_NEXT  # a rotation's next key, until it finishes
KIND = "shamir"
NONCE_BYTES = 12
AAD = b"chainkeys shamir master key v1\x00"
DESCRIPTION = "Shamir shares (CHAINKEYS_MASTER_KEY_PROVIDER=shamir)"


class WrongShares(BadRequest):
    """K shares, each well formed, that do not rebuild the unseal key: at least one is
    wrong (which one cannot be told, and is not guessed at)."""

    code = "wrong_shares"


class Wrapped(msgspec.Struct, frozen=True, omit_defaults=True):
    """The blob in `meta`: the share set's public facts and the wrapped master key."""

    provider: str  # KIND, as every wrapped blob names its provider
    where: str  # the wrapping key in words (for another provider's refusal)
    v: int
    set_id: str
    shares: int
    threshold: int
    master_key_id: str
    nonce: str
    wrapped: str
    check_key: str = ""  # format 2: the share set's check key (hex; public, see shares.py)
    commitments: tuple[str, ...] = ()  # format 2: one per index, 1..N (hex)

    @property
    def share_set(self) -> ShareSet:
        try:
            return ShareSet(
                self.set_id,
                self.shares,
                self.threshold,
                self.v,
                bytes.fromhex(self.check_key),
                tuple(bytes.fromhex(c) for c in self.commitments),
            )
        except ValueError:
            raise StartupError("the Shamir share set in the database is damaged") from None


def _aad(share_set: ShareSet, master_key_id: str) -> bytes:
    facts = f"{share_set.set_id}\x00{share_set.shares}\x00{share_set.threshold}\x00{master_key_id}"
    if share_set.version == 1:  # as format 1 wrote it, so its blobs still open
        return AAD + facts.encode()
    committed = b"".join([share_set.check_key, *share_set.commitments])
    return AAD + f"\x00v{share_set.version}\x00{facts}\x00".encode() + committed


def wrap(key: MasterKey, unseal: UnsealKey, share_set: ShareSet) -> bytes:
    nonce = secrets.token_bytes(NONCE_BYTES)
    sealed = AESGCM(unseal.material).encrypt(nonce, key.material, _aad(share_set, key.id))
    where = (
        f"the unseal key of Shamir share set {share_set.set_id} "
        f"({share_set.threshold} of {share_set.shares} shares)"
    )
    return msgspec.json.encode(
        Wrapped(
            KIND,
            where,
            share_set.version,
            share_set.set_id,
            share_set.shares,
            share_set.threshold,
            key.id,
            base64.b64encode(nonce).decode(),
            base64.b64encode(sealed).decode(),
            share_set.check_key.hex(),
            tuple(c.hex() for c in share_set.commitments),
        )
    )


def read_blob(blob: bytes) -> Wrapped:
    """A Shamir-wrapped blob; StartupError naming the provider whose blob it is."""
    provider, where = kept_by(blob)
    if provider != KIND:
        raise StartupError(
            f"this store's master key is wrapped by {where}, not by Shamir shares: start "
            f"with CHAINKEYS_MASTER_KEY_PROVIDER={provider}"
        )
    try:
        return msgspec.json.decode(blob, type=Wrapped)
    except msgspec.ValidationError:
        raise StartupError("the Shamir-wrapped master key in the database is damaged") from None


def unwrap(blob: bytes, unseal: UnsealKey) -> MasterKey:
    """The master key, or WrongShares when `unseal` is not the key that wrapped it."""
    fields = read_blob(blob)
    try:
        material = AESGCM(unseal.material).decrypt(
            base64.b64decode(fields.nonce),
            base64.b64decode(fields.wrapped),
            _aad(fields.share_set, fields.master_key_id),
        )
    except (InvalidTag, ValueError):
        raise WrongShares(
            "the shares given do not rebuild this store's unseal key: at least one of them "
            "is wrong; progress is reset, give them again"
        ) from None
    key = MasterKey(material)
    if key.id != fields.master_key_id:
        raise StartupError("the unwrapped master key is not the one this store recorded")
    return key


class Unsealer(Protocol):
    """Where this process's unseal key comes from: shares given over HTTP, or a prompt."""

    async def unseal_key(self, share_set: ShareSet) -> UnsealKey:
        """The unseal key of `share_set` (WrongShares when the shares do not make it)."""
        ...

    def new_set(self) -> tuple[UnsealKey, ShareSet] | None:
        """For a store being created: the new unseal key and its share set (only
        `chainkeys init --shares` has one: it prints the shares)."""
        ...


# The process's unsealer, set around the step that opens the barrier (provider_for
# builds providers from settings alone; this is how the shares reach the one it builds).
UNSEALER: ContextVar[Unsealer | None] = ContextVar("chainkeys_unsealer", default=None)


class GivenKey:
    """An unseal key already rebuilt (a server's shares combined), or a new one (init)."""

    def __init__(self, key: UnsealKey, new: ShareSet | None = None) -> None:
        self._key = key
        self._new = new

    def __repr__(self) -> str:
        return "GivenKey(***)"

    async def unseal_key(self, share_set: ShareSet) -> UnsealKey:
        if self._new is not None and share_set.set_id != self._new.set_id:
            raise StartupError(
                f"this store's master key is held by Shamir share set {share_set.set_id} "
                f"already ({share_set.threshold} of {share_set.shares}): `chainkeys operator "
                "rekey` makes new shares from a quorum of those"
            )
        return self._key

    def new_set(self) -> tuple[UnsealKey, ShareSet] | None:
        return (self._key, self._new) if self._new is not None else None


class AskedShares:
    """An unsealer that asks someone for a quorum of the store's shares (`ask`: a
    command's operator at the terminal), combines them here, and keeps the key for one
    command only (a rotation reads the wrapped key more than once)."""

    def __init__(self, ask: Callable[[ShareSet], list[Share]]) -> None:
        self._ask = ask
        self._key: tuple[str, UnsealKey] | None = None

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"

    async def unseal_key(self, share_set: ShareSet) -> UnsealKey:
        if self._key is not None and self._key[0] == share_set.set_id:
            return self._key[1]
        key = combine(check_set(self._ask(share_set), share_set))
        self._key = (share_set.set_id, key)
        return key

    def new_set(self) -> tuple[UnsealKey, ShareSet] | None:
        return None


def init_shares(shares: int, threshold: int) -> tuple[GivenKey, ShareSet, list[str]]:
    """A new unseal key split into `shares` shares (format 2), any `threshold` of which
    rebuild it: the unsealer that creates or moves a store under it (its `new_set`), the
    set, and the shares' texts to print once. The key itself stays in the unsealer.

    Raises:
        StartupError: N or K out of range.
    """
    unseal_key = UnsealKey.new()
    share_set, made = split(unseal_key, shares, threshold)
    return GivenKey(unseal_key, share_set), share_set, [s.text() for s in made]


def _rebuild(blob: bytes, shares: Iterable[Share]) -> tuple[UnsealKey, MasterKey]:
    """The unseal key a quorum of the blob's set rebuilds, proven by the master key it
    unwraps (InvalidShare: not the set's, or too few; WrongShares: not the key)."""
    current = read_blob(blob).share_set
    given = check_set(shares, current)
    if len(given) < current.threshold:
        raise InvalidShare(
            f"{len(given)} shares given; this store's share set needs {current.threshold}"
        )
    unseal_key = combine(given)
    return unseal_key, unwrap(blob, unseal_key)


async def unseal(blobs: Blobs, shares: Iterable[Share]) -> GivenKey:
    """The unsealer a sealed server opens its barrier with, from a quorum of shares:
    checked against the store's set, combined and proven against the wrapped master
    key before anything opens.

    Raises:
        InvalidShare: a share not of the store's set, or fewer than its threshold.
        WrongShares: the shares do not rebuild the unseal key (format 1 only: a format 2
            share that is not the set's is refused by its commitment before this).
    """
    blob = await blobs.get(SHAMIR_WRAPPED)
    if blob is None:
        raise StartupError("the Shamir-wrapped master key went missing")
    unseal_key, _ = _rebuild(blob, shares)
    return GivenKey(unseal_key)


def sealed_message() -> str:
    return (
        "the master key is held by Shamir shares: the service starts sealed and opens "
        "once enough operators run `chainkeys operator unseal --url URL`"
    )


class ShamirKeyProvider:
    """The master key wrapped by the shares' unseal key, its blob beside the data; a
    rotation's next key waits wrapped by the same unseal key."""

    description = DESCRIPTION

    def __init__(self, blobs: Blobs, unsealer: Unsealer | None = None) -> None:
        self._blobs = blobs
        self._unsealer = unsealer

    def _source(self) -> Unsealer:
        unsealer = self._unsealer or UNSEALER.get()
        if unsealer is None:
            raise StartupError(sealed_message())
        return unsealer

    async def _open(self, blob: bytes) -> MasterKey:
        unseal = await self._source().unseal_key(read_blob(blob).share_set)
        return unwrap(blob, unseal)

    async def load(self, *, create: bool) -> MasterKey:
        blob = await self._blobs.get(SHAMIR_WRAPPED)
        if blob is not None:
            return await self._open(blob)
        fresh = self._source().new_set() if create else None
        if fresh is None:
            raise StartupError(
                "this store's master key is not held by Shamir shares: create a store for "
                "them with `chainkeys init --shares 5 --threshold 3`"
                if create
                else "this store's master key is not held by Shamir shares "
                "(it is a key file, CHAINKEYS_MASTER_KEY or an HSM): start with that provider"
            )
        unseal, share_set = fresh
        key = MasterKey(secrets.token_bytes(KEY_BYTES))
        await self._blobs.put(SHAMIR_WRAPPED, wrap(key, unseal, share_set))
        return key

    async def others(self) -> list[MasterKey]:
        following = await self._blobs.get(SHAMIR_NEXT)
        return [await self._open(following)] if following is not None else []

    async def begin_rotation(self, current: MasterKey) -> MasterKey:
        following = await self._blobs.get(SHAMIR_NEXT)
        if following is not None:
            return await self._open(following)
        blob = await self._blobs.get(SHAMIR_WRAPPED)
        if blob is None:
            raise StartupError("this store's master key is not held by Shamir shares")
        share_set = read_blob(blob).share_set
        unseal = await self._source().unseal_key(share_set)
        unwrap(blob, unseal)  # the unseal key is this store's before anything is written
        new = MasterKey(secrets.token_bytes(KEY_BYTES))
        await self._blobs.put(SHAMIR_NEXT, wrap(new, unseal, share_set))
        return new

    async def finish_rotation(self, old: MasterKey, new: MasterKey) -> str | None:
        following = await self._blobs.get(SHAMIR_NEXT)
        if following is not None:
            await self._blobs.put(SHAMIR_WRAPPED, following)
            await self._blobs.delete(SHAMIR_NEXT)
        return None

    async def retire(self) -> list[str]:
        return []  # only the current key's blob is kept (the ring holds the older keys)

    async def adopt(self, key: MasterKey) -> bool:
        """Wrap `key` under the new shares' unseal key (`chainkeys key move --to shamir
        --shares N --threshold K` made them) and keep the blob, replacing another
        provider's wrapped key in one write; a key file stays until the operator removes
        it."""
        fresh = self._source().new_set()
        if fresh is None:
            raise StartupError(
                "a move to Shamir shares makes new shares: `chainkeys key move "
                "--to shamir --shares N --threshold K`"
            )
        unseal, share_set = fresh
        await self._blobs.put(SHAMIR_WRAPPED, wrap(key, unseal, share_set))
        return False

    async def release(self) -> None:
        """Delete the blob if the shares' key wrapped it (a move to a wrapped provider
        has replaced it with the target's, which stays)."""
        blob = await self._blobs.get(SHAMIR_WRAPPED)
        if blob is not None and kept_by(blob)[0] == KIND:
            await self._blobs.delete(SHAMIR_WRAPPED)


async def share_set_of(blobs: Blobs) -> ShareSet | None:
    """The store's share set (None: no wrapped key; another provider's is refused)."""
    blob = await blobs.get(SHAMIR_WRAPPED)
    return read_blob(blob).share_set if blob is not None else None


def from_settings(settings: Settings, blobs: Blobs) -> KeyProvider:
    """The registry's factory (vault/providers.py): the unseal key comes from the
    process's unsealer (`UNSEALER`), never from settings."""
    return ShamirKeyProvider(blobs)


async def rekey(
    blobs: Blobs, old: Iterable[Share], shares: int, threshold: int
) -> tuple[ShareSet, list[Share]]:
    """New shares (perhaps a new N and K) from a quorum of the old ones: the same
    master key re-wrapped under a new unseal key, in one write (refused while a
    rotation's next key waits beside it). The new set is always of the current format:
    this is how a format 1 store moves to committed shares.

    Raises:
        InvalidShare: a share of another set, or too few shares.
        WrongShares: the old shares do not rebuild the unseal key (nothing written).
    """
    blob = await blobs.get(SHAMIR_WRAPPED)
    if blob is None:
        raise StartupError("this store's master key is not held by Shamir shares")
    _, master = _rebuild(blob, old)
    if await blobs.get(SHAMIR_NEXT) is not None:  # two blobs cannot be re-wrapped as one step
        raise StartupError(
            "a master-key rotation is under way: finish it (`chainkeys key rotate`) before rekeying"
        )
    share_set, made = split(new_unseal := UnsealKey.new(), shares, threshold)
    await blobs.put(SHAMIR_WRAPPED, wrap(master, new_unseal, share_set))
    return share_set, made
