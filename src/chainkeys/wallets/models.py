"""What the wallet service takes and answers, apart from the rules that make them."""

from __future__ import annotations

from dataclasses import dataclass

from chainkeys.chains import hd
from chainkeys.errors import NotFound
from chainkeys.wallets.repository import WalletRow


class WalletNotFound(NotFound):
    code, message = "wallet_not_found", "no such wallet"


@dataclass(frozen=True, slots=True)
class WalletView:
    id: str
    name: str
    fingerprint: str
    created_ms: int
    exported: bool


@dataclass(frozen=True, slots=True)
class DeriveRequest:
    family: str
    network: str | None = None
    address_type: str | None = None
    account: int = 0
    change: int = 0
    index: int | None = None
    count: int = 1
    name: str | None = None  # EOS: the account name (one account only)
    preview: bool = False


@dataclass(frozen=True, slots=True)
class XpubAnswer:
    key: hd.ExtendedKey
    descriptor: str | None
    change_descriptor: str | None
    formats: tuple[str, ...] = ()  # every format it may be asked in, the default first


def view_of(row: WalletRow) -> WalletView:
    return WalletView(row.id, row.name, row.fingerprint, row.created_ms, row.exported)
