"""The one table from domain error to HTTP status, and the envelope every error wears.

Handlers never build error responses: they raise domain errors (`errors.py`), and
the transport its own refusals (below);
the route wrapper (`api/routes/common.py`) and the router's own refusals
(`api/router.py`: unknown path, wrong method) all end here, so every error body is
`{"success": false, "message", "code"}`.
"""

from __future__ import annotations

import logging
import traceback

import msgspec
from starlette.responses import Response

from chainkeys import errors as e
from chainkeys.api.schemas import ErrorBody
from chainkeys.chains.registry import FAMILIES

log = logging.getLogger("chainkeys.api")


# The transport's refusals: what HTTP itself can go wrong with (a body, a method, a
# connection), raised only by api/ (domain errors are chainkeys/errors.py's).
class InvalidJSON(e.BadRequest):
    code, message = "invalid_json", "request body is not valid JSON"


class MethodNotAllowed(e.ChainkeysError):
    code, message = "method_not_allowed", "method not allowed"

    def __init__(self, message: str | None = None, *, allow: str = "") -> None:
        super().__init__(message)
        self.allow = allow


class RequestTimeout(e.ChainkeysError):
    code, message = "request_timeout", "the request body did not arrive in time"


class ClientDisconnected(e.ChainkeysError):
    """The client went away before its request arrived in full: nothing is done."""

    code, message = "client_disconnected", "the client closed the connection mid-request"


class PayloadTooLarge(e.ChainkeysError):
    code, message = "payload_too_large", "request body is too large"


class UnsupportedMediaType(e.ChainkeysError):
    code, message = "unsupported_media_type", "send Content-Type: application/json"


STATUS: dict[type[e.ChainkeysError], int] = {
    e.BadRequest: 400,
    e.Unauthorized: 401,
    e.Forbidden: 403,
    e.PolicyDenied: 403,
    e.CosignerRejected: 403,
    e.NotFound: 404,
    MethodNotAllowed: 405,
    RequestTimeout: 408,
    ClientDisconnected: 499,  # nginx's "client closed request": logged, never delivered
    e.Conflict: 409,
    PayloadTooLarge: 413,
    UnsupportedMediaType: 415,
    e.Frozen: 423,  # WebDAV's Locked: the resource is, until the freeze ends or is lifted
    e.RateLimited: 429,
    e.StorageUnavailable: 503,
    e.StorageFull: 503,  # (a StorageUnavailable: named for the reader of this table)
    e.Unavailable: 503,  # the co-signer's too (e.CosignerUnavailable)
}
ORDER = ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD")  # how Allow lists methods
NO_SUCH_ENDPOINT = (
    f"no such endpoint; account paths begin with a chain family ({', '.join(FAMILIES)}), "
    "see /openapi.json for the rest"
)
JSON = "application/json"
_encoder = msgspec.json.Encoder()


def status_of(exc: e.ChainkeysError) -> int:
    for cls in type(exc).__mro__:
        status = STATUS.get(cls)
        if status is not None:
            return status
    return 500


def headers_of(exc: e.ChainkeysError) -> dict[str, str]:
    if isinstance(exc, e.RateLimited):
        return {"Retry-After": str(exc.retry_after)}
    if isinstance(exc, MethodNotAllowed) and exc.allow:
        return {"Allow": exc.allow}
    return {}


def envelope(exc: e.ChainkeysError) -> tuple[int, bytes, dict[str, str]]:
    """Status, body and headers of the response for a domain error."""
    body = _encoder.encode(ErrorBody(message=exc.message, code=exc.code))
    return status_of(exc), body, headers_of(exc)


def error_response(exc: e.ChainkeysError) -> Response:
    status, body, headers = envelope(exc)
    return Response(body, status_code=status, media_type=JSON, headers=headers)


def internal_error(exc: BaseException) -> Response:
    """Log the frames but not the exception text: it could quote a secret."""
    frames = "".join(traceback.format_tb(exc.__traceback__))
    log.error("unhandled %s\n%s", type(exc).__name__, frames)
    return error_response(e.ChainkeysError())
