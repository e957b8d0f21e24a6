"""What an approval shows: its summary, derived from the authenticated stored request
each time it is shown (API, console, webhook) and each time a vote is checked.

The `summary` column written at opening is kept for old rows and migrations but is
never read here: whoever can edit the database could make it say "0.009 ATOM" while
900,000 ATOM would be signed. The request column is covered by the row's MAC
(store/integrity.py APPROVALS); it is decoded by the same path the sign endpoint
takes (signing/requests.py `prepare`) for the account as it is stored (authenticated
too), and the summary it gives must be of the digest the request was opened with.

One form for every kind of request (`form`): the signing layer's `summary_record`
(family, network, kind, chain id, every output or message or action with its
recipient and amounts in base and display units, fee, memo, IBC route, message) with
the account beside it. Integers a JavaScript number cannot hold are decimal text, so
the console hashes the same canonical JSON (approvals/proofs.py `canonical`) as the
server.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

import msgspec

from chainkeys.accounts.multisig import multisig_of
from chainkeys.accounts.repository import AccountRow, Accounts
from chainkeys.approvals.repository import ApprovalRow
from chainkeys.chains.tx.base import Summary, summary_record
from chainkeys.errors import ChainkeysError
from chainkeys.signing.requests import kind_of, owner_of, prepare
from chainkeys.store.integrity import APPROVALS
from chainkeys.store.sql import Tx
from chainkeys.vault.integrity import Integrity, failed

SAFE_INTEGER: Final = 2**53 - 1  # JavaScript's Number.MAX_SAFE_INTEGER


@dataclass(frozen=True, slots=True)
class Shown:
    """An approval's summary as derived now (None, with why, when it cannot be)."""

    summary: dict[str, Any] | None
    problem: str | None = None
    signer: dict[str, Any] | None = None  # the account's public data (`signer_of`)


def signer_of(account: AccountRow) -> dict[str, Any]:
    """What an offline verifier needs of the signing account besides the request (its
    address, public key, network and, for Litecoin, address type)."""
    out: dict[str, Any] = {
        "address": account.address,
        "public_key": account.public_key,
        "network": account.network,
    }
    if account.details.get("address_type") is not None:
        out["address_type"] = account.details["address_type"]
    if multisig_of(account.details) is not None:
        out["multisig"] = True  # its members sign: not verifiable from these fields alone
    return out


def form(account: str, summary: Summary) -> dict[str, Any]:
    """The one summary form of an approval: the account and `summary_record`, with
    integers beyond JavaScript's safe range as decimal text."""
    out: dict[str, Any] = _safe({"account": account, **summary_record(summary)})
    return out


def _safe(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_safe(v) for v in value]
    if type(value) is int and abs(value) > SAFE_INTEGER:
        return str(value)
    return value


async def derive(tx: Tx, integrity: Integrity, row: ApprovalRow) -> Shown:
    """The summary of `row`'s request, decoded now from the authenticated row and its
    account; None with the reason when the row fails its MAC, the account is gone or
    the request no longer decodes to its digest (nothing of it can be signed then)."""
    if not integrity.valid(APPROVALS, row.covered()):
        failed(APPROVALS, f"approval {row.id}")
        return Shown(None, "the stored request fails its integrity check: it is not shown")
    try:
        kind = kind_of(row.family, row.kind)
        request = msgspec.json.decode(row.request, type=kind.request)
        account = await Accounts.get(tx, integrity, row.tenant_id, row.family, row.account_name)
        if account is None:
            return Shown(None, "the account is gone: the request cannot be shown or signed")
        summary = prepare(kind, request, owner_of(account)).summary
    except (ChainkeysError, msgspec.DecodeError, msgspec.ValidationError):
        return Shown(None, "the stored request no longer decodes: it cannot be signed")
    if summary.digest != row.digest:
        return Shown(None, "the request no longer decodes to its digest: it cannot be signed")
    return Shown(form(row.account_name, summary), signer=signer_of(account))
