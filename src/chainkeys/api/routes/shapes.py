"""How each family's account responses look (the contract's shapes, per family).

A family says which shape its responses take (chains/ `response_shape`): the Cosmos
SDK keyring's, which nests its payload twice, or the one the others share. Only data
differs between families, so routes are built from this table.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from msgspec import UNSET

from chainkeys.accounts.models import AccountView, Created, Page
from chainkeys.accounts.repository import ListedAccount
from chainkeys.api import schemas as s
from chainkeys.chains.registry import FAMILIES
from chainkeys.chains.spec import KEYRING, Family


@dataclass(frozen=True, slots=True)
class Shape:
    exported: Callable[[AccountView, str, str | None, dict[str, str]], Any]
    created: Callable[[Created], Any]
    found: Callable[[AccountView], Any]
    listed: Callable[[Page], Any]
    account_response: type
    list_response: type
    address_at: str  # where a created account's address is in the response (a link's value)


def _keyring_account(
    fam: Family[Any],
    view: AccountView,
    message: str,
    private_key: str | None,
    path: str | None = None,
) -> Any:
    origin, forms = view.origin, fam.public_key_forms(view.public_key)
    account = s.CosmosAccount(
        address=view.address,
        private_key=private_key or UNSET,
        path=path or (origin.path if origin else UNSET),
        wallet=origin.wallet if origin else UNSET,
        index=origin.index if origin else UNSET,
        pubkey=forms["pubkey"],
        public_key=forms["public_key"],
        network=view.network,
        created_at=iso(view.created_ms),
    )
    return s.Envelope(success=True, message=message, data=s.CosmosAccountData(data=account))


def iso(ms: int | None) -> Any:
    if ms is None:
        return UNSET
    when = datetime.fromtimestamp(ms / 1000, UTC)
    return when.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _keyring_list(fam: Family[Any], page: Page) -> Any:
    keys = [_keyring_key(fam, r) for r in page.items]
    inner = s.CosmosKeys(keys=keys, next_cursor=page.next_cursor or UNSET)
    return s.Envelope(success=True, message="accounts listed", data=s.CosmosKeysData(data=inner))


def _keyring_key(fam: Family[Any], row: ListedAccount) -> Any:
    if not row.public_key:  # a multisig holds no key of its own (accounts/multisig.py)
        return s.CosmosKey(address=row.address, pubkey="", public_key="", kind="multisig")
    forms = fam.public_key_forms(row.public_key)
    return s.CosmosKey(address=row.address, pubkey=forms["pubkey"], public_key=forms["public_key"])


def _fields(
    view: AccountView, private_key: str | None, path: str | None, other: dict[str, str]
) -> dict[str, Any]:
    return {
        "address": view.address,
        "public_key": view.public_key,
        "private_key": private_key or UNSET,
        "public_key_k1": view.extra.get("public_key_k1", UNSET),
        "private_key_k1": other.get("private_key_k1", UNSET),
        "path": path or (view.origin.path if view.origin else UNSET),
        "wallet": view.origin.wallet if view.origin else UNSET,
        "index": view.origin.index if view.origin else UNSET,
        "network": view.network,
        "created_at": iso(view.created_ms),
    }


def _account(
    view: AccountView,
    message: str,
    private_key: str | None,
    path: str | None = None,
    other: dict[str, str] | None = None,
) -> Any:
    fields = _fields(view, private_key, path, other or {})
    data = s.AccountData(**fields, data=s.AccountFields(**fields))
    return s.AccountResponse(success=True, message=message, address=view.address, data=data)


def _names(page: Page) -> Any:
    names = [r.name for r in page.items]
    cursor = page.next_cursor or UNSET
    data = s.KeyNamesData(
        keys=names, next_cursor=cursor, data=s.KeyNames(keys=names, next_cursor=cursor)
    )
    return s.Envelope(success=True, message="accounts listed", data=data)


def created_message(created: Created) -> str:
    return "account imported" if created.imported else "account created"


def keyring(fam: Family[Any]) -> Shape:
    """The Cosmos SDK keyring's shape, for a family whose `pubkey` and `public_key` (hex)
    forms it shows (`public_key_forms`)."""
    return Shape(
        exported=lambda v, k, p, _: _keyring_account(fam, v, "account exported", k, p),
        created=lambda c: _keyring_account(fam, c.view, created_message(c), c.private_key),
        found=lambda v: _keyring_account(fam, v, "account found", None),
        listed=lambda page: _keyring_list(fam, page),
        account_response=s.CosmosAccountResponse,
        list_response=s.CosmosListResponse,
        address_at="$response.body#/data/data/address",
    )


ACCOUNT = Shape(
    exported=lambda v, k, p, o: _account(v, "account exported", k, p, o),
    created=lambda c: _account(c.view, created_message(c), c.private_key),
    found=lambda v: _account(v, "account found", None),
    listed=_names,
    account_response=s.AccountResponse,
    list_response=s.ListResponse,
    address_at="$response.body#/address",
)
SHAPES: dict[str, Shape] = {
    name: keyring(fam) if fam.response_shape == KEYRING else ACCOUNT
    for name, fam in FAMILIES.items()
}
