"""A sign call and the check of its answer (`Signer`), and running one: the EOS key
lookup first when the check needs it, the check before the answer is returned, and
the same check handed to `ApprovalPending` for the result an approval brings back.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import msgspec

from chainkeys_client import _check_eos as eos
from chainkeys_client._accounts import get_call
from chainkeys_client._check import run_check
from chainkeys_client._core import Answer, Call
from chainkeys_client._errors import ApprovalPending, Forbidden

T = TypeVar("T")
Check = Callable[[T], None]


@dataclass(frozen=True, slots=True)
class Signer(Generic[T]):
    """A sign call and how to check its answer. `check(key)` is the check, given the
    account's key when `lookup` (an EOS account lookup, read by `eos.account_key`) gave
    it; `key` is the caller's own (`public_key=`), when given no lookup is made."""

    call: Call[T]
    answer: type[T]
    check: Callable[[bytes | None], Check[T]]
    lookup: Call[bytes] | None = None
    key: bytes | None = None

    def armed(self, key: bytes | None) -> tuple[Call[T], Check[Any]]:
        """The call whose answer is checked before it is read out, and the check of an
        approval's result (the sign endpoint's answer, as JSON)."""
        check, call = self.check(key), self.call

        def read(answer: Answer) -> T:
            value = call.read(answer)
            run_check(check, value, method=call.method, path=call.path,
                      request_id=answer.headers.get("x-request-id"))  # fmt: skip
            return value

        def check_result(result: Any) -> None:
            run_check(lambda r: check(msgspec.convert(r, self.answer, strict=False)), result,
                      method=call.method, path=call.path, request_id=None)  # fmt: skip

        return dataclasses.replace(call, read=read), check_result


def no_key(check: Check[T]) -> Callable[[bytes | None], Check[T]]:
    return lambda _key: check


def with_key(make: Callable[[bytes], Check[T]]) -> Callable[[bytes | None], Check[T]]:
    def check(key: bytes | None) -> Check[T]:
        if key is None:  # pragma: no cover - a Signer with a lookup always has a key
            raise ValueError("the account's key is needed to check the answer")
        return make(key)

    return check


def eos_key_call(name: str) -> Call[bytes]:
    """The EOS account's public key (`GET /eos/{name}`), to check its signatures with."""
    call = get_call("eos", name)

    def read(answer: Answer) -> bytes:
        account = call.read(answer)
        return run_check(eos.account_key, account, method=call.method, path=call.path,
                         request_id=answer.headers.get("x-request-id"))  # fmt: skip

    return Call(call.method, call.path, read, retry=call.retry)


def _lookup_refused(exc: Forbidden) -> Forbidden:
    return type(exc)(
        exc.status, exc.code,
        f"{exc.message}; the EOS account's key is read to check its signatures: pass "
        "public_key= (the key you know it has), or use a token with the read scope",
        method=exc.method, path=exc.path, request_id=exc.request_id,
    )  # fmt: skip


def sign(run: Callable[[Call[Any]], Any], signer: Signer[T]) -> T:
    key = signer.key
    if key is None and signer.lookup is not None:
        try:
            key = run(signer.lookup)
        except Forbidden as exc:
            raise _lookup_refused(exc) from None
    call, check_result = signer.armed(key)
    try:
        result: T = run(call)
    except ApprovalPending as pending:
        pending.check = check_result
        raise
    return result


async def sign_async(run: Callable[[Call[Any]], Awaitable[Any]], signer: Signer[T]) -> T:
    key = signer.key
    if key is None and signer.lookup is not None:
        try:
            key = await run(signer.lookup)
        except Forbidden as exc:
            raise _lookup_refused(exc) from None
    call, check_result = signer.armed(key)
    try:
        result: T = await run(call)
    except ApprovalPending as pending:
        pending.check = check_result
        raise
    return result
