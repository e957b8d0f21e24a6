"""One domain error hierarchy: a message for a person and a machine code, no HTTP.

Services, the store and the vault raise these; `api/errors.py` holds the one
table from error class to HTTP status, and the CLI prints the message. Messages
are shown to callers and written to logs, so they never contain a secret
(private key, mnemonic, passphrase, token, master key, PIN).
"""

from __future__ import annotations


class ChainkeysError(Exception):
    code: str = "internal_error"
    message: str = "internal error"

    def __init__(self, message: str | None = None, *, code: str | None = None) -> None:
        self.message = message or self.message
        if code is not None:
            self.code = code
        super().__init__(self.message)


class BadRequest(ChainkeysError):
    code, message = "bad_request", "bad request"


class Unauthorized(ChainkeysError):
    code, message = "unauthorized", "missing, unknown or revoked token"


class Forbidden(ChainkeysError):
    """The caller is known but may not do this (a missing scope, export disabled)."""

    code, message = "forbidden", "this token may not do that"


class PolicyDenied(ChainkeysError):
    """The tenant's signing policy does not allow this request."""

    code, message = "policy_denied", "the signing policy does not allow this request"


class CosignerRejected(ChainkeysError):
    """The tenant's co-signer (CHAINKEYS_COSIGNER_URL) answered `reject`: nothing was
    signed, no key opened (signing/cosigner.py). Its reason is in the message."""

    code, message = "cosigner_rejected", "the co-signer rejected this request; nothing was signed"


class Frozen(ChainkeysError):
    """An emergency freeze holds over this tenant or account (freezes/service.py):
    nothing is signed, exported or approved in its scope until it ends or is lifted."""

    code, message = "frozen", "frozen: nothing is signed, exported or approved here now"


class NotFound(ChainkeysError):
    code, message = "not_found", "not found"


class AccountNotFound(NotFound):
    code, message = "account_not_found", "no such account"


class Conflict(ChainkeysError):
    code, message = "conflict", "conflict"


class AccountExists(Conflict):
    code, message = "account_exists", "an account with this name already exists"


class RateLimited(ChainkeysError):
    code, message = "rate_limited", "too many requests"

    def __init__(self, message: str | None = None, *, retry_after: int = 1) -> None:
        super().__init__(message)
        self.retry_after = max(1, retry_after)


class KeyMismatch(ChainkeysError):
    """The key opened for an account is not the key of its stored public key: the
    stored row is damaged or was altered. Answered as an internal error (500)."""

    code = "key_mismatch"
    message = "this account's stored key does not match its public key; nothing was signed"


class IntegrityFailure(ChainkeysError):
    """A row that authorizes something failed its MAC: the database was written by
    someone without the master key (vault/integrity.py). Never used; answered as an
    internal error (500), logged and counted."""

    code = "integrity_failure"
    message = "a stored record failed its integrity check; nothing was done"


class StorageUnavailable(ChainkeysError):
    code, message = "storage_unavailable", "storage is unavailable; try again"


class StorageFull(StorageUnavailable):
    """The database's disk is full (SQLite's SQLITE_FULL, ENOSPC): nothing of the write
    was kept; reads go on, and writes succeed again once space is freed."""

    code, message = "storage_full", "the database's disk is full; nothing was written"


class Unavailable(ChainkeysError):
    """This server cannot do it now; another replica (or this one, restarted) can."""

    code, message = "unavailable", "this server cannot do this now; try again"


class SealFenced(Unavailable):
    """The barrier may not seal: its view of the key ring is stale and cannot be read,
    or its key was retired and it cannot learn the current one (vault/barrier.py)."""

    code = "seal_fenced"


class Sealed(Unavailable):
    """The master key is held by Shamir shares and this process has not been given
    enough of them yet (or was sealed again): it answers nothing but the unseal."""

    code = "sealed"
    message = (
        "sealed: this server waits for its unseal shares "
        "(`chainkeys operator unseal --url URL`, POST /sys/unseal)"
    )


class AuditUnavailable(Unavailable):
    """CHAINKEYS_AUDIT_REQUIRED: no audit device that confirms delivery is healthy, so
    the request is refused before anything is done (audit/devices.py)."""

    code = "audit_unavailable"
    message = "no audit device can take this request's event now; nothing was done, try again"


class CosignerUnavailable(Unavailable):
    """The co-signer gave no valid answer (a timeout, a status other than 200, an
    unsigned or stale answer, another request's id, malformed JSON, a redirect): nothing
    was signed, no key opened; the same request may be sent again."""

    code = "cosigner_unavailable"
    message = "the co-signer gave no valid answer; nothing was signed, try again"


class KeyUnavailable(Unavailable):
    """A value is sealed with a master key this process does not hold."""

    code = "key_unavailable"


class StartupError(ChainkeysError):
    """The service must not start (wrong master key, old schema, …)."""

    code = "startup_error"
