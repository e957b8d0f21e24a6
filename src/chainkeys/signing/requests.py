"""What a sign request is before anything is signed: its owner (public data only),
its kind, what policy conditions read of its account, and its decoding and checks.

One path for the sign endpoint, the approvals that sign later and the dry run
(signing/dryrun.py), so all three refuse alike. Pure but for `account_for`, which
looks up the wallet of a multisig derived from one.
"""

from __future__ import annotations

import logging
import traceback
from typing import Any

from chainkeys.accounts.families import family_of
from chainkeys.accounts.multisig import multisig_of
from chainkeys.accounts.repository import AccountRow
from chainkeys.approvals.repository import ApprovalRow
from chainkeys.chains.registry import FAMILIES
from chainkeys.chains.spec import ChainError
from chainkeys.chains.tx.base import BAD as BAD_REQUEST
from chainkeys.chains.tx.base import Decoded, Owner, SignKind
from chainkeys.errors import BadRequest
from chainkeys.policies.conditions import Facts
from chainkeys.policies.document import Policy
from chainkeys.policies.engine import Decision, Refusal
from chainkeys.policies.service import Account
from chainkeys.store.backend import Transactions
from chainkeys.vault.integrity import Integrity
from chainkeys.wallets.repository import WalletMultisigs

log = logging.getLogger("chainkeys.signing")

MULTISIG_KINDS = ("sign-psbt", "sign-amino")  # the kinds whose prepared request can `cosign`


def owner_of(row: AccountRow) -> Owner:
    fam = family_of(row.family)
    ms = multisig_of(row.details)
    if ms is not None:  # no key of its own: its members sign
        return Owner(
            row.family, row.name, row.address, b"", fam.network(row.network), ms.address_type, ms
        )
    return Owner(
        family=row.family,
        name=row.name,
        address=row.address,
        public_key=fam.public_key_bytes(row.public_key),
        network=fam.network(row.network),
        address_type=row.details.get("address_type"),
    )


def kind_of(family: str, path: str) -> SignKind:
    for kind in FAMILIES[family].signers:
        if kind.path == path:
            return kind  # type: ignore[no-any-return]
    raise BadRequest(f"{family} has no {path}")


def account_of(row: AccountRow, wallet: str | None = None) -> Account:
    """What policy conditions read of an account (`account` in CEL): a key derived from
    a wallet, or a multisig derived from a wallet's registration (`details["hd"]`, its
    wallet given as `wallet`: `SigningService._account` looks it up), is that wallet's."""
    hd = row.details.get("hd")
    if isinstance(hd, dict):
        found, path, index = wallet or "", hd.get("path"), hd.get("index")
    else:
        found, path, index = (
            row.details.get("wallet") or "",
            row.details.get("path"),
            row.details.get("index"),
        )
    if not found or not isinstance(index, int) or isinstance(index, bool):
        return Account(row.name, row.address, str(found), str(path or "") if found else "")
    return Account(row.name, row.address, str(found), str(path or ""), index)


async def account_for(db: Transactions, integrity: Integrity, row: AccountRow) -> Account:
    """`account_of(row)`, with the wallet of a multisig derived from one."""
    hd = row.details.get("hd")
    if not isinstance(hd, dict) or not isinstance(hd.get("id"), str):
        return account_of(row)
    async with db.read() as tx:
        wallet = await WalletMultisigs.wallet_of(tx, integrity, row.tenant_id, hd["id"])
    return account_of(row, wallet)


Again = tuple[Policy, Facts | None] | None  # decide again under the caps' lock (`count`)
SIGN_FAILED = "sign_failed"


def prepare(kind: SignKind, request: Any, owner: Owner) -> Decoded:
    """Decode and check a sign request for `owner` (public data only): the sign
    endpoint's and the dry run's one path, so both refuse alike (BadRequest)."""
    try:
        if owner.multisig is not None and kind.path not in MULTISIG_KINDS:
            raise ChainError(
                f"a multisig account signs with {', '.join(MULTISIG_KINDS)} "
                "only (each member's signature over the same sighashes)",
                "multisig_unsupported",
            )
        return kind.prepare(request, owner)
    except ChainError as exc:
        raise BadRequest(exc.message, code=exc.code) from None
    except Exception as exc:  # a decoder that fails has not understood the request
        log.error(
            "the %s %s decoder failed (%s); the request is refused\n%s",
            owner.family,
            kind.path,
            type(exc).__name__,
            frames(exc),
        )
        raise BadRequest(
            "the request could not be decoded; nothing was signed", code=BAD_REQUEST
        ) from None


def frames(exc: BaseException) -> str:
    """Where `exc` was raised: the frames, never its message (it could quote a secret)."""
    return "".join(traceback.format_tb(exc.__traceback__))


def approved(decision: Decision, approval: ApprovalRow | None) -> None:
    """Refusal unless the people who approved (if any) are the people the decision asks
    for: an approval never stands for a larger quorum or another group."""
    wanted = decision.approval
    if wanted is None:
        return
    if approval is None:
        raise Refusal(
            decision.rule,
            "it needs approval now (the 24 h window changed while it was decided): send it again",
        )
    if wanted.passkey and not approval.passkey:
        raise Refusal(
            decision.rule,
            "the policy changed: this request's votes must now be "
            "signed with passkeys; send it again",
        )
    if wanted.group != approval.approver_group or wanted.quorum > approval.quorum:
        raise Refusal(
            decision.rule,
            "the policy changed: this request now needs the "
            f"approval of {wanted.quorum} of {wanted.group}",
        )
