"""The OpenAPI 3.1 document, generated from the structs the handlers really use."""

from __future__ import annotations

from typing import Any

import msgspec

from chainkeys import __version__
from chainkeys.api import schemas as s
from chainkeys.api.routes import SHAPES
from chainkeys.chains.registry import FAMILIES

REF = "#/components/schemas/{name}"

ERRORS = {
    "400": "bad input: malformed JSON, unknown field or network, invalid key or account name",
    "401": "missing, unknown or revoked token",
    "404": "no such account in the caller's tenant",
    "409": "an account with this name already exists in the caller's tenant",
    "413": "request body too large",
    "415": "request body is not JSON",
    "429": "rate limited",
    "500": "internal error",
    "503": "storage unavailable",
}


IDEMPOTENCY_KEY = {
    "name": "Idempotency-Key",
    "in": "header",
    "required": False,
    "description": "repeat a create safely: the same key and body return the first response "
    "(24 h); the same key with another body is a 409",
    "schema": {"type": "string", "minLength": 1, "maxLength": 255, "pattern": "^[!-~]+$"},
}


def _ref(t: type) -> dict[str, str]:
    return {"$ref": REF.format(name=t.__name__)}


def _ok(t: type, description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": _ref(t)}}}


RETRY_AFTER = {
    "Retry-After": {
        "description": "seconds until this token may call again",
        "schema": {"type": "integer", "minimum": 1},
    }
}


def _errors(*codes: str) -> dict[str, Any]:
    out = {c: _ok(s.ErrorBody, ERRORS[c]) for c in codes}
    if "429" in out:
        out["429"]["headers"] = RETRY_AFTER
    return out


def _limit(maximum: int) -> dict[str, Any]:
    return {
        "name": "limit",
        "in": "query",
        "required": False,
        "schema": {"type": "integer", "minimum": 1, "maximum": maximum},
    }


def _operations(family: str, list_max_limit: int) -> dict[str, Any]:
    shape = SHAPES[family]
    title = family.capitalize()
    name_param = {
        "name": "accountName",
        "in": "path",
        "required": True,
        "description": "the account name: its address (EOS: its account name)",
        "schema": {"type": "string", "maxLength": 100},
    }
    auth = ("401", "429", "500", "503")
    paths: dict[str, Any] = {
        f"/{family}": {
            "get": {
                "operationId": f"list{title}Accounts",
                "summary": f"List the caller's {title} accounts",
                "tags": [title],
                "parameters": [
                    _limit(list_max_limit),
                    {
                        "name": "cursor",
                        "in": "query",
                        "required": False,
                        "schema": {"type": "string"},
                    },
                ],
                "responses": {"200": _ok(shape.list_response, "accounts"), **_errors("400", *auth)},
            },
            "post": {
                "operationId": f"create{title}Account",
                "summary": f"Create (generate) or import a {title} account",
                "tags": [title],
                "parameters": [IDEMPOTENCY_KEY],
                "requestBody": {
                    "required": False,
                    "content": {"application/json": {"schema": _ref(s.CREATE_REQUESTS[family])}},
                },
                "responses": {
                    "200": _ok(shape.account_response, "the new account"),
                    **_errors("400", "409", "413", "415", *auth),
                },
            },
        },
        f"/{family}/{{accountName}}": {
            "get": {
                "operationId": f"get{title}Account",
                "summary": f"Look up one {title} account by name",
                "tags": [title],
                "parameters": [name_param],
                "responses": {
                    "200": _ok(shape.account_response, "the account"),
                    **_errors("400", "404", *auth),
                },
            }
        },
    }
    if shape.deletable:
        paths[f"/{family}/{{accountName}}"]["delete"] = {
            "operationId": f"delete{title}Account",
            "summary": f"Delete one {title} account",
            "tags": [title],
            "parameters": [name_param],
            "responses": {
                "200": _ok(s.MessageResponse, "deleted"),
                **_errors("400", "404", *auth),
            },
        }
    return paths


def build_openapi(list_max_limit: int = 1000) -> dict[str, Any]:
    types: list[Any] = [s.ErrorBody, s.MessageResponse, s.NetworksResponse, s.AuditResponse]
    types += list(s.CREATE_REQUESTS.values())
    types += [shape.account_response for shape in SHAPES.values()]
    types += [shape.list_response for shape in SHAPES.values()]
    _, components = msgspec.json.schema_components(types, ref_template=REF)
    paths: dict[str, Any] = {}
    for family in FAMILIES:
        paths.update(_operations(family, list_max_limit))
    public: dict[str, Any] = {"security": []}
    paths["/networks"] = {
        "get": {
            "operationId": "listNetworks",
            "summary": "Families, their networks and defaults",
            "tags": ["Service"],
            **public,
            "responses": {"200": _ok(s.NetworksResponse, "networks"), **_errors("500")},
        }
    }
    paths["/audit"] = {
        "get": {
            "operationId": "listAudit",
            "summary": "The caller's tenant's audit events (creates, imports, deletes, tokens)",
            "tags": ["Service"],
            "parameters": [
                {
                    "name": "since",
                    "in": "query",
                    "required": False,
                    "schema": {"type": "integer", "minimum": 0},
                },
                _limit(list_max_limit),
                {"name": "cursor", "in": "query", "required": False, "schema": {"type": "string"}},
            ],
            "responses": {
                "200": _ok(s.AuditResponse, "events"),
                **_errors("400", "401", "429", "500", "503"),
            },
        }
    }
    paths["/healthz"] = {
        "get": {
            "operationId": "health",
            "summary": "Liveness and storage check",
            "tags": ["Service"],
            **public,
            "responses": {"200": _ok(s.MessageResponse, "healthy"), **_errors("500", "503")},
        }
    }
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "chainkeys",
            "version": __version__,
            "description": "Multi-chain account (key) custody: Cosmos, Dogecoin, EOS, Litecoin.",
        },
        "paths": paths,
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
