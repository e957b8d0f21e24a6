"""Every problem of a policy file's shape at once, each with its path.

msgspec stops at the first unknown key or wrong type and says it in its own words
("Object contains unknown field `rule`"). An operator fixing a file wants every
problem in one answer, a near-miss of a known key named ("did you mean
"recipients"?"), and the path (`rules[2].max_per_tx`): so the document is read here
key by key against the Structs that describe it (policies/document.py), and only
then converted.
"""

from __future__ import annotations

import difflib
import functools
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import msgspec
from msgspec.structs import FieldInfo, fields

from chainkeys.jsonvalues import in_words


@dataclass(frozen=True, slots=True)
class Problem:
    """One problem: the key of the object it was found under (`key`, "" for the object
    itself) and what to tell the operator, path first."""

    key: str
    message: str


def did_you_mean(word: str, choices: typing.Iterable[str]) -> str:
    """' (did you mean "x"?)' when `word` is a near-miss of one of `choices`, else ''."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f' (did you mean "{close[0]}"?)' if close else ""


def problems(value: Any, type_: Any, at: str, nouns: Mapping[Any, str]) -> list[Problem]:
    """What is wrong with `value` read as the Struct `type_` at path `at`: every unknown
    key, missing key and value of the wrong type, nested objects and lists of objects
    included. `nouns` names the Structs ("a rule") in the messages."""
    noun = nouns.get(type_, "this object")
    if not isinstance(value, dict):
        return [Problem("", f"{at or 'the file'}: must be {noun} (an object), not {_kind(value)}")]
    known = _known(type_)
    found = [
        Problem(key, _unknown(key, known, _join(at, key), noun))
        for key in value
        if key not in known
    ]
    for name, field in known.items():
        if name not in value:
            if field.required:
                found.append(Problem(name, f"{_join(at, name)}: is required in {noun}"))
            continue
        path = _join(at, name)
        inner = _struct_of(field.type)
        item = _list_item_struct(field.type)
        if inner is not None and isinstance(value[name], dict):
            found += [Problem(name, p.message) for p in problems(value[name], inner, path, nouns)]
        elif item is not None and isinstance(value[name], list):
            for i, element in enumerate(value[name]):
                below = problems(element, item, f"{path}[{i}]", nouns)
                found += [Problem(name, p.message) for p in below]
        elif (message := _convert_error(value[name], field.type, path)) is not None:
            found.append(Problem(name, message))
    return found


def usable(value: dict[str, Any], type_: Any) -> dict[str, Any]:
    """The part of `value` that reads as the Struct `type_`: its known keys whose values
    convert (an object below, or each of a list of them, cleaned the same way first), so
    the values of a rule are checked even where its shape is wrong elsewhere (`problems`
    named the rest)."""
    known = _known(type_)
    kept: dict[str, Any] = {}
    for key, item in value.items():
        field = known.get(key)
        if field is None:
            continue
        inner = _struct_of(field.type)
        listed = _list_item_struct(field.type)
        if inner is not None and isinstance(item, dict):
            item = usable(item, inner)
        elif listed is not None and isinstance(item, list):  # each object cleaned alike
            item = [usable(e, listed) if isinstance(e, dict) else e for e in item]
        if _convert_error(item, field.type, key) is None:
            kept[key] = item
    return kept


@functools.cache
def _known(type_: Any) -> Mapping[str, FieldInfo]:
    """The keys of the Struct `type_` and their fields, read once: msgspec resolves a
    Struct's annotations on every `fields` call (~2 ms), and a policy is parsed at every
    refresh."""
    return {f.encode_name: f for f in fields(type_)}


def _unknown(key: str, known: Mapping[str, Any], path: str, noun: str) -> str:
    hint = did_you_mean(key, known)
    if not hint:
        hint = f" ({noun} has {', '.join(sorted(known))})"
    return f"{path}: not a key of {noun}{hint}"


def _convert_error(value: Any, type_: Any, path: str) -> str | None:
    try:
        msgspec.convert(value, type_)
    except msgspec.ValidationError as exc:
        said = in_words(type_, str(exc), path)
        # in_words says "rules[0].recipients[1] must be …": the path, then a colon, as
        # every other problem says it
        where, _, what = said.partition(" ")
        return f"{where}: {what}" if where.startswith(path) else said
    return None


def _join(at: str, key: str) -> str:
    return f"{at}.{key}" if at else key


def _kind(value: Any) -> str:
    """A JSON value's kind, as the messages say it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true or false"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "an array" if isinstance(value, list) else f"a {type(value).__name__}"  # TOML dates


def _members(type_: Any) -> tuple[Any, ...]:
    """`X | None` as (X, None); any other type as itself alone."""
    if typing.get_origin(type_) in (typing.Union, types.UnionType):
        return typing.get_args(type_)
    return (type_,)


def _struct_of(type_: Any) -> type[msgspec.Struct] | None:
    """The Struct `type_` is (alone or `S | None`), if any."""
    for member in _members(type_):
        if isinstance(member, type) and issubclass(member, msgspec.Struct):
            return member
    return None


def _list_item_struct(type_: Any) -> type[msgspec.Struct] | None:
    """The Struct of `list[S]` (alone or `list[S] | None`), if any."""
    for member in _members(type_):
        if typing.get_origin(member) is list:
            return _struct_of(typing.get_args(member)[0])
    return None
