"""`chainkeys --url`: the daily commands against a running server, over its HTTP API.

A shamir store asks for K shares whenever the CLI opens it; with `--url` the daily
commands (policies, governed changes and votes, freezes, the audit log) never open it,
so shares are needed only to unseal, rekey or move keys (DESIGN.md "Governance"). The
server does what it does for any client: the admin token decides the tenant and what
may be done, every refusal is the server's and audited there.

The token is read from a file (`--token-file`, CHAINKEYS_TOKEN_FILE), never taken on
the command line, where `ps`, shell history and CI logs would keep it. TLS is verified
(the system's trust store, or `--ca-file`); redirects are not followed.
"""

from __future__ import annotations

import ssl
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import msgspec
import typer

if TYPE_CHECKING:  # imported by the first call: a command that makes none starts faster
    import httpx

# Commands that always need the store (or the master key and its shares): refused under
# --url by the root callback, before they ask for anything.
STORE_GROUPS = frozenset({"serve", "init", "db", "key", "hsm", "operator", "integrity"})
TIMEOUT_SECONDS = 30.0


def _stop(message: str, status: int = 1) -> NoReturn:
    typer.echo(f"chainkeys: {message}", err=True)
    raise typer.Exit(status)


@dataclass(frozen=True, slots=True)
class Remote:
    """Where the running server is and how to reach it (the global options)."""

    url: str
    token_file: Path | None
    ca_file: Path | None

    def _token(self) -> str:
        if self.token_file is None:
            _stop(
                "--url needs an admin token: give --token-file PATH or set "
                "CHAINKEYS_TOKEN_FILE (a token is never taken on the command line)",
                2,
            )
        try:
            token = self.token_file.read_text().strip()
        except (OSError, UnicodeDecodeError) as exc:
            reason = getattr(exc, "strerror", None) or "not text"
            _stop(f"cannot read the token file {self.token_file}: {reason}", 2)
        if not token or not token.isascii() or not token.isprintable() or " " in token:
            _stop(f"the token file {self.token_file} holds no token (one line, the token)", 2)
        return token

    def _verify(self) -> ssl.SSLContext:
        try:
            return ssl.create_default_context(
                cafile=str(self.ca_file) if self.ca_file is not None else None
            )
        except (OSError, ssl.SSLError) as exc:
            _stop(f"cannot use the CA file {self.ca_file}: {exc}", 2)

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        params: dict[str, str | int] | None = None,
        hints: dict[str, str] | None = None,
    ) -> Any:
        """The `data` of the server's envelope, or one line naming the server's code
        and message (exit 1; `hints`: what to do instead, by code), or why the server could
        not be reached (exit 2)."""
        import httpx

        headers = {"Authorization": f"Bearer {self._token()}"}
        try:
            with httpx.Client(
                base_url=self.url.rstrip("/"),
                verify=self._verify(),
                timeout=TIMEOUT_SECONDS,
                follow_redirects=False,
                trust_env=False,  # no proxy from the environment sees the token
            ) as client:
                response = client.request(
                    method,
                    path,
                    headers=headers,
                    params=params,
                    content=None if body is None else msgspec.json.encode(body),
                )
        except httpx.InvalidURL:
            _stop(f"--url {self.url!r} is not a URL (e.g. https://chainkeys.example:8443)", 2)
        except httpx.UnsupportedProtocol:
            _stop(f"--url {self.url!r}: give an http:// or https:// URL", 2)
        except httpx.TimeoutException:
            _stop(f"{self.url} did not answer within {TIMEOUT_SECONDS:.0f} s", 2)
        except httpx.HTTPError as exc:
            _stop(f"cannot reach {self.url}: {_reason(exc)}", 2)
        return _data_of(response, hints or {})


def _reason(exc: httpx.HTTPError) -> str:
    """The innermost cause's words (a refused connection, a TLS certificate that does
    not verify), never the request: its headers hold the token."""
    cause: BaseException = exc
    while cause.__cause__ is not None or cause.__context__ is not None:
        cause = cause.__cause__ or cause.__context__  # type: ignore[assignment]
    return str(cause) or type(cause).__name__


def _data_of(response: httpx.Response, hints: dict[str, str]) -> Any:
    try:
        envelope = msgspec.json.decode(response.content)
    except msgspec.DecodeError:
        envelope = None
    if not isinstance(envelope, dict) or "success" not in envelope:
        where = response.headers.get("location")
        moved = f" to {where}" if where else ""
        _stop(
            f"{response.request.url.host} answered HTTP {response.status_code}{moved}, not "
            "a chainkeys answer: is --url the chainkeys server?",
            2,
        )
    if response.is_success and envelope["success"]:
        return envelope.get("data")
    code = envelope.get("code") or "error"
    hint = f": {hints[code]}" if code in hints else ""
    _stop(f"the server refused ({response.status_code} {code}): {envelope.get('message')}{hint}")


REMOTE: ContextVar[Remote | None] = ContextVar("chainkeys_remote", default=None)


def current() -> Remote | None:
    """The server the command talks to, or None: the command opens the local store."""
    return REMOTE.get()


def use(url: str | None, token_file: Path | None, ca_file: Path | None, command: str) -> None:
    """The root callback's part: remember the server, and refuse at once a command
    that needs the store itself."""
    if url is None:
        if token_file is not None or ca_file is not None:
            typer.echo(
                "chainkeys: note: --token-file and --ca-file are used only with --url "
                "(CHAINKEYS_URL); this command runs on the local store",
                err=True,
            )
        return
    if command in STORE_GROUPS:
        refuse_store(f"`chainkeys {command}`")
    REMOTE.set(Remote(url, token_file, ca_file))


def refuse_store(what: str | None = None) -> NoReturn:
    """Said of anything that would open the store (or ask for shares) under --url."""
    if what is None:
        what = "this command"
    _stop(
        f"{what} needs the store itself (on a shamir store, the shares), so it does not "
        "run with --url: run it without --url where the store is. With --url run the "
        "daily commands: policy show/set/clear/history/test, token create (a change), changes, "
        "freeze list/create, audit",
        2,
    )


def check_tenant(remote: Remote, tenant: str) -> dict[str, Any]:
    """The token decides the tenant on the server: a command naming another tenant is
    refused rather than run on the token's. The token as the server knows it (`GET
    /tokens/self`: tenant, label, scopes, families)."""
    own: dict[str, Any] = remote.call("GET", "/tokens/self")
    if own["tenant"] != tenant:
        _stop(
            f"the token is of tenant {own['tenant']!r}, not {tenant!r}: use a token of {tenant!r}"
        )
    return own
