"""The one way responses leave the service: JSON envelopes, errors included."""

from __future__ import annotations

import logging
import traceback
from collections.abc import Awaitable, Callable
from functools import wraps
from typing import Any

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from chainkeys.api.schemas import ErrorBody
from chainkeys.errors import ChainkeysError

log = logging.getLogger("chainkeys.api")
_encoder = msgspec.json.Encoder()

Handler = Callable[[Request], Awaitable[Response]]


class JSONResponse(Response):
    media_type = "application/json"


def respond(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return JSONResponse(_encoder.encode(body), status_code=status, headers=headers)


def error_response(exc: ChainkeysError, headers: dict[str, str] | None = None) -> Response:
    body = ErrorBody(message=exc.message, code=exc.code)
    return respond(body, exc.status, headers=getattr(exc, "headers", None) or headers)


def internal_error(exc: BaseException) -> Response:
    """Log the frames but not the exception text: it could quote a secret."""
    frames = "".join(traceback.format_tb(exc.__traceback__))
    log.error("unhandled %s\n%s", type(exc).__name__, frames)
    return error_response(ChainkeysError())


def endpoint(fn: Handler) -> Handler:
    """Every handler: domain errors become their envelope, anything else a bare 500."""

    @wraps(fn)
    async def handler(request: Request) -> Response:
        try:
            return await fn(request)
        except ChainkeysError as exc:
            return error_response(exc)
        except Exception as exc:
            return internal_error(exc)

    return handler
