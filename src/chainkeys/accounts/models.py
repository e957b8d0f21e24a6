"""What the account service takes and returns (plain data, no I/O)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from chainkeys.accounts.repository import ListedAccount
from chainkeys.chains.spec import Account, Key, Network


@dataclass(frozen=True, slots=True)
class CreateRequest:
    """What a caller may send to create or import an account."""

    network: str | None = None
    private_key: str | None = field(default=None, repr=False)
    mnemonic: str | None = field(default=None, repr=False)
    passphrase: str | None = field(default=None, repr=False)
    account_index: int | None = None
    # The family's own create options as sent (Litecoin `address_type`, EOS `name`, …):
    # their names come from the family's `option_specs`, and the family turns them into
    # its own options type, so a new option needs no change here.
    options: Mapping[str, str] = field(default_factory=dict)

    @property
    def imports(self) -> bool:
        return self.private_key is not None or self.mnemonic is not None


@dataclass(frozen=True, slots=True)
class AccountView:
    """The public face of a stored account."""

    family: str
    network: str
    name: str
    address: str
    public_key: str
    extra: Mapping[str, str]
    created_ms: int | None = None
    origin: Origin | None = None  # derived from a wallet of the tenant
    address_type: str | None = None

    @classmethod
    def of(
        cls,
        family: str,
        network: str,
        account: Account,
        created_ms: int | None,
        origin: Origin | None = None,
    ) -> AccountView:
        return cls(
            family,
            network,
            account.name,
            account.address,
            account.public_key,
            dict(account.extra),
            created_ms,
            origin,
            account.address_type,
        )

    @classmethod
    def of_details(
        cls,
        family: str,
        network: str,
        name: str,
        address: str,
        public_key: str,
        details: Mapping[str, Any],
        created_ms: int | None,
    ) -> AccountView:
        """From a stored row's columns and its details JSON."""
        wallet = details.get("wallet")
        origin = Origin(wallet, details["path"], int(details["index"])) if wallet else None
        return cls(
            family,
            network,
            name,
            address,
            public_key,
            details.get("extra", {}),
            created_ms,
            origin,
            details.get("address_type"),
        )


@dataclass(frozen=True, slots=True)
class Origin:
    """Where a derived account's key comes from: a wallet, a BIP32 path, its index."""

    wallet: str
    path: str
    index: int


@dataclass(frozen=True, slots=True)
class Derivation:
    """One key derived from a wallet, ready to be stored as an account."""

    key: Key
    account: Account
    origin: Origin


@dataclass(frozen=True, slots=True)
class Created:
    view: AccountView
    imported: bool
    private_key: str | None = field(default=None, repr=False)  # generated keys only, once
    replayed: bool = False  # the stored first response of an Idempotency-Key


@dataclass(frozen=True, slots=True)
class Page:
    items: Sequence[ListedAccount]  # rows as read: id, name, address, public_key
    next_cursor: str | None


def not_this_path(found: AccountView, d: Derivation, network: Network) -> str:
    """Why an account of the derived name is not this wallet's, and what to do."""
    where = f"a {found.family} account {found.name} exists in your tenant"
    if found.public_key == d.account.public_key and found.network == network.name:
        if found.origin is None:
            return (
                f"{where} with the key of {d.origin.path} of this wallet, imported "
                "as a plain account (not owned by a wallet); delete it (it stays "
                "restorable) and derive again, or keep using it as it is"
            )
        return (
            f"{where} with this key, derived as {found.origin.path} of wallet "
            f"{found.origin.wallet}; use that account"
        )
    return (
        f"{where} and is not {d.origin.path} of this wallet (another key or "
        "network holds this name); delete it or derive another index"
    )
