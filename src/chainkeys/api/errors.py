"""The one table from domain error to HTTP status, and the envelope every error wears.

Handlers never build error responses: they raise domain errors (`errors.py`),
and Litestar's own errors (unknown path, wrong method) are translated here too,
so every error body is `{"success": false, "message", "code"}`.
"""

from __future__ import annotations

import logging
import traceback
from typing import Any

import msgspec
from litestar import Request, Response
from litestar.exceptions import HTTPException, MethodNotAllowedException, NotFoundException

from chainkeys import errors as e
from chainkeys.api.schemas import ErrorBody

log = logging.getLogger("chainkeys.api")

STATUS: dict[type[e.ChainkeysError], int] = {
    e.BadRequest: 400,
    e.Unauthorized: 401,
    e.Forbidden: 403,
    e.PolicyDenied: 403,
    e.NotFound: 404,
    e.MethodNotAllowed: 405,
    e.RequestTimeout: 408,
    e.ClientDisconnected: 499,  # nginx's "client closed request": logged, never delivered
    e.Conflict: 409,
    e.PayloadTooLarge: 413,
    e.UnsupportedMediaType: 415,
    e.RateLimited: 429,
    e.StorageUnavailable: 503,
}

_encoder = msgspec.json.Encoder()
ORDER = ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD")  # how Allow lists methods
JSON = "application/json"


def status_of(exc: e.ChainkeysError) -> int:
    for cls in type(exc).__mro__:
        status = STATUS.get(cls)
        if status is not None:
            return status
    return 500


def headers_of(exc: e.ChainkeysError) -> dict[str, str]:
    if isinstance(exc, e.RateLimited):
        return {"Retry-After": str(exc.retry_after)}
    if isinstance(exc, e.MethodNotAllowed) and exc.allow:
        return {"Allow": exc.allow}
    return {}


def envelope(exc: e.ChainkeysError) -> tuple[int, bytes, dict[str, str]]:
    """Status, body and headers of the response for a domain error."""
    body = _encoder.encode(ErrorBody(message=exc.message, code=exc.code))
    return status_of(exc), body, headers_of(exc)


def _response(exc: e.ChainkeysError) -> Response[bytes]:
    status, body, headers = envelope(exc)
    return Response(body, status_code=status, media_type=JSON, headers=headers)


def domain_error(request: Request[Any, Any, Any], exc: e.ChainkeysError) -> Response[bytes]:
    return _response(exc)


def not_found(request: Request[Any, Any, Any], exc: NotFoundException) -> Response[bytes]:
    return _response(e.NotFound("no such endpoint"))


def method_not_allowed(
    request: Request[Any, Any, Any], exc: MethodNotAllowedException
) -> Response[bytes]:
    allow = (exc.headers or {}).get("allow", "")
    methods = sorted((m for m in allow.split(", ") if m in ORDER), key=ORDER.index)
    message = f"{request.method[:20]} is not allowed on {request.url.path[:100]}"
    return _response(e.MethodNotAllowed(message, allow=", ".join(methods)))


def http_error(request: Request[Any, Any, Any], exc: HTTPException) -> Response[bytes]:
    """Litestar's other client errors (we parse bodies and queries ourselves, so rare)."""
    if exc.status_code >= 500:
        return internal_error(request, exc)
    return _response(e.BadRequest("bad request"))


def internal_error(request: Request[Any, Any, Any], exc: Exception) -> Response[bytes]:
    """Log the frames but not the exception text: it could quote a secret."""
    frames = "".join(traceback.format_tb(exc.__traceback__))
    log.error("unhandled %s\n%s", type(exc).__name__, frames)
    return _response(e.ChainkeysError())


HANDLERS: dict[Any, Any] = {
    e.ChainkeysError: domain_error,
    NotFoundException: not_found,
    MethodNotAllowedException: method_not_allowed,
    HTTPException: http_error,
    Exception: internal_error,
}
