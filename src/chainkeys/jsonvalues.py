"""JSON values as msgspec types, read the way JSON Schema reads them, with our codes.

JSON Schema's `integer` admits a whole number written as a float (`5.0`); msgspec
refuses one. `convert` takes it where msgspec names an integer field, and nowhere
else (never a free-form object's numbers, which a signature may commit to as
written). A refusal names the field, with the code the request type gives that
field's name (a `codes` class attribute: an amount's `invalid_amount`), else
`invalid_field`. api/body.py reads bodies with it; a rule between fields
(together.py) reads a nested request with it.
"""

from __future__ import annotations

import re
import typing
from typing import Any, TypeVar

import msgspec

from chainkeys.errors import BadRequest

T = TypeVar("T")

_AT_FIELD = re.compile(r"\.(\w+)`$")
_INT_GOT_FLOAT = re.compile(r"^Expected `int[^`]*`, got `float` - at `\$((?:\.\w+|\[\d+\])*)`$")
_STEP = re.compile(r"\.(\w+)|\[(\d+)\]")


def field_code(type_: Any, error: str, default: str = "invalid_field") -> str:
    """The code of a refusal at a field: the request type's own for that field's name,
    else `default`."""
    codes = getattr(type_, "codes", None)
    found = _AT_FIELD.search(error)
    if isinstance(codes, dict) and found is not None:
        return str(codes.get(found[1], default))
    return default


_QUOTED = re.compile(r"^Invalid (enum )?value .* - at (`[^`]*`)$", re.DOTALL)


def refusal(type_: Any, error: msgspec.ValidationError, what: str = "") -> BadRequest:
    """msgspec's refusal as our 400: its message names the field, never quotes the value
    (msgspec quotes an enum's or a union tag's: the caller's text, maybe a secret), and
    a tag outside a union says which tags there are."""
    text = str(error)
    quoted = _QUOTED.match(text)
    if quoted is not None:
        tags = _tags(type_)
        field = quoted[2].strip("`").removeprefix("$.")
        if tags and field == tags[0]:
            return BadRequest(f"{what}{field} is one of {', '.join(tags[1:])}",
                              code=f"unknown_{field}")  # fmt: skip
        text = f"Invalid {quoted[1] or ''}value - at {quoted[2]}"
    return BadRequest(f"{what}{text}", code=field_code(type_, text))


def _tags(type_: Any) -> list[str]:
    """A tagged union's tag field and its tags ([] for any other type)."""
    if typing.get_origin(type_) is not typing.Union:
        return []
    configs: list[Any] = [getattr(m, "__struct_config__", None) for m in typing.get_args(type_)]
    if not configs or any(c is None or c.tag_field is None for c in configs):
        return []
    return [configs[0].tag_field, *(str(c.tag) for c in configs)]


def whole_float_refused(error: msgspec.ValidationError) -> bool:
    """Whether msgspec refused a float where it wanted an integer (maybe a whole one)."""
    return _INT_GOT_FLOAT.match(str(error)) is not None


def convert(value: Any, type_: type[T], what: str = "") -> T:
    """`value` (decoded JSON: dicts, lists, numbers, text) as `type_`, whole floats
    taken as integers where `type_` has an integer; else a 400 naming the field
    (`what` before the message: where the value sits in the body)."""
    try:
        return msgspec.convert(value, type_, strict=True)
    except msgspec.ValidationError as exc:
        error = exc
    for _ in range(64):  # each pass fixes one field; a body has far fewer integers
        found = _INT_GOT_FLOAT.match(str(error))
        if found is None:
            break
        *steps, last = [m[1] if m[1] else int(m[2]) for m in _STEP.finditer(found[1])] or [None]
        holder = value
        for step in steps:
            holder = holder[step]
        number = holder[last]
        if not (isinstance(number, float) and number.is_integer()):
            break
        holder[last] = int(number)
        try:
            return msgspec.convert(value, type_, strict=True)
        except msgspec.ValidationError as again:
            error = again
    raise refusal(type_, error, what) from None
