"""Opening the barrier at start: the keys held must open everything the store holds.

The root key comes from the provider (key file, environment or HSM); the rest from
the store's key ring, unwrapped with it. A store with sealed data that these keys do
not open stops the start, saying which key ids are missing and what to do: making a
new key would silently orphan every secret.
"""

from __future__ import annotations

from chainkeys.clock import iso
from chainkeys.config import Settings
from chainkeys.errors import StartupError
from chainkeys.store.backend import Backend
from chainkeys.store.sealed import SealedColumns
from chainkeys.vault.barrier import Barrier, current_term
from chainkeys.vault.providers import MasterKey, provider_for
from chainkeys.vault.repository import CHECK_KEY, Keyring, Meta, MetaBlobs, Term
from chainkeys.vault.seal import Context, SealError, Vault

CHECK_CONTEXT = Context("-", "-", CHECK_KEY, purpose="check")


async def open_barrier(db: Backend, settings: Settings) -> Barrier:
    """Load the master key(s) and prove they open what the store holds (called under
    the start-up lock: a first start writes the check record). The ring is read as
    the database holds it: the gate, opened with these keys, checks it next
    (vault/adoption.py `open_integrity`) before anything else is sealed."""
    async with db.read() as tx:
        check = await Meta.get(tx, CHECK_KEY)
        used = await SealedColumns.key_ids(tx)
        entries, terms = await Keyring.unverified(tx)  # trusted once the gate opens
    sealed = check is not None or bool(used)
    provider = provider_for(settings, MetaBlobs(db))
    root = await provider.load(create=not sealed)
    vault = Vault(root, await provider.others())
    barrier = Barrier(db, vault, settings.key_refresh_seconds)
    barrier.absorb(entries, terms)
    missing = sorted(k for k in used if not vault.holds(k))
    if missing:
        raise StartupError(_missing(provider.description, root.id, missing, terms))
    current = current_term(terms)
    if current is not None and not vault.holds(current.key_id):
        raise StartupError(_behind(provider.description, root.id, current, terms))
    if check is not None:
        blob, key_id = check
        try:
            vault.open(blob, key_id or "", CHECK_CONTEXT)
        except SealError:
            raise StartupError(
                f"the master key from {provider.description} (id {root.id}) does not open "
                f"this store: its check record (key id {key_id}) fails to open; the key file "
                "or the database has been altered"
            ) from None
    elif sealed:
        raise StartupError("the store holds sealed accounts but no master-key check record")
    # (a first start's term is written once the integrity key is open: Barrier.trust)
    if check is None:
        sealed_check = await barrier.seal(b"chainkeys", CHECK_CONTEXT)
        async with db.write() as tx:
            if await Meta.get(tx, CHECK_KEY) is None:
                await Meta.insert(tx, CHECK_KEY, sealed_check.blob, sealed_check.key_id)
    return barrier


async def check_opens(db: Backend, key: MasterKey) -> None:
    """StartupError unless `key` opens the store's check record (a move's source and
    target must hold the store's own key)."""
    async with db.read() as tx:
        check = await Meta.get(tx, CHECK_KEY)
    if check is None:
        raise StartupError("this store has no master-key check record: start it once first")
    try:
        Vault(key, []).open(check[0], check[1] or "", CHECK_CONTEXT)
    except SealError:
        raise StartupError(
            f"the master key from the configured provider (id {key.id}) does not open this store"
        ) from None


def _state(key_id: str, terms: list[Term]) -> str:
    term = next((t for t in terms if t.key_id == key_id), None)
    if term is None:
        return "unknown to this store"
    if term.destroyed_ms is not None:
        return f"destroyed {iso(term.destroyed_ms)}"
    if term.retired_ms is not None:
        return f"retired {iso(term.retired_ms)}"
    return f"in use since {iso(term.created_ms)}"


def _missing(source: str, root: str, missing: list[str], terms: list[Term]) -> str:
    states = "; ".join(f"{k}: {_state(k, terms)}" for k in missing)
    return (
        f"the master key from {source} (id {root}) does not open this store: it holds "
        f"secrets sealed with key id {', '.join(missing)} ({states}), which neither that "
        "key nor the key ring it opens holds; start with the store's current key (after a "
        "rotation on another host, install its key file here)"
    )


def _behind(source: str, root: str, current: Term, terms: list[Term]) -> str:
    return (
        f"the master key from {source} (id {root}, {_state(root, terms)}) is not this "
        f"store's current master key ({current.key_id}, {_state(current.key_id, terms)}) "
        "and cannot reach it: start with the current key (after a rotation on another "
        "host, install its key file here)"
    )
