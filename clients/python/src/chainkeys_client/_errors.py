"""Exceptions: every error answer of the service becomes a typed exception.

The service's error body is always `{"success": false, "message", "code"}`;
the status picks the class. Nothing here ever holds the token: an exception
keeps the status, the code, the server's message, the method and path, and
the server's request id (for support), never the request or its headers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from chainkeys_client._models import Approval

__all__ = [
    "AnswerMismatch",
    "ApprovalFailed",
    "ApprovalPending",
    "ApprovalTimeout",
    "BadRequest",
    "ChainkeysError",
    "Conflict",
    "Forbidden",
    "NotFound",
    "PolicyDenied",
    "RateLimited",
    "ServerError",
    "ServiceUnavailable",
    "TransportError",
    "Unauthorized",
]


class ChainkeysError(Exception):
    """An error answer (or no answer) from chainkeys.

    `status` is the HTTP status (None when no answer arrived, or when the client
    itself ends the request: approvals, `AnswerMismatch`), `code` the
    envelope's machine code (`invalid_private_key`, `forbidden`, …), `message`
    the server's sentence for a person.
    """

    def __init__(
        self,
        status: int | None,
        code: str,
        message: str,
        *,
        method: str | None = None,
        path: str | None = None,
        request_id: str | None = None,
    ) -> None:
        super().__init__(status, code, message)
        self.status = status
        self.code = code
        self.message = message
        self.method = method
        self.path = path
        self.request_id = request_id

    def __str__(self) -> str:
        where = f" ({self.method} {self.path})" if self.method and self.path else ""
        status = self.status if self.status is not None else "no answer"
        return f"{status} {self.code}: {self.message}{where}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}(status={self.status!r}, code={self.code!r}, message={self.message!r})"


class BadRequest(ChainkeysError):
    """400: malformed JSON, unknown field values, invalid key, a refused sign request."""


class Unauthorized(ChainkeysError):
    """401: missing, unknown, expired or revoked token."""


class Forbidden(ChainkeysError):
    """403: the token's scopes or families do not allow it (`forbidden`), or the policy."""


class PolicyDenied(Forbidden):
    """403 `policy_denied`: the tenant's signing policy refused the request."""


class NotFound(ChainkeysError):
    """404: no such account in the caller's tenant (another tenant's looks the same)."""


class Conflict(ChainkeysError):
    """409: the account already exists, or an Idempotency-Key was reused with another body."""


class RateLimited(ChainkeysError):
    """429: the token's rate limit; `retry_after` is the server's Retry-After in seconds."""

    def __init__(self, *args: Any, retry_after: float | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.retry_after = retry_after


class ServerError(ChainkeysError):
    """5xx: the service failed (the body never carries details or secrets)."""


class ServiceUnavailable(ServerError):
    """503: storage unavailable or the service is starting."""

    def __init__(self, *args: Any, retry_after: float | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.retry_after = retry_after


class TransportError(ChainkeysError):
    """No answer: connection refused or reset, timeout. `status` is None."""


class AnswerMismatch(ChainkeysError):
    """A sign answer the client refuses: it is not a signature of what was asked, by the
    account's key (another key's signature, a swapped public key, another transaction, a
    changed document, a signature that does not verify). `code` is `answer_mismatch`,
    `status` None (the HTTP answer was a success; its content is not), `message` says
    what did not match. Never retried automatically.
    """

    def __init__(
        self,
        message: str,
        *,
        method: str | None = None,
        path: str | None = None,
        request_id: str | None = None,
    ) -> None:
        super().__init__(None, "answer_mismatch", message, method=method, path=path,
                         request_id=request_id)  # fmt: skip

    def __str__(self) -> str:
        where = f" ({self.method} {self.path})" if self.method and self.path else ""
        return f"answer_mismatch: {self.message}{where}"


class ApprovalPending(Exception):  # noqa: N818 - a state, not a failure
    """A sign request needs approval (HTTP 202): nothing is signed yet.

    Not a `ChainkeysError`: the request was accepted. `id` names the approval
    request; `approval` is the whole object the server answered with. Wait for
    the signature with `client.approvals.wait(pending)` (it returns the signed
    approval; `approval.result_as(CosmosTx)` is the sign endpoint's answer).
    Sending the same request again answers the same approval request. `check`
    (set by the sign method) checks the signed result as the method checks a direct
    answer: `approvals.wait(pending)` runs it and raises `AnswerMismatch`.
    """

    def __init__(self, approval: Approval, message: str = "approval required") -> None:
        super().__init__(approval.id)
        self.id = approval.id
        self.approval = approval
        self.message = message
        self.check: Callable[[Any], None] | None = None

    def __str__(self) -> str:
        return f"approval required: request {self.id} ({self.approval.state or 'pending'})"


class ApprovalFailed(ChainkeysError):
    """An approval request ended without a signature: `approval.state` is rejected,
    expired, cancelled or failed (`approval.reason` says why, when known).

    Raised by `approvals.wait`; `code` is `approval_<state>`, `status` None (the
    answers were successful; the request was not).
    """

    def __init__(self, approval: Approval) -> None:
        state = approval.state or "unknown"
        why = f": {approval.reason}" if approval.reason else ""
        super().__init__(None, f"approval_{state}", f"approval {approval.id} {state}{why}",
                         method="GET", path=f"/approvals/{approval.id}")  # fmt: skip
        self.approval = approval

    def __str__(self) -> str:
        return self.message


class ApprovalTimeout(ChainkeysError):
    """`approvals.wait` ran out of time; `approval` is the last state seen (still open)."""

    def __init__(self, approval: Approval, timeout: float) -> None:
        super().__init__(None, "approval_timeout",
                         f"approval {approval.id} still {approval.state} after {timeout:g} s",
                         method="GET", path=f"/approvals/{approval.id}")  # fmt: skip
        self.approval = approval
        self.timeout = timeout

    def __str__(self) -> str:
        return self.message


_BY_STATUS: dict[int, type[ChainkeysError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    429: RateLimited,
    503: ServiceUnavailable,
}


def error_class(status: int, code: str) -> type[ChainkeysError]:
    if status == 403 and code == "policy_denied":
        return PolicyDenied
    found = _BY_STATUS.get(status)
    if found is not None:
        return found
    if status >= 500:
        return ServerError
    return ChainkeysError
