"""Request bodies and query values, decoded strictly and with our own error codes.

Bodies are decoded straight from the JSON bytes into the route's msgspec
Struct (never through Python objects with coercion), so `"1"` is not an
integer, a float is not an amount, and unknown fields are refused. Before any
decoder runs, a body is refused when it nests deeper than MAX_DEPTH (a decoder's
recursion must never be the limit) or holds text no storage engine keeps (NUL, an
unpaired surrogate): every route, one place.
"""

from __future__ import annotations

import re
from typing import Any, TypeVar
from urllib.parse import parse_qsl

import msgspec
from starlette.requests import Request

from chainkeys import jsonvalues
from chainkeys.api.errors import InvalidJSON, UnsupportedMediaType
from chainkeys.errors import BadRequest
from chainkeys.together import Together

T = TypeVar("T")


def _is_json(content_type: str) -> bool:
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or (
        media.startswith("application/") and media.endswith("+json")
    )


MAX_DEPTH = 32  # every request of the API nests far less
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"')
_BRACKETS = bytes(range(256)).translate(None, b"[]{}")  # every byte but brackets
_NUL = re.compile(rb"(?<!\\)(?:\\\\)*\\u0000")  # \u0000, not preceded by a lone backslash
TEXT_REFUSED = "a text holds a character no chainkeys field takes (NUL or an unpaired surrogate)"
# The rule's NUL half as a JSON Schema pattern, which the OpenAPI document puts on every
# string without a pattern of its own (api/openapi.py); `storable` checks it whole. The
# surrogate half cannot be a pattern: regex engines that validate JSON Schema (Rust's,
# ECMAScript's in unicode mode) have no way to name a lone surrogate.
TEXT_PATTERN = r"^[^\u0000]*$"


def nesting_ok(body: bytes, limit: int = MAX_DEPTH) -> bool:
    """Whether the JSON in `body` nests at most `limit` deep (brackets inside strings do
    not count). Counting brackets answers at C speed for nearly every body; only one
    with more brackets than the limit is scanned."""
    if body.count(b"[") + body.count(b"{") <= limit:
        return True
    depth = deepest = 0
    for b in _STRING.sub(b'""', body).translate(None, _BRACKETS):
        depth += 1 if b in (0x5B, 0x7B) else -1
        deepest = max(deepest, depth)
        if deepest > limit:
            return False
    return True


def storable(text: str) -> bool:
    """Text every engine stores: no NUL (PostgreSQL refuses it) and no unpaired
    surrogate (no UTF-8 can hold one)."""
    if "\x00" in text:
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def together(type_: Any) -> Together | None:
    """The type's rules between fields (a `together` class attribute), if any."""
    found = getattr(type_, "together", None)
    return found if isinstance(found, Together) else None


def decode(body: bytes, type_: type[T]) -> T:
    """`body` as `type_`; 400 with the field's name, `invalid_json` or `invalid_text`."""
    try:
        body.decode("utf-8")  # msgspec would pass invalid UTF-8 inside strings through
    except UnicodeDecodeError:
        raise InvalidJSON("request body is not valid UTF-8") from None
    if not nesting_ok(body):
        raise InvalidJSON(f"request body nests deeper than {MAX_DEPTH} levels")
    if _NUL.search(body) is not None:
        raise BadRequest(TEXT_REFUSED, code="invalid_text")
    try:
        value = msgspec.json.decode(body, type=type_)
    except msgspec.ValidationError as exc:
        value = _with_whole_floats(body, type_, exc)
    except msgspec.DecodeError:
        raise InvalidJSON() from None
    rules = together(type(value))  # a union's member: its own rules
    if rules is not None:
        rules.check(value)
    return value


def _with_whole_floats(body: bytes, type_: type[T], exc: msgspec.ValidationError) -> T:
    """The body read again where msgspec refused a whole number written as a float
    (jsonvalues.convert), or the 400 it was."""
    if not jsonvalues.whole_float_refused(exc):
        raise jsonvalues.refusal(type_, exc) from None
    try:
        value: Any = msgspec.json.decode(body)
    except msgspec.ValidationError:  # a number no type holds (1e400)
        raise jsonvalues.refusal(type_, exc) from None
    except msgspec.DecodeError:  # invalid past the point the typed decoder stopped
        raise InvalidJSON() from None
    return jsonvalues.convert(value, type_)


async def json_body(request: Request, type_: type[T]) -> T | None:
    """The body as `type_`, or None when there is no body at all (whitespace is not
    an empty body: it is invalid JSON)."""
    body = await request.body()
    if not body:
        return None
    content_type = request.headers.get("content-type")
    if content_type is not None and not _is_json(content_type):
        raise UnsupportedMediaType()
    return decode(body, type_)


async def required_body(request: Request, type_: type[T]) -> T:
    found = await json_body(request, type_)
    if found is None:
        raise InvalidJSON("send a JSON object in the request body")
    return found


def query(request: Request) -> dict[str, str]:
    """The query string as name -> value (a repeated name keeps its last value)."""
    raw: bytes = request.scope.get("query_string", b"")
    return dict(parse_qsl(raw.decode("latin-1"), keep_blank_values=True))
