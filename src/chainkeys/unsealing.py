"""A server that starts sealed (the shamir provider): the shares it is given, each
checked against the store's share set as it arrives (a forged one is refused before
it is counted), then handed to the vault, which combines them and proves the unseal
key against the wrapped master key; and the operator's ceremonies that make or
replace the shares (`chainkeys init --shares`, `operator rekey`). No unseal key is
made, split, combined or held here: that is vault/shamir.py's. The barrier opens the
same way as at any start (chainkeys/bootstrap.py)."""

from __future__ import annotations

from dataclasses import dataclass

from chainkeys.bootstrap import Services, open_services, open_store
from chainkeys.config import Settings
from chainkeys.errors import StartupError
from chainkeys.store.backend import Backend
from chainkeys.store.dbcopy import display_url
from chainkeys.vault.repository import Meta, MetaBlobs
from chainkeys.vault.shamir import init_shares, rekey, share_set_of, unseal
from chainkeys.vault.shares import InvalidShare, Share, ShareSet, check_set, parse_share

# -- Shamir shares: a server that starts sealed --------------------------------------


@dataclass(frozen=True, slots=True)
class SealStatus:
    """What POST /sys/unseal answers: sealed or not, shares given, shares needed."""

    sealed: bool
    progress: int
    threshold: int


class SealedStore:
    """A server process whose master key waits for a quorum of Shamir shares.

    It holds the store (schema settled, no key), the shares given so far (in memory
    only: a restart forgets them, as it forgets the key) and nothing else. A share is
    counted only once the store's set owns it (format 2: its commitment), so a forged
    one changes no progress. When the threshold-th share arrives the vault combines
    them and proves the key against the wrapped master key (a format 1 set's wrong
    share resets the progress there) and the services open as at any start; the
    caller (api/sealing.py) then starts what runs beside requests.
    """

    def __init__(self, settings: Settings, db: Backend) -> None:
        self.settings = settings
        self.db = db
        self._given: dict[int, Share] = {}  # by index, of one set
        self._set_id: str | None = None
        self.threshold = 0

    def __repr__(self) -> str:
        return f"SealedStore(progress={len(self._given)}, threshold={self.threshold})"

    def status(self, sealed: bool = True) -> SealStatus:
        return SealStatus(sealed, len(self._given) if sealed else 0, self.threshold)

    async def share_set(self) -> ShareSet:
        """The store's current share set (read each time: a rekey may have replaced it)."""
        found = await share_set_of(MetaBlobs(self.db))
        if found is None:
            raise StartupError(
                f"the database {display_url(self.settings.db_url)} holds no Shamir share "
                "set (CHAINKEYS_MASTER_KEY_PROVIDER=shamir): create the store with "
                "`chainkeys init --shares 5 --threshold 3`"
            )
        self.threshold = found.threshold
        return found

    async def db_ping(self) -> None:
        async with self.db.read() as tx:
            await Meta.ping(tx)

    def forget(self) -> None:
        """Drop the shares given so far (a wrong set, a rekey, a seal)."""
        self._given.clear()
        self._set_id = None

    async def submit(self, text: str) -> Services | None:
        """Count one share; the services once it is the threshold-th.

        Raises:
            InvalidShare: malformed, mistyped, not of the store's set (forged, another
                store's, an old set's), or an index given already: nothing counted.
            WrongShares: the quorum does not rebuild the unseal key (progress reset).
        """
        share = parse_share(text)
        share_set = await self.share_set()
        if self._set_id not in (None, share_set.set_id):
            self.forget()  # the store was rekeyed while shares were arriving
        check_set([share], share_set)
        if share.index in self._given:
            raise InvalidShare(
                f"share {share.index} was given already; the next operator's, please"
            )
        self._set_id = share_set.set_id
        self._given[share.index] = share
        if len(self._given) < share_set.threshold:
            return None
        shares = list(self._given.values())
        self.forget()
        unsealer = await unseal(MetaBlobs(self.db), shares)  # WrongShares: reset, said so
        return await open_services(self.settings, create=False, unsealer=unsealer)

    async def close(self) -> None:
        self.forget()
        await self.db.close()


async def open_sealed(settings: Settings) -> SealedStore:
    """The store of a shamir server, with no key: it must exist and hold a share set
    (`chainkeys init --shares`), or the start is refused now rather than at unseal."""
    db, _ = await open_store(settings, unseal=False)
    store = SealedStore(settings, db)
    try:
        await store.share_set()
    except BaseException:
        await db.close()
        raise
    return store


async def init_shamir(
    settings: Settings, shares: int, threshold: int
) -> tuple[Services, list[str]]:
    """A new store whose master key is wrapped by a new unseal key, and its shares as
    text (`chainkeys init --shares N --threshold K` prints them once)."""
    unsealer, _, texts = init_shares(shares, threshold)
    db, _ = await open_store(settings, unseal=False, create=True)
    try:
        existing = await share_set_of(MetaBlobs(db))
    finally:
        await db.close()
    if existing is not None:
        raise StartupError(
            f"this store has its shares already (set {existing.set_id}, "
            f"{existing.threshold} of {existing.shares}): they were printed when "
            "it was created; `chainkeys operator rekey` makes new ones"
        )
    svc = await open_services(settings, create=True, unsealer=unsealer)
    return svc, texts


async def rekey_shamir(
    settings: Settings, old: list[str], shares: int, threshold: int
) -> tuple[ShareSet, list[str]]:
    """New shares from a quorum of the old (`chainkeys operator rekey`): the same master
    key re-wrapped; servers already unsealed go on, the next unseal takes the new ones."""
    parsed = [parse_share(text) for text in old]
    db, _ = await open_store(settings, unseal=False)
    try:
        share_set, made = await rekey(MetaBlobs(db), parsed, shares, threshold)
    finally:
        await db.close()
    return share_set, [s.text() for s in made]
