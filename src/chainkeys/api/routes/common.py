"""Small pieces every route module uses: JSON responses, shared parameters, deps."""

from __future__ import annotations

from typing import Any

import msgspec
from litestar import Response
from litestar.di import Provide

from chainkeys.api.auth import principal

_encoder = msgspec.json.Encoder()
JSON = "application/json"
ERRORS_AUTH = ("401", "403", "429", "500", "503")
DEPENDENCIES = {"principal": Provide(principal)}

CURSOR = {"name": "cursor", "in": "query", "required": False, "schema": {"type": "string"}}
NAME = {
    "name": "accountName",
    "in": "path",
    "required": True,
    "description": "the account name: its address (EOS: its account name)",
    "schema": {"type": "string", "maxLength": 100},
}


def limit_param(maximum: int) -> dict[str, Any]:
    return {
        "name": "limit",
        "in": "query",
        "required": False,
        "schema": {"type": "integer", "minimum": 1, "maximum": maximum},
    }


def ok(body: Any, headers: dict[str, str] | None = None) -> Response[bytes]:
    """A msgspec Struct as the 200 JSON response."""
    return Response(_encoder.encode(body), media_type=JSON, headers=headers)
