"""One error hierarchy: each error carries its HTTP status and machine code.

Messages are shown to callers and written to logs, so they never contain a
secret (private key, mnemonic, token, master key).
"""

from __future__ import annotations


class ChainkeysError(Exception):
    status: int = 500
    code: str = "internal_error"
    message: str = "internal error"

    def __init__(self, message: str | None = None, *, code: str | None = None) -> None:
        self.message = message or self.message
        if code is not None:
            self.code = code
        super().__init__(self.message)


class BadRequest(ChainkeysError):
    status, code, message = 400, "bad_request", "bad request"


class InvalidJSON(BadRequest):
    code, message = "invalid_json", "request body is not valid JSON"


class Unauthorized(ChainkeysError):
    status, code, message = 401, "unauthorized", "missing, unknown or revoked token"


class NotFound(ChainkeysError):
    status, code, message = 404, "not_found", "not found"


class AccountNotFound(NotFound):
    code, message = "account_not_found", "no such account"


class MethodNotAllowed(ChainkeysError):
    status, code, message = 405, "method_not_allowed", "method not allowed"


class Conflict(ChainkeysError):
    status, code, message = 409, "conflict", "conflict"


class AccountExists(Conflict):
    code, message = "account_exists", "an account with this name already exists"


class PayloadTooLarge(ChainkeysError):
    status, code, message = 413, "payload_too_large", "request body is too large"


class UnsupportedMediaType(ChainkeysError):
    status, code, message = 415, "unsupported_media_type", "send Content-Type: application/json"


class RateLimited(ChainkeysError):
    status, code, message = 429, "rate_limited", "too many requests"

    def __init__(self, message: str | None = None, *, retry_after: int = 1) -> None:
        super().__init__(message)
        self.headers = {"Retry-After": str(max(1, retry_after))}


class StorageUnavailable(ChainkeysError):
    status, code, message = 503, "storage_unavailable", "storage is unavailable; try again"


class StartupError(ChainkeysError):
    """The service must not start (wrong master key, old schema, …)."""

    code = "startup_error"
