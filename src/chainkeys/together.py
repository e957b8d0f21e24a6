"""Rules between a request's fields, as data.

A rule a field's own type cannot hold ("private_key or mnemonic, not both") is declared
once as a `Together`, which a body type carries as its `together` attribute: the body's
decoder checks it (api/body.py) and the OpenAPI document states it in JSON Schema
(api/openapi.py), so a generated client validates what the service validates.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from chainkeys.errors import BadRequest
from chainkeys.jsonvalues import convert


@dataclass(frozen=True, slots=True)
class Together:
    """Rules between a body's fields: api/body.py `decode` checks them (`check`), the
    OpenAPI document states them (`schema`). A field given as null counts as absent.

    `exclusive`: pairs that may not both be given; `one_of`: pairs of which exactly one
    is given; `requires`: pairs (a, b) where a is
    given only with b; `only_when`: (a, b, v), a is given only when b is v (or absent
    with v its default); `selects`: (a, b, types), b is of the type a's value picks
    (a policy dry run: the sign kind picks its request's type)."""

    exclusive: tuple[tuple[str, str], ...] = ()
    one_of: tuple[tuple[str, str], ...] = ()
    requires: tuple[tuple[str, str], ...] = ()
    only_when: tuple[tuple[str, str, Any], ...] = ()
    selects: tuple[tuple[str, str, Mapping[str, type]], ...] = ()

    def check(self, value: Any) -> None:
        for a, b in self.exclusive:
            if getattr(value, a) is not None and getattr(value, b) is not None:
                raise BadRequest(f"send {a} or {b}, not both", code="invalid_input")
        for a, b in self.one_of:
            if (getattr(value, a) is None) == (getattr(value, b) is None):
                raise BadRequest(f"send {a} or {b}, one of them", code="invalid_input")
        for a, b in self.requires:
            if getattr(value, a) is not None and getattr(value, b) is None:
                raise BadRequest(f"{a} goes with {b}", code="invalid_input")
        for a, b, v in self.only_when:
            if getattr(value, a) is not None and getattr(value, b) != v:
                raise BadRequest(f"{a} goes with {b} {v}", code="invalid_input")
        for a, b, types in self.selects:
            convert(getattr(value, b), types[getattr(value, a)], f"{b}: ")

    def types(self) -> set[type]:
        """The types the rules name (the document holds them as components)."""
        return {t for _, _, types in self.selects for t in types.values()}

    def schema(
        self, properties: dict[str, Any], ref: Callable[[type], dict[str, Any]]
    ) -> list[dict[str, Any]]:
        """The rules as JSON Schema (`allOf` members) for an object of these property
        schemas: given means present and of its schema's non-null kind (said with that
        schema itself, so that a generator that meets the rule still meets the field's
        format); a type named by `ref`."""

        def given(*names: str) -> dict[str, Any]:
            return {
                "required": list(names),
                "properties": {n: _not_null(properties[n]) for n in names},
            }

        out: list[dict[str, Any]] = [{"not": given(a, b)} for a, b in self.exclusive]
        out += [{"oneOf": [given(a), given(b)]} for a, b in self.one_of]
        out += [{"if": given(a), "then": given(b)} for a, b in self.requires]
        out += [
            {"if": given(a), "then": {"properties": {b: {"const": v}}}}
            for a, b, v in self.only_when
        ]
        out += [
            {
                "if": {"required": [a], "properties": {a: {"const": k}}},
                "then": {"properties": {b: ref(t)}},
            }
            for a, b, types in self.selects
            for k, t in sorted(types.items())
        ]
        return out


def _not_null(schema: dict[str, Any]) -> dict[str, Any]:
    """The non-null branch of an optional field's schema (`anyOf: [X, null]`: X)."""
    kinds = [k for k in schema.get("anyOf", ()) if k != {"type": "null"}]
    return kinds[0] if len(kinds) == 1 else {"not": {"type": "null"}}
