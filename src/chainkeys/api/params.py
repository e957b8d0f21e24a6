"""Path, query and header parameters, each declared once as a msgspec type.

A parameter's type (with its `Meta`: pattern, lengths, bounds, enum) is both what the
OpenAPI document says (`doc`, through msgspec's JSON Schema) and what the route checks
(`read`, through `msgspec.convert` of the same type): a generated client validates
what the service validates, and the two cannot drift. A rule a schema cannot hold (an
address's checksum, a cursor only this service can make) is checked by the service
behind it; the parameter's `format` names it (the fuzzer in tests/fuzz/test_fuzz.py knows
how to make valid ones) and its description says so.

A parameter given with a value that breaks its type is a 400 naming it
(`invalid_<name>`), before any handler runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Annotated, Any, Literal, get_args, get_origin

import msgspec
from msgspec import Meta
from starlette.requests import Request

from chainkeys.api.body import query
from chainkeys.approvals.repository import STATES
from chainkeys.chains.hd import VERSIONS
from chainkeys.chains.registry import FAMILIES
from chainkeys.errors import BadRequest

Where = Literal["path", "query", "header"]


@dataclass(frozen=True, slots=True)
class Param:
    """One parameter: where it is, its type, and the code of its 400."""

    name: str
    where: Where
    type: Any
    description: str = ""
    required: bool = False
    code: str = ""  # default: invalid_<name>

    def doc(self) -> dict[str, Any]:
        """The OpenAPI Parameter Object."""
        out: dict[str, Any] = {
            "name": self.name,
            "in": self.where,
            "required": self.required or self.where == "path",
            "schema": msgspec.json.schema(self.type),
        }
        if self.description:
            out["description"] = self.description
        return out

    def read(self, request: Request) -> Any:
        """The value as its type (None when absent), or a 400 naming the parameter."""
        if self.where == "path":
            raw: str | None = request.path_params.get(self.name)
        elif self.where == "query":
            raw = query(request).get(self.name)
        else:
            raw = request.headers.get(self.name)
        if raw is None:
            if self.required:
                raise BadRequest(f"{self.name} is required", code=self.error_code)
            return None
        if _whole(self.type) and not (raw.isascii() and raw.isdigit()):  # not 1e3, 5.0, -1
            what = self.description or "a whole number"
            raise BadRequest(f"invalid {self.name}: expected {what}", code=self.error_code)
        try:
            return msgspec.convert(raw, self.type, strict=False)
        except msgspec.ValidationError as exc:  # its text, or ours: never the value
            reason = f"expected {self.description}" if self.description else str(exc)
            raise BadRequest(f"invalid {self.name}: {reason}", code=self.error_code) from None

    @property
    def error_code(self) -> str:
        return self.code or f"invalid_{self.name.lower().replace('-', '_')}"


def _whole(t: Any) -> bool:
    """Whether the type is an int (a query's text must then be digits only)."""
    return t is int or (get_origin(t) is Annotated and get_args(t)[0] is int)


def enum(values: Any) -> Any:
    """A Literal of these strings (JSON Schema: an enum)."""
    return Literal[tuple(values)]


@cache
def limit(maximum: int) -> Param:
    return Param(
        "limit",
        "query",
        Annotated[int, Meta(ge=1, le=maximum)],
        f"how many to answer (1 to {maximum})",
    )


CURSOR = Param(
    "cursor",
    "query",
    Annotated[
        str,
        Meta(pattern=r"^([A-Za-z0-9_-]{22})?\Z", extra_json_schema={"format": "chainkeys-cursor"}),
    ],
    "the previous page's next_cursor (only this service makes them: any other is refused); "
    "empty or absent: the first page",
)


def account_name(family: str) -> Param:
    """An account's name in its family's path: its address (EOS: its account name), of
    the shape the family declares (chains/ `names`)."""
    names = FAMILIES[family].names
    what = names.description
    if names.checksummed:
        what += " (its checksum is checked too: a name that fails it is a 400)"
    meta = Meta(
        pattern=names.pattern,
        max_length=90,
        extra_json_schema={"format": f"chainkeys-{family}-name"},
    )
    return Param("accountName", "path", Annotated[str, meta], what, code="invalid_account_name")


ACCOUNT_NAMES = {family: account_name(family) for family in FAMILIES}


def network(family: str) -> Param:
    networks = sorted(FAMILIES[family].networks)
    return Param(
        "network",
        "query",
        enum(networks),
        f"only accounts on this network: {', '.join(networks)}",
        code="unknown_network",
    )


PREFIX = Param(
    "prefix",
    "query",
    Annotated[str, Meta(pattern=r"^[A-Za-z0-9.]{1,100}\Z")],
    "only accounts whose name (address) starts with this, exactly (1 to 100 of the "
    "characters names are made of)",
)
IDEMPOTENCY_KEY = Param(
    "Idempotency-Key",
    "header",
    Annotated[str, Meta(pattern=r"^[!-~]{1,255}\Z")],
    "repeat a create safely: the same key and body return the first response (24 h); the "
    "same key with another body is a 409",
)

_MS = Annotated[int, Meta(ge=0, le=10**15 - 1)]
SINCE = Param("since", "query", _MS, "only events at or after this time (ms since the epoch)")
UNTIL = Param("until", "query", _MS, "only events before this time (ms since the epoch)")
AUDIT_FILTERS = (
    Param(
        "action",
        "query",
        Annotated[str, Meta(pattern=r"^[a-z0-9._-]{0,64}\Z")],
        "only this action (create, import, delete, sign, export, wallet.export, …); "
        "empty: every action",
    ),
    Param("family", "query", enum(sorted(FAMILIES)), "only this family's events"),
    Param(
        "account",
        "query",
        Annotated[str, Meta(pattern=r"^[A-Za-z0-9._-]{0,100}\Z")],
        "only this account's events (its name; a wallet's id); empty: every account",
    ),
    Param(
        "outcome",
        "query",
        Annotated[str, Meta(pattern=r"^(?:[a-z][a-z0-9_]{0,63})?\Z")],
        "ok, refused (anything but ok) or one error code; empty: every outcome",
    ),
)
EXPORT_FORMAT = Param(
    "format",
    "query",
    enum(["csv", "jsonl"]),
    "CSV (no cell starts a formula) or JSON Lines; default csv",
)

APPROVAL_STATE = Param("state", "query", enum(STATES), "only requests in this state")
APPROVAL_ID = Param(
    "id",
    "path",
    Annotated[str, Meta(min_length=1, max_length=40)],
    "the approval request's id (apr_…)",
)
WALLET = Param(
    "wallet",
    "path",
    Annotated[str, Meta(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}\Z")],
    "the wallet's id (wal_…) or name",
)
MULTISIG_ID = Param(
    "multisig",
    "path",
    Annotated[str, Meta(min_length=1, max_length=32)],
    "the HD multisig's id (wms_…)",
)
XPUB = (
    Param("family", "query", enum(sorted(FAMILIES)), "the family", required=True),
    Param(
        "network",
        "query",
        enum(sorted({n for f in FAMILIES.values() for n in f.networks})),
        "one of the family's networks (GET /networks); default: the family's",
        code="unknown_network",
    ),
    Param(
        "address_type",
        "query",
        enum(["p2pkh", "p2sh-p2wpkh", "p2wpkh"]),
        "Litecoin only: p2wpkh (default), p2sh-p2wpkh, p2pkh",
    ),
    Param(
        "account", "query", Annotated[int, Meta(ge=0, le=2**31 - 1)], "BIP44 account (default 0)"
    ),
    Param(
        "format",
        "query",
        enum(sorted(VERSIONS)),
        "one that fits the family and address type: xpub, Ltub, ypub, zpub, Mtub "
        "(Litecoin), dgub (Dogecoin), tpub (testnets)",
    ),
)
