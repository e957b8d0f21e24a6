"""The OpenAPI 3.1 document, generated from the routes the app really serves.

Each route's methods carry a `Doc` (api/doc.py) naming the msgspec Structs the
handler decodes and encodes; paths, methods and the scope each method requires
come from the routes themselves (api/routes/common.py), and the schemas from
msgspec. Nothing here is written beside the routes.
"""

from __future__ import annotations

import typing
from collections.abc import Iterable
from typing import Any, Final

import msgspec
from starlette.routing import Route

from chainkeys import __version__
from chainkeys.api.approval_schemas import APPROVAL_EXAMPLE, ApprovalResponse
from chainkeys.api.auth import AUTHENTICATED, scope_phrase
from chainkeys.api.body import TEXT_PATTERN, together
from chainkeys.api.doc import Doc, links
from chainkeys.api.params import Param
from chainkeys.api.routes.common import ops_of
from chainkeys.api.schemas import ErrorBody
from chainkeys.chains.tx.fields import COINS_PATTERN

REF = "#/components/schemas/{name}"
ERRORS = {
    "400": "bad input: malformed JSON, unknown field or network, invalid key, name or request",
    "401": "missing, unknown, expired or revoked token",
    "403": "the token lacks the scope this route needs, or a policy or the co-signer refused",
    "404": "not found in the caller's tenant (another tenant's is a 404 too)",
    "408": "the request body did not arrive in time",
    "409": "conflict: the name is taken in the caller's tenant, or the state does not allow it",
    "413": "request body too large",
    "415": "request body is not JSON",
    "423": "frozen: a freeze holds over this tenant or account (GET /freezes)",
    "429": "rate limited",
    "500": "internal error",
    "503": "storage unavailable, or (signing) the co-signer gave no valid answer",
}
RETRY_AFTER = {
    "Retry-After": {
        "description": "seconds until this token may call again",
        "schema": {"type": "integer", "minimum": 1},
    }
}


def _name(t: Any) -> str:
    """A component's name, as msgspec's schema_components names it: a generic Struct
    with its arguments (`Envelope[Wallet]` is `Envelope_Wallet_`)."""
    args = typing.get_args(t)
    if args:
        return f"{typing.get_origin(t).__name__}_{'_'.join(_name(a) for a in args)}_"
    return str(t.__name__)


def _ref(t: Any) -> dict[str, Any]:
    """A component by reference; a union of tagged Structs (a body per family) as oneOf
    with its discriminator."""
    if typing.get_origin(t) is typing.Union:
        members = typing.get_args(t)
        tag = members[0].__struct_config__.tag_field
        return {
            "oneOf": [_ref(m) for m in members],
            "discriminator": {
                "propertyName": tag,
                "mapping": {m.__struct_config__.tag: _ref(m)["$ref"] for m in members},
            },
        }
    return {"$ref": REF.format(name=_name(t))}


def _content(t: type, examples: dict[str, Any] | None = None) -> dict[str, Any]:
    media: dict[str, Any] = {"schema": _ref(t)}
    if examples:
        media["examples"] = {k: {"value": v} for k, v in examples.items()}
    return {"application/json": media}


def _errors(codes: Iterable[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for code in codes:
        if code == "202":
            out[code] = {
                "description": "the tenant's policy asks people to approve this "
                "first: nothing is signed yet; the approval request",
                "content": _content(ApprovalResponse, {"pending": APPROVAL_EXAMPLE}),
            }
            continue
        out[code] = {"description": ERRORS[code], "content": _content(ErrorBody)}
        if code == "429":
            out[code]["headers"] = RETRY_AFTER
    return out


APPROVAL_LINKS = links(
    ["getApproval", "approveApproval", "rejectApproval", "cancelApproval"],
    id="$response.body#/data/id",
)


def _links(found: dict[str, dict[str, str]]) -> dict[str, Any]:
    return {op: {"operationId": op, "parameters": params} for op, params in found.items()}


def _statuses(doc: Doc) -> list[str]:
    """The route's error statuses, with 400 wherever a parameter is checked (api/params.py:
    a value that breaks its type is a 400 before the handler runs)."""
    codes = set(doc.errors)
    if any(isinstance(p, Param) for p in doc.parameters):
        codes.add("400")
    return sorted(codes)


def _operation(doc: Doc, scope: str | None, max_body: int | None = None) -> dict[str, Any]:
    description = doc.description
    if scope == AUTHENTICATED:
        description = f"Any live token. {description}".strip()
    elif scope is not None:
        description = f"Needs a token with the {scope_phrase(scope)}. {description}".strip()
    op: dict[str, Any] = {
        "operationId": doc.operation_id,
        "summary": doc.summary,
        "tags": [doc.tag],
        "responses": {
            doc.status: {
                "description": doc.summary,
                "content": doc.media or _content(doc.response, doc.response_examples),
            },
            **_errors(_statuses(doc)),
        },
    }
    if doc.links:
        op["responses"][doc.status]["links"] = _links(doc.links)
    if "202" in op["responses"]:  # an approval opened: its own operations follow
        op["responses"]["202"]["links"] = _links(APPROVAL_LINKS)
    if description:
        op["description"] = description
    if doc.parameters:
        op["parameters"] = [p.doc() if isinstance(p, Param) else p for p in doc.parameters]
    if doc.request is not None:
        op["requestBody"] = {
            "required": doc.request_required,
            "content": _content(doc.request, doc.examples),
        }
        if max_body is not None:  # a route's own cap (Op.max_body), above the server's
            op["requestBody"]["description"] = (
                f"At most {max_body:,} bytes: this operation's own cap (every other "
                "operation's is the server's CHAINKEYS_MAX_BODY_BYTES, 16 KiB by "
                "default); a larger body is a 413."
            )
            op["requestBody"]["x-max-body-bytes"] = max_body
    if scope is None:
        op["security"] = []
    return op


DECIMAL: Final = {"type": "string", "format": "decimal"}


def _decimals_as_read(node: Any) -> Any:
    """msgspec describes a Decimal as a string (what it writes) and ignores a Meta's
    schema on one, but it reads a JSON number too, exactly (Core's amounts are
    numbers): say so, or a client generated from the document refuses Core's own
    request shape."""
    if node == DECIMAL:  # Core's coin amounts, the one Decimal of the API
        return {
            "anyOf": [
                {"type": "number", "minimum": 0},
                {"type": "string", "pattern": COINS_PATTERN},
            ]
        }
    if isinstance(node, dict):
        return {k: _decimals_as_read(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_decimals_as_read(v) for v in node]
    return node


def _storable_text(node: Any) -> Any:
    """Every string without a pattern, enum or const of its own gets body.TEXT_PATTERN:
    the NUL half of the rule every route applies to every text before its decoder runs
    (no NUL, no unpaired surrogate), said where a client can read it."""
    if isinstance(node, list):
        return [_storable_text(v) for v in node]
    if not isinstance(node, dict):
        return node
    out = {k: _storable_text(v) for k, v in node.items()}
    if out.get("type") == "string" and not {"pattern", "enum", "const", "format"} & out.keys():
        out["pattern"] = TEXT_PATTERN
    return out


def ecma_patterns(node: Any) -> Any:
    """Patterns as JSON Schema reads them. The code's end with `\\Z`: Python's `$` (what
    msgspec validates with) also matches before a final newline, so `^[a-z]+$` took
    "ok\\n" where the document refused it; JSON Schema's `$` is the end, as `\\Z` is."""
    if isinstance(node, list):
        return [ecma_patterns(v) for v in node]
    if not isinstance(node, dict):
        return node
    out = {k: ecma_patterns(v) for k, v in node.items()}
    pattern = out.get("pattern")
    if isinstance(pattern, str) and pattern.endswith("\\Z"):
        out["pattern"] = pattern[:-2] + "$"
    return out


def _listed(t: Any) -> set[Any]:
    """The Structs a request lists in a field (`list[A | B]`: a batch's items), so their
    rules between fields (`together`) are stated as the top-level requests' are."""
    found: set[Any] = set()
    for field in getattr(t, "__struct_fields__", ()):
        hint = typing.get_type_hints(t, include_extras=True).get(field)
        while typing.get_origin(hint) is typing.Annotated:
            hint = typing.get_args(hint)[0]
        if typing.get_origin(hint) is not list:
            continue
        (member,) = typing.get_args(hint)
        union = typing.get_origin(member) is typing.Union
        members = typing.get_args(member) if union else (member,)
        found.update(m for m in members if isinstance(m, type) and issubclass(m, msgspec.Struct))
    return found


def build_openapi(routes: Iterable[Route]) -> dict[str, Any]:
    paths: dict[str, dict[str, Any]] = {}
    types: set[Any] = {ErrorBody, ApprovalResponse}
    for route in routes:
        for method, op in ops_of(route).items():
            doc = op.doc
            if not isinstance(doc, Doc):
                continue
            types.add(doc.response)
            if typing.get_origin(doc.request) is typing.Union:
                types.update(typing.get_args(doc.request))
            elif doc.request is not None:
                types.add(doc.request)
                types.update(_listed(doc.request))
            operation = _operation(doc, op.scope, op.max_body)
            paths.setdefault(route.path, {})[method.lower()] = operation
    types |= {n for t in list(types) if (rules := together(t)) for n in rules.types()}
    _, components = msgspec.json.schema_components(sorted(types, key=_name), ref_template=REF)
    for t in types:
        rules = together(t)
        if rules is not None:
            schema = components[_name(t)]
            schema["allOf"] = rules.schema(schema["properties"], _ref)
    components = _storable_text(_decimals_as_read(components))
    document: dict[str, Any] = ecma_patterns(
        {
            "openapi": "3.1.0",
            "info": {
                "title": "chainkeys",
                "version": __version__,
                "description": "Multi-chain account (key) custody: Cosmos, Dogecoin, EOS, "
                "Litecoin.",
            },
            "paths": dict(sorted(paths.items())),
            "components": {
                "schemas": components,
                "securitySchemes": {
                    "token": {
                        "type": "apiKey",
                        "in": "header",
                        "name": "Authorization",
                        "description": "the token, alone or as `Bearer <token>`",
                    }
                },
            },
            "security": [{"token": []}],
        }
    )
    return document
