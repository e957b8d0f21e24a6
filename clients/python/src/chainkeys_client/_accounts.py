"""Accounts: `/{family}` and `/{family}/{name}` for every family.

The service shapes Cosmos answers differently (`data.data.address`, a list of
`{address, pubkey}`) from Dogecoin/EOS/Litecoin (`address`, `data.{…}`, a list
of names); both are read into `Account` / `AccountPage` here.
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import msgspec

from chainkeys_client._core import (
    Answer,
    AsyncRunner,
    Call,
    SyncRunner,
    family_segment,
    ignore,
    segment,
)
from chainkeys_client._errors import NotFound
from chainkeys_client._models import Account, AccountPage, ListedKey

IDEMPOTENCY_HEADER = "Idempotency-Key"
_FIELDS = ("address", "public_key", "network", "created_at", "private_key",
           "public_key_k1", "private_key_k1", "path")  # fmt: skip


def cosmos_public_key(pubkey: str | None) -> str | None:
    """Compressed key hex from the keyring JSON `{"@type", "key": <base64>}`."""
    if not pubkey:
        return None
    try:
        return base64.b64decode(json.loads(pubkey)["key"]).hex()
    except (ValueError, KeyError, TypeError):
        return None


def read_account(family: str) -> Callable[[Answer], Account]:
    def read(answer: Answer) -> Account:
        body: Any = answer.body if isinstance(answer.body, dict) else {}
        data: dict[str, Any] = body.get("data") if isinstance(body.get("data"), dict) else {}
        inner: dict[str, Any] = data["data"] if isinstance(data.get("data"), dict) else {}
        # Cosmos: everything is in data.data; the others: in data (and again in data.data).
        src: dict[str, Any] = inner if family == "cosmos" else {**inner, **data}
        fields: dict[str, Any] = {k: src.get(k) for k in _FIELDS if isinstance(src.get(k), str)}
        address = fields.pop("address", None) or body.get("address")
        if not isinstance(address, str):
            raise msgspec.ValidationError("the answer carries no address")
        pubkey = src.get("pubkey") if isinstance(src.get("pubkey"), str) else None
        if family == "cosmos" and "public_key" not in fields:
            fields["public_key"] = cosmos_public_key(pubkey)
        return Account(
            family=family, name=address, address=address, pubkey=pubkey,
            message=body.get("message"),
            replayed=answer.headers.get("idempotent-replayed") == "true",
            **fields,
        )  # fmt: skip

    return read


def read_page(family: str) -> Callable[[Answer], AccountPage]:
    def read(answer: Answer) -> AccountPage:
        data = answer.data() or {}
        if isinstance(data.get("data"), dict):
            data = {**data["data"], **{k: v for k, v in data.items() if k != "data"}}
        keys = []
        for item in data.get("keys") or []:
            if isinstance(item, str):
                keys.append(ListedKey(name=item))
            else:  # Cosmos: {address, pubkey}
                keys.append(ListedKey(name=item["address"], pubkey=item.get("pubkey")))
        return AccountPage(family=family, keys=keys, next_cursor=data.get("next_cursor"))

    return read


# ---- the calls (one place per endpoint; both clients run them) -------------------------


def create_call(
    family: str,
    *,
    network: str | None = None,
    private_key: str | None = None,
    mnemonic: str | None = None,
    passphrase: str | None = None,
    account_index: int | None = None,
    address_type: str | None = None,
    name: str | None = None,
    idempotency_key: str | None = None,
) -> Call[Account]:
    fam = family_segment(family)
    given = {
        "network": network, "private_key": private_key, "mnemonic": mnemonic,
        "passphrase": passphrase, "account_index": account_index,
        "address_type": address_type, "name": name,
    }  # fmt: skip
    body = {k: v for k, v in given.items() if v is not None}
    # A key makes the create safe to repeat: the same key and body replay the first answer.
    key = idempotency_key or str(uuid.uuid4())
    return Call("POST", f"/{fam}", read_account(fam), body=body,
                headers={IDEMPOTENCY_HEADER: key}, retry=True)  # fmt: skip


def get_call(family: str, name: str, network: str | None = None) -> Call[Account]:
    fam = family_segment(family)
    read = read_account(fam)

    def read_checked(answer: Answer) -> Account:
        account = read(answer)
        if network is not None and account.network is not None and account.network != network:
            raise NotFound(404, "account_not_found",
                           f"{fam} account {name} is on {account.network}, not {network}",
                           method="GET", path=f"/{fam}/{name}")  # fmt: skip
        return account

    return Call("GET", f"/{fam}/{segment(name)}", read_checked, retry=True)


def list_call(
    family: str, limit: int | None = None, cursor: str | None = None, network: str | None = None
) -> Call[AccountPage]:
    fam = family_segment(family)
    params: dict[str, Any] = {"limit": limit, "cursor": cursor, "network": network}
    return Call("GET", f"/{fam}", read_page(fam), params=params, retry=True)


def delete_call(family: str, name: str) -> Call[None]:
    fam = family_segment(family)
    return Call("DELETE", f"/{fam}/{segment(name)}", ignore)


def export_call(family: str, name: str) -> Call[Account]:
    fam = family_segment(family)
    return Call("POST", f"/{fam}/{segment(name)}/export", read_account(fam))


# ---- sync and async faces --------------------------------------------------------------


class Accounts:
    """`client.accounts`: create/import, get, list (one page or all), delete, export."""

    def __init__(self, run: SyncRunner) -> None:
        self._run = run

    def create(
        self,
        family: str,
        *,
        network: str | None = None,
        private_key: str | None = None,
        mnemonic: str | None = None,
        passphrase: str | None = None,
        account_index: int | None = None,
        address_type: str | None = None,
        name: str | None = None,
        idempotency_key: str | None = None,
    ) -> Account:
        """Generate (no key given) or import (`private_key` or `mnemonic`) an account.

        Always sent with an Idempotency-Key (a fresh uuid4 unless given), so it is
        retried after a lost answer without making a second account.
        """
        return self._run(create_call(
            family, network=network, private_key=private_key, mnemonic=mnemonic,
            passphrase=passphrase, account_index=account_index, address_type=address_type,
            name=name, idempotency_key=idempotency_key,
        ))  # fmt: skip

    def get(self, family: str, name: str, network: str | None = None) -> Account:
        """The account named `name`; with `network`, NotFound unless it is on that network."""
        return self._run(get_call(family, name, network))

    def list(
        self,
        family: str,
        limit: int | None = None,
        cursor: str | None = None,
        *,
        network: str | None = None,
    ) -> AccountPage:
        return self._run(list_call(family, limit, cursor, network))

    def iter(
        self, family: str, *, page_size: int | None = None, network: str | None = None
    ) -> Iterator[ListedKey]:
        """Every account of the family, page after page."""
        cursor: str | None = None
        while True:
            page = self.list(family, page_size, cursor, network=network)
            yield from page.keys
            if not page.next_cursor:
                return
            cursor = page.next_cursor

    def delete(self, family: str, name: str) -> None:
        """Delete (never retried automatically)."""
        self._run(delete_call(family, name))

    def export(self, family: str, name: str) -> Account:
        """The private key in the family's import form (export scope, operator setting)."""
        return self._run(export_call(family, name))


class AsyncAccounts:
    """`client.accounts` of the AsyncClient: the same methods, awaited."""

    def __init__(self, run: AsyncRunner) -> None:
        self._run = run

    async def create(
        self,
        family: str,
        *,
        network: str | None = None,
        private_key: str | None = None,
        mnemonic: str | None = None,
        passphrase: str | None = None,
        account_index: int | None = None,
        address_type: str | None = None,
        name: str | None = None,
        idempotency_key: str | None = None,
    ) -> Account:
        return await self._run(create_call(
            family, network=network, private_key=private_key, mnemonic=mnemonic,
            passphrase=passphrase, account_index=account_index, address_type=address_type,
            name=name, idempotency_key=idempotency_key,
        ))  # fmt: skip

    async def get(self, family: str, name: str, network: str | None = None) -> Account:
        return await self._run(get_call(family, name, network))

    async def list(
        self,
        family: str,
        limit: int | None = None,
        cursor: str | None = None,
        *,
        network: str | None = None,
    ) -> AccountPage:
        return await self._run(list_call(family, limit, cursor, network))

    async def iter(
        self, family: str, *, page_size: int | None = None, network: str | None = None
    ) -> AsyncIterator[ListedKey]:
        cursor: str | None = None
        while True:
            page = await self.list(family, page_size, cursor, network=network)
            for key in page.keys:
                yield key
            if not page.next_cursor:
                return
            cursor = page.next_cursor

    async def delete(self, family: str, name: str) -> None:
        await self._run(delete_call(family, name))

    async def export(self, family: str, name: str) -> Account:
        return await self._run(export_call(family, name))


__all__ = ["Accounts", "AsyncAccounts"]
