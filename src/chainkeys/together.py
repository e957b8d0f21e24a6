"""Rules between a request's fields, as data.

A rule a field's own type cannot hold ("private_key or mnemonic, not both") is declared
once as a `Together`, which a body type carries as its `together` attribute: the body's
decoder checks it (api/body.py) and the OpenAPI document states it in JSON Schema
(api/openapi.py), so a generated client validates what the service validates.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from chainkeys.errors import BadRequest


@dataclass(frozen=True, slots=True)
class Together:
    """Rules between a body's fields: api/body.py `decode` checks them (`check`), the
    OpenAPI document states them (`schema`). A field given as null counts as absent.

    `exclusive`: pairs that may not both be given; `requires`: pairs (a, b) where a is
    given only with b."""

    exclusive: tuple[tuple[str, str], ...] = ()
    requires: tuple[tuple[str, str], ...] = ()

    def check(self, value: Any) -> None:
        for a, b in self.exclusive:
            if getattr(value, a) is not None and getattr(value, b) is not None:
                raise BadRequest(f"send {a} or {b}, not both", code="invalid_input")
        for a, b in self.requires:
            if getattr(value, a) is not None and getattr(value, b) is None:
                raise BadRequest(f"{a} goes with {b}", code="invalid_input")

    def schema(self, properties: dict[str, Any]) -> list[dict[str, Any]]:
        """The rules as JSON Schema (`allOf` members) for an object of these property
        schemas: given means present and of its schema's non-null kind (said with that
        schema itself, so that a generator that meets the rule still meets the field's
        format)."""

        def given(*names: str) -> dict[str, Any]:
            return {"required": list(names),
                    "properties": {n: _not_null(properties[n]) for n in names}}  # fmt: skip

        out: list[dict[str, Any]] = [{"not": given(a, b)} for a, b in self.exclusive]
        out += [{"if": given(a), "then": given(b)} for a, b in self.requires]
        return out


def _not_null(schema: dict[str, Any]) -> dict[str, Any]:
    """The non-null branch of an optional field's schema (`anyOf: [X, null]`: X)."""
    kinds = [k for k in schema.get("anyOf", ()) if k != {"type": "null"}]
    return kinds[0] if len(kinds) == 1 else {"not": {"type": "null"}}
