"""Derivation from a wallet: the chain a request targets, the indices it takes, the keys.

Its own module because it is the one place that hands out a chain's indices: the
counter (counters.py: authenticated, pinned by the tenant's head) moves in the
transaction that stores the accounts, so no two derivations on any number of replicas
ever share an index, and a derivation at the top of the range never leaves derive-next
without one. It knows seeds, paths and
counters only; the sealed phrase, and when to derive, stay with `service.py`.
"""

from __future__ import annotations

from typing import Any, Final

from chainkeys.accounts.families import chain_errors, family_of
from chainkeys.accounts.models import Derivation, Origin
from chainkeys.chains import hd
from chainkeys.chains.spec import Family, Network
from chainkeys.errors import BadRequest, Forbidden
from chainkeys.store.backend import Backend
from chainkeys.store.sql import Tx
from chainkeys.tokens.service import Principal
from chainkeys.vault.gate import Gate
from chainkeys.wallets.counters import Chain, ChainFull, Counters
from chainkeys.wallets.models import DeriveRequest

MAX_COUNT: Final = 100


def type_of(options: Any) -> str | None:
    """The address type of a UTXO family's options (None for Cosmos and EOS)."""
    kind = getattr(options, "address_type", None)
    return None if kind is None else str(kind.name)


def _given(fam: Family[Any], req: DeriveRequest, options: Any) -> dict[str, str]:
    """The option fields the family takes, as a create request would send them."""
    takes = {spec.name for spec in fam.option_specs}
    given = {}
    if "address_type" in takes and type_of(options):
        given["address_type"] = str(type_of(options))
    if "name" in takes and req.name is not None:
        given["name"] = req.name
    return given


def target(
    who: Principal,
    family: str,
    network: str | None,
    address_type: str | None,
    name: str | None = None,
) -> tuple[Family[Any], Network, Any]:
    """The family (one the token may use), network and options a derivation is for."""
    fam = family_of(family)
    if not who.may_use(fam.name):
        raise Forbidden(f"this token may not use {fam.name} accounts")
    given = {k: v for k, v in (("address_type", address_type), ("name", name)) if v}
    with chain_errors():
        return fam, fam.network(network), fam.options(given, None)


def check(fam: Family[Any], network: Network, options: Any, req: DeriveRequest) -> None:
    """The count, the name and the path's parts, checked before anything moves."""
    if isinstance(req.count, bool) or not 1 <= req.count <= MAX_COUNT:
        raise BadRequest(f"count must be from 1 to {MAX_COUNT}", code="invalid_count")
    if req.name is not None and req.count != 1:
        raise BadRequest("name names one EOS account: send count 1", code="invalid_input")
    with chain_errors():
        hd.hd_path(fam.purpose(options), network.coin_type, req.account, req.change, req.index or 0)
        if req.index is not None:
            hd.hd_path(44, 0, 0, 0, req.index + req.count - 1)


def derive_keys(
    seed: hd.Seed,
    wallet_id: str,
    fam: Family[Any],
    network: Network,
    options: Any,
    req: DeriveRequest,
    first: int,
) -> list[Derivation]:
    """The keys and accounts of `req.count` indices of the chain from `first`."""
    derived = []
    for index in range(first, first + req.count):
        with chain_errors():
            path = hd.hd_path(
                fam.purpose(options), network.coin_type, req.account, req.change, index
            )
            key = seed.key(path)
            account = fam.account(key, network, fam.options(_given(fam, req, options), key))
        derived.append(Derivation(key, account, Origin(wallet_id, path, index)))
    return derived


async def allocate(gate: Gate, chain: Chain, index: int | None, count: int, tx: Tx) -> int:
    """In the storing transaction: the first index of this derivation. Derive-next takes
    `count` indices from the counter (never past the last index below 2^31); an explicit
    index moves the counter past it only when it lies beyond and below the last index (a
    derivation at the top of the range must never leave derive-next with no valid
    index). IntegrityFailure when the counter is not the one the tenant's head pins."""
    return await Counters(tx, gate, chain).take(index, count, hd.HARDENED)


async def next_free(db: Backend, gate: Gate, chain: Chain, count: int) -> int:
    """The chain's next index for `count` accounts as the counter shows it now (checked
    against the tenant's head); a chain that has used every index below 2^31 is a 409
    (the counter never passes the last index)."""
    async with db.read() as tx:
        first = await Counters(tx, gate, chain).current()
    if first + count > hd.HARDENED:
        raise ChainFull(
            f"this chain has {hd.HARDENED - first} unused indices below 2^31 "
            f"({count} asked); derive under another account number"
        )
    return first
