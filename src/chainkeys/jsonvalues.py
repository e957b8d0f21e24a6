"""JSON values as msgspec types, read the way JSON Schema reads them, with our codes and
our words.

JSON Schema's `integer` admits a whole number written as a float (`5.0`); msgspec
refuses one. `convert` takes it where msgspec names an integer field, and nowhere
else (never a free-form object's numbers, which a signature may commit to as
written). A refusal names the field, with the code the request type gives that
field's name (a `codes` class attribute: an amount's `invalid_amount`), else
`invalid_field`. api/body.py reads bodies with it; a rule between fields
(together.py) reads a nested request with it.

A refusal is said in words, read from the schema that refused it: msgspec's
"Expected `str` matching regex '^[0-9a-fA-F]{64}\\Z' - at `$.chainId`" becomes
"chainId must be 64 hex digits" (PATTERN_WORDS, else the field's format), a bound
becomes "at most N characters", a type "a string, not a number", an enum the values
it takes. The message is what the caller, the audit log and the console all show: it
never holds a regex, and never the caller's value (it may be a secret).
"""

from __future__ import annotations

import ast
import functools
import re
import typing
from collections.abc import Iterator
from typing import Any, Final, TypeVar

import msgspec
import msgspec.inspect as mi

from chainkeys.errors import BadRequest

T = TypeVar("T")

_AT_FIELD = re.compile(r"\.(\w+)`$")
_INT_GOT_FLOAT = re.compile(r"^Expected `int[^`]*`, got `float` - at `\$((?:\.\w+|\[\d+\])*)`$")
_STEP = re.compile(r"\.(\w+)|\[(\d+)\]")

# Each pattern a request field is checked with, in words ("chainId must be 64 hex
# digits"). A pattern missing here is said by its format or description instead
# (`_pattern_words`); tests/api/test_error_words.py fails on any the request types use
# that would not be said in words.
PATTERN_WORDS: Final = {
    r"^([0-9a-fA-F]{2})*\Z": "hex: an even number of the digits 0-9 and a-f",
    r"^[0-9a-fA-F]{64}\Z": "64 hex digits",
    r"^([A-Za-z0-9+/]{4})*([A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?\Z": (
        "standard base64 (A-Z, a-z, 0-9, + and /, padded with =)"
    ),
    r"^[0-9]{1,80}\Z": "a string of digits (1 to 80 of 0-9, no sign, point or exponent)",
    r"^[a-z1-5.]{0,11}[a-z1-5]\Z": (
        "an EOS account name: 1 to 12 of a-z, 1-5 and '.', not ending in '.'"
    ),
    r"^[a-zA-Z][a-zA-Z0-9/:._-]{2,127}\Z": (
        "a letter, then 2 to 127 letters, digits or any of / : . _ -"
    ),
    r"^channel-[0-9]{1,20}\Z": "a channel id: channel- and a number (channel-0)",
    r"^(?!wal_)[A-Za-z0-9][A-Za-z0-9._-]{0,63}\Z": (
        "1 to 64 letters, digits, '.', '_' or '-', starting with a letter or a digit "
        "and not with wal_"
    ),
}
NAME_FORMAT = re.compile(r"^chainkeys-(\w+)-name$")  # api/params.py: an account's name

# msgspec's names of JSON types, as the words say them
_TYPES: Final = {
    "str": "a string",
    "int": "a whole number",
    "float": "a number",
    "bool": "true or false",
    "null": "null",
    "array": "an array",
    "object": "an object",
    "decimal": "a decimal number",
    "bytes": "base64 text",
    "uuid": "a UUID",
    "datetime": "a date and time (RFC 3339)",
    "date": "a date (RFC 3339)",
    "time": "a time (RFC 3339)",
    "timedelta": "a duration (ISO 8601)",
}
_GOT: Final = {**_TYPES, "int": "a number", "float": "a number"}
_UNITS: Final = {"str": "characters", "bytes": "bytes", "array": "items", "object": "entries"}

_AT = re.compile(r"^(.*?)(?: - at (?:`key` in )?`\$([^`]*)`)?$", re.DOTALL)
_EXPECTED_GOT = re.compile(r"^Expected `([^`]+)`, got `([^`]+)`$")
_EXPECTED = re.compile(r"^Expected `([^`]+)`$")
_REGEX = re.compile(r"^Expected `str` matching regex (.+)$", re.DOTALL)
_LENGTH = re.compile(r"^Expected `(\w+)` of length (<=|>=) (\d+)$")
_EXACT_LENGTH = re.compile(r"^Expected `array` of length (\d+)(?: to (\d+))?(?:, got \d+)?$")
_AT_LEAST = re.compile(r"^Expected `array` of at (least|most) length (\d+), got \d+$")
_BOUND = re.compile(r"^Expected `(?:int|float)` (<=|>=|<|>) (\S+)$")
_MULTIPLE = re.compile(r"^Expected `(?:int|float)` that's a multiple of (\S+)$")
_MISSING = re.compile(r"^Object missing required field `([^`]+)`$")
_UNKNOWN = re.compile(r"^Object contains unknown field `([^`]+)`$")
_ENUM = re.compile(r"^Invalid (?:enum )?value\b", re.DOTALL)
_PLAIN: Final = {  # msgspec's other refusals of a value's form
    "Number out of range": "is a number out of range",
    "Integer value out of range": "is a number out of range",
    "Invalid decimal string": "must be a decimal number",
    "Invalid base64 encoded string": "must be standard base64",
    "Invalid UUID": "must be a UUID",
    "Invalid RFC3339 encoded datetime": "must be a date and time (RFC 3339)",
    "Invalid RFC3339 encoded date": "must be a date (RFC 3339)",
    "Invalid RFC3339 encoded time": "must be a time (RFC 3339)",
    "Invalid ISO8601 duration": "must be a duration (ISO 8601)",
}
_BOUNDS: Final = {"<=": "at most", ">=": "at least", "<": "less than", ">": "greater than"}


def field_code(type_: Any, error: str, default: str = "invalid_field") -> str:
    """The code of a refusal at a field: the request type's own for that field's name,
    else `default`."""
    codes = getattr(type_, "codes", None)
    found = _AT_FIELD.search(error)
    if isinstance(codes, dict) and found is not None:
        return str(codes.get(found[1], default))
    return default


def refusal(type_: Any, error: msgspec.ValidationError, what: str = "") -> BadRequest:
    """msgspec's refusal of a value as `type_` as our 400, in words (`in_words`); a tag
    outside a union says which tags there are. `what` is where the value sits in the
    body ("request: "), put before the field's path."""
    text = str(error)
    tags = _tags(type_)
    found = _AT.match(text)
    if tags and found is not None and _ENUM.match(found[1]) and found[2] == f".{tags[0]}":
        field = _path(what, tags[0])
        return BadRequest(f"{field} is one of {', '.join(tags[1:])}", code=f"unknown_{tags[0]}")
    return BadRequest(in_words(type_, text, what), code=field_code(type_, text))


def in_words(type_: Any, text: str, what: str = "") -> str:
    """msgspec's refusal `text` of a value as `type_`, said in words with the field's
    path (`what` before it): the schema's own words for the check that failed, never a
    regex, never the value."""
    found = _AT.match(text)
    if found is None:  # unreachable: the pattern matches any text
        return text
    message, at = found[1], found[2] or ""
    subject = _path(what, at.removeprefix("."))
    if " - at `key` in " in text:
        subject = f"a key of {subject}"
    if (missing := _MISSING.match(message)) is not None:
        return f"{_path(subject, missing[1])} is required"
    if (unknown := _UNKNOWN.match(message)) is not None:
        return f"{_path(subject, unknown[1])} is not a field of this request"
    return f"{subject or 'the body'} {_predicate(type_, message, at)}"


def _predicate(type_: Any, message: str, at: str) -> str:
    """What the value at `at` must be, from msgspec's `message` and the schema."""
    if (regex := _REGEX.match(message)) is not None:
        return f"must be {_pattern_words(type_, at, _literal(regex[1]))}"
    if (both := _EXPECTED_GOT.match(message)) is not None:
        wanted, got = both[1], both[2]
        if got == "float" and "int" in wanted.split(" | "):
            return f"must be {_kinds(wanted)}, not a number with a fraction"
        return f"must be {_kinds(wanted)}, not {_GOT.get(got, got)}"
    if (length := _LENGTH.match(message)) is not None:
        unit = _UNITS.get(length[1], "items")
        if length[2] == ">=" and length[3] == "1":
            return "must not be empty"
        verb = "be" if length[1] in ("str", "bytes") else "hold"
        return f"must {verb} {_BOUNDS[length[2]]} {length[3]} {unit}"
    if (exact := _EXACT_LENGTH.match(message)) is not None:
        many = f"{exact[1]} to {exact[2]}" if exact[2] else f"exactly {exact[1]}"
        return f"must hold {many} items"
    if (least := _AT_LEAST.match(message)) is not None:
        return f"must hold at {least[1]} {least[2]} items"
    if (bound := _BOUND.match(message)) is not None:
        return f"must be {_BOUNDS[bound[1]]} {bound[2]}"
    if (multiple := _MULTIPLE.match(message)) is not None:
        return f"must be a multiple of {multiple[1]}"
    if _ENUM.match(message) is not None:
        values = _values(type_, at)
        return f"must be one of {', '.join(values)}" if values else "is not a value it takes"
    if (only := _EXPECTED.match(message)) is not None:
        return f"must be {_kinds(only[1])}"
    if message in _PLAIN:
        return _PLAIN[message]
    # a refusal msgspec may add later: its own words (it names no regex but `matching regex`)
    return f"is refused: {message[:1].lower()}{message[1:]}"


def _path(where: str, field: str) -> str:
    """`field` (a path below `where`) joined to `where` ("request: " or "request")."""
    where = where.strip().removesuffix(":").strip()
    if not where or not field:
        return where or field
    return f"{where}{field}" if field.startswith("[") else f"{where}.{field}"


def _kinds(names: str) -> str:
    """msgspec's "str | null" as "a string or null"."""
    said = [_TYPES.get(n, n) for n in names.split(" | ")]
    return said[0] if len(said) == 1 else f"{', '.join(said[:-1])} or {said[-1]}"


def _literal(quoted: str) -> str:
    """The pattern msgspec quotes (its repr) as the pattern."""
    try:
        value = ast.literal_eval(quoted)
    except (ValueError, SyntaxError):
        return quoted
    return value if isinstance(value, str) else quoted


def _pattern_words(type_: Any, at: str, pattern: str) -> str:
    """What a text matching `pattern` is, in words: PATTERN_WORDS, else the field's
    format (an account's name), else its description, else where the pattern is."""
    if pattern in PATTERN_WORDS:
        return PATTERN_WORDS[pattern]
    for node in _nodes(type_, at):
        if isinstance(node, mi.Metadata) and getattr(node.type, "pattern", None) == pattern:
            schema = node.extra_json_schema or {}
            named = NAME_FORMAT.match(str(schema.get("format", "")))
            if named is not None:
                from chainkeys.chains.registry import FAMILIES  # (the family's own words)

                fam = FAMILIES.get(named[1])
                return fam.names.description if fam is not None else f"a {named[1]} name"
            if schema.get("description"):
                return f"of the form its schema gives ({schema['description']})"
    return "of the form its schema gives (/openapi.json)"


def _values(type_: Any, at: str) -> list[str]:
    """The values an enum or a Literal at `at` takes ([] when the schema does not say)."""
    for node in _nodes(type_, at):
        if isinstance(node, mi.Metadata):
            node = node.type
        if isinstance(node, mi.LiteralType):
            return [str(v) for v in node.values]
        if isinstance(node, mi.EnumType):
            return [str(m.value) for m in node.cls]
    return []


@functools.cache
def _info(type_: Any) -> mi.Type:
    """msgspec's description of `type_` (once per type: the request types are few)."""
    return mi.type_info(type_)


def _nodes(type_: Any, at: str) -> list[mi.Type]:
    """The types the schema has at the path `at` (".prevtxs[0].txid"): every union
    member's that has it, each as declared (its Metadata kept)."""
    nodes = [_info(type_)]
    for step in re.findall(r"\.(\w+)|\[(\d+|\.\.\.)\]", at):
        nodes = [found for node in nodes for found in _step(node, step[0], step[1])]
    return [leaf for node in nodes for leaf in _members(node)]


def _members(node: mi.Type) -> Iterator[mi.Type]:
    """A union's members (nested unions flattened), or the type itself."""
    inner = node.type if isinstance(node, mi.Metadata) else node
    if isinstance(inner, mi.UnionType):
        for member in inner.types:
            yield from _members(member)
    else:
        yield node


def _step(node: mi.Type, field: str, index: str) -> Iterator[mi.Type]:
    """The types one step below `node`: a struct's field (by its JSON name), a dict's
    value or an array's item."""
    for member in _members(node):
        inner = member.type if isinstance(member, mi.Metadata) else member
        if field and isinstance(inner, mi.StructType):
            yield from (f.type for f in inner.fields if f.encode_name == field)
        elif field == "" and isinstance(inner, mi.DictType):
            yield inner.value_type
        elif field == "" and isinstance(
            inner, (mi.ListType, mi.VarTupleType, mi.SetType, mi.FrozenSetType)
        ):
            yield inner.item_type
        elif (
            isinstance(inner, mi.TupleType)
            and index.isdigit()
            and int(index) < len(inner.item_types)
        ):
            yield inner.item_types[int(index)]


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
    (`what` before its path: where the value sits in the body, "request: ")."""
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
