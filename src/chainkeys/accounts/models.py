"""What the account service takes and returns (plain data, no I/O)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from chainkeys.accounts.repository import ListedAccount
from chainkeys.chains.spec import Account


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

    @classmethod
    def of(cls, family: str, network: str, account: Account, created_ms: int) -> AccountView:
        return cls(
            family, network, account.name, account.address, account.public_key,
            dict(account.extra), created_ms,
        )  # fmt: skip


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
