"""`sign_batch`: up to 1,000 of an account's sign requests in one request and one
transaction (`POST /{family}/{name}/sign-batch`).

Each item is a sign endpoint's JSON body plus `"kind"`, that endpoint's last path
segment (`sign-message`, `sign-psbt`, `sign-transfer`, …). The answer holds one result
per item, in order, each read as that endpoint's method reads its answer:

- signed: the method's value (`MessageSignature`, `PsbtSigned`, `CosmosTx`, …),
  checked as the method checks it before it is returned; an answer that does not
  check raises `AnswerMismatch` for the whole batch (a service whose answers do not
  check is not trusted for the others either);
- waiting for approval: an `ApprovalPending`, its `check` set for `approvals.wait`;
- refused: the exception the method would raise (`BadRequest`, `PolicyDenied`, …).

Nothing of an item is raised: the list holds values and exceptions in the items'
places, as `asyncio.gather(..., return_exceptions=True)` does. A batch the service
refuses as a whole (no item or over 1,000, an item without a kind of this family, a
body over its 1 MiB cap) raises as any call does. Never retried automatically.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import msgspec

from chainkeys_client import _check_eos as eos
from chainkeys_client._check import run_check
from chainkeys_client._core import Answer, Call, family_segment, segment
from chainkeys_client._errors import AnswerMismatch, ApprovalPending, Forbidden, error_class
from chainkeys_client._models import Approval
from chainkeys_client._signer import Signer, _lookup_refused, eos_key_call
from chainkeys_client._signers import (
    amino_signer,
    direct_signer,
    eos_tx_signer,
    ibc_transfer_signer,
    message_signer,
    psbt_signer,
    raw_signer,
    transfer_signer,
)

Item = Mapping[str, Any]


class _Result(msgspec.Struct):
    status: int
    data: Any = None
    code: str = ""
    message: str = ""


class _Results(msgspec.Struct):
    results: list[_Result]


def _signer(family: str, name: str, item: Item, key: str | None) -> Signer[Any]:
    """The item's sign method as a `Signer`: the check of its answer."""
    kind, body = item["kind"], {k: v for k, v in item.items() if k != "kind"}
    if kind == "sign-message":
        return message_signer(family, name, body.get("message"), body.get("data"), key)
    if kind == "sign-psbt":
        return psbt_signer(family, name, body["psbt"], body.get("finalize", True))
    if kind == "sign-raw-transaction":
        return raw_signer(family, name, body["hex"], body.get("prevtxs", ()),
                          body.get("sighashtype", "ALL"))  # fmt: skip
    if kind == "sign-direct":
        return direct_signer(name, body["signDoc"])
    if kind == "sign-amino":
        return amino_signer(name, body["signDoc"])
    if kind == "sign-transfer":
        return transfer_signer(name, body)
    if kind == "sign-ibc-transfer":
        return ibc_transfer_signer(name, body)
    if kind == "sign-transaction":
        return eos_tx_signer(name, body["chainId"], body["serializedTransaction"],
                             body.get("serializedContextFreeData"), key)  # fmt: skip
    raise ValueError(f"no sign method for kind {kind!r}")


def _signed(
    family: str, name: str, item: Item, shown: str | None, key: bytes | None, result: _Result
) -> Any:
    """A signed item's answer as its method reads it, checked as the method checks it."""
    signer = _signer(family, name, item, shown)
    value = msgspec.convert(result.data, signer.answer, strict=False)
    signer.check(key)(value)
    return value


def batch_call(
    family: str, name: str, items: Sequence[Item], key: bytes | None, public_key: str | None
) -> Call[list[Any]]:
    fam = family_segment(family)
    path = f"/{fam}/{segment(name)}/sign-batch"
    sent = [dict(item) for item in items]
    # EOS checks against the account's key: the caller's (`public_key`) or the one looked up
    shown = public_key if fam == "eos" else None

    def read(answer: Answer) -> list[Any]:
        request_id = answer.headers.get("x-request-id")

        def checked(what: Callable[[Any], Any], value: Any) -> Any:
            return run_check(what, value, method="POST", path=path, request_id=request_id)

        results = checked(lambda d: msgspec.convert(d, _Results, strict=False).results,
                          answer.data())  # fmt: skip
        if len(results) != len(sent):
            raise AnswerMismatch(f"{len(results)} results for {len(sent)} items",
                                 method="POST", path=path, request_id=request_id)  # fmt: skip
        out: list[Any] = []
        for item, result in zip(sent, results, strict=True):
            if result.status == 200:

                def signed(r: _Result, i: Item = item) -> Any:
                    return _signed(fam, name, i, shown, key, r)

                out.append(checked(signed, result))
            elif result.status == 202:
                approval = checked(lambda r: msgspec.convert(r.data, Approval, strict=False),
                                   result)  # fmt: skip
                pending = ApprovalPending(approval)
                _, pending.check = _signer(fam, name, item, shown).armed(key)
                out.append(pending)
            else:
                cls = error_class(result.status, result.code)
                out.append(cls(result.status, result.code, result.message, method="POST",
                               path=path, request_id=request_id))  # fmt: skip
        return out

    return Call("POST", path, read, body={"items": sent})


def _needs_key(family: str, public_key: str | None) -> bool:
    return family_segment(family) == "eos" and public_key is None


def _given_key(family: str, public_key: str | None) -> bytes | None:
    if public_key is None:
        return None
    if family_segment(family) != "eos":
        raise ValueError("public_key is for EOS accounts: other answers are checked against "
                         "the key the account's address names")  # fmt: skip
    return eos.parse_public_key(public_key)


def sign_batch(
    run: Callable[[Call[Any]], Any], family: str, name: str, items: Sequence[Item],
    public_key: str | None = None,
) -> list[Any]:  # fmt: skip
    key = _given_key(family, public_key)
    if _needs_key(family, public_key):
        try:
            key = run(eos_key_call(name))
        except Forbidden as exc:
            raise _lookup_refused(exc) from None
    result: list[Any] = run(batch_call(family, name, items, key, public_key))
    return result


async def sign_batch_async(
    run: Callable[[Call[Any]], Awaitable[Any]], family: str, name: str, items: Sequence[Item],
    public_key: str | None = None,
) -> list[Any]:  # fmt: skip
    key = _given_key(family, public_key)
    if _needs_key(family, public_key):
        try:
            key = await run(eos_key_call(name))
        except Forbidden as exc:
            raise _lookup_refused(exc) from None
    result: list[Any] = await run(batch_call(family, name, items, key, public_key))
    return result
