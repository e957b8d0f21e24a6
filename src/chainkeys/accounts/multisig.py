"""Multisig accounts: chainkeys as one co-signer of an m-of-n address.

A multisig account is an account of its family (get, list, delete, restore,
policies and approvals as for any other), whose name is its address. It holds no
key of its own: its members are public keys, some held here (accounts of the same
tenant, family and network with that key), the rest elsewhere (a hardware wallet,
an offline backup, another custodian). Signing adds the held members' signatures;
the chain enforces the threshold, so no single key and no single server moves
the funds.

Which members are held is decided when it is registered (at least one must be:
chainkeys is registered as a co-signer, not as a watch-only wallet) and stored
with it; a member account deleted later no longer signs. The row's sealed column
holds its record (threshold, keys, members), sealed like a key, so rotation,
restore and copies treat the row as every other; it is never opened as a key
(export refuses).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

import msgspec

from chainkeys.accounts.families import chain_errors, family_of
from chainkeys.accounts.repository import AccountRow, Accounts
from chainkeys.audit.repository import Audit
from chainkeys.audit.service import audit_event
from chainkeys.chains.registry import FAMILIES as REGISTRY
from chainkeys.chains.spec import ThresholdKey
from chainkeys.chains.tx.threshold import INVALID
from chainkeys.clock import now_ms
from chainkeys.errors import BadRequest, ChainkeysError
from chainkeys.store.backend import Backend
from chainkeys.tokens.service import Principal
from chainkeys.vault.barrier import Barrier
from chainkeys.vault.gate import opened
from chainkeys.vault.seal import Context

# The families with multisig accounts (their registry row's `multisig`).
FAMILIES: Final = tuple(name for name, fam in REGISTRY.items() if fam.multisig is not None)
# Each address type a record may hold, and how its family builds the multisig again (an
# address type names one form whichever family has it: p2sh is Dogecoin's and Litecoin's)
_BUILDS: Final[dict[str, Callable[[int, Sequence[bytes], str], ThresholdKey]]] = {
    kind: fam.multisig.build
    for fam in REGISTRY.values()
    if fam.multisig is not None
    for kind in fam.multisig.types
}


@dataclass(frozen=True, slots=True)
class Member:
    public_key: str
    account: str | None  # the account holding it here, None when held elsewhere


@dataclass(frozen=True, slots=True)
class MultisigView:
    family: str
    network: str
    address: str
    multisig: ThresholdKey
    members: tuple[Member, ...]
    descriptor: str | None
    created_ms: int


def record(ms: ThresholdKey, held: dict[str, str]) -> dict[str, Any]:
    """What the row's details keep of it (public data)."""
    return {
        "threshold": ms.threshold,
        "keys": [k.hex() for k in ms.keys],
        "address_type": ms.address_type,
        "held": held,
    }


def multisig_of(details: dict[str, Any]) -> ThresholdKey | None:
    """The multisig a row's details describe, None for a single-key account."""
    rec = details.get("multisig")
    if not isinstance(rec, dict):
        return None
    keys = tuple(bytes.fromhex(k) for k in rec["keys"])
    kind = str(rec["address_type"])
    return _BUILDS[kind](int(rec["threshold"]), keys, kind)


def held_members(details: dict[str, Any]) -> dict[str, str]:
    """public key (hex) → the name of the account holding it here."""
    rec = details.get("multisig")
    return dict(rec.get("held", {})) if isinstance(rec, dict) else {}


class MultisigService:
    def __init__(self, db: Backend, barrier: Barrier) -> None:
        self.db = db
        self.barrier = barrier

    async def register(
        self,
        who: Principal,
        family: str,
        threshold: object,
        public_keys: Sequence[object],
        network: str | None,
        address_type: str | None,
    ) -> MultisigView:
        """Register the multisig of these keys; refused (400, audited) when it is not
        one the chain accepts or no member key is held by this tenant."""
        try:
            return await self._register(who, family, threshold, public_keys, network, address_type)
        except BadRequest as exc:
            event = audit_event(
                who,
                "create",
                exc.code,
                family=family,
                details={"multisig": True, "reason": exc.message},
            )
            with contextlib.suppress(ChainkeysError):  # a failed audit must not hide why
                await Audit.record(self.db, event)
            raise

    async def _register(
        self,
        who: Principal,
        family: str,
        threshold: object,
        public_keys: Sequence[object],
        network_name: str | None,
        address_type: str | None,
    ) -> MultisigView:
        if family not in FAMILIES:
            raise BadRequest(
                f"multisig accounts are registered on {', '.join(FAMILIES)}", code=INVALID
            )
        fam = family_of(family)
        forms = fam.multisig
        if forms is None:  # never: FAMILIES are those with one
            raise BadRequest(f"{family} has no multisig accounts", code=INVALID)
        with chain_errors():
            network = fam.network(network_name)
            ms = forms.register(threshold, public_keys, address_type, network)
            address = ms.address(network)
        # a member key as the family stores an account's: how it is found among them
        shown = {fam.public_key_text(k): k.hex() for k in ms.keys}
        async with self.db.read() as tx:
            found = await Accounts.holding(
                tx, opened(self.barrier.integrity), who.tenant_id, family, network.name, list(shown)
            )
        held: dict[str, str] = {}
        for r in found:
            held.setdefault(shown[str(r.public_key)], str(r.name))
        if not held:
            raise BadRequest(
                "none of these public keys is held by an account of this tenant "
                f"on {family} {network.name}: register a multisig where one of "
                "its keys is",
                code=INVALID,
            )
        sealed = await self.barrier.seal(
            msgspec.json.encode(record(ms, held)), Context(who.tenant_id, family, address)
        )
        row = AccountRow(
            tenant_id=who.tenant_id,
            family=family,
            name=address,
            network=network.name,
            address=address,
            public_key="",
            details={"extra": {}, "address_type": ms.address_type, "multisig": record(ms, held)},
            secret=sealed.blob,
            key_id=sealed.key_id,
            created_ms=now_ms(),
        )
        details = {"multisig": f"{ms.threshold}-of-{len(ms.keys)}", "held": len(held)}
        event = audit_event(
            who, "create", "ok", family=family, account_name=address, details=details
        )
        await Accounts.create_audited(self.db, opened(self.barrier.integrity), row, event)
        return view_of(row)


def view_of(row: AccountRow) -> MultisigView:
    ms = multisig_of(row.details)
    if ms is None:
        raise BadRequest("this account is not a multisig", code="not_multisig")
    held = held_members(row.details)
    members = tuple(Member(k.hex(), held.get(k.hex())) for k in ms.keys)
    return MultisigView(
        row.family, row.network, row.address, ms, members, ms.descriptor(), row.created_ms
    )
