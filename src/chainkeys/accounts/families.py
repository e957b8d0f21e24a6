"""A family by its name in the URL, an account's name checked for it, and a chain's
refusal as the API's bad request."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from typing import Any

from chainkeys.chains.registry import FAMILIES
from chainkeys.chains.spec import ChainError, Family
from chainkeys.errors import AccountNotFound, BadRequest, NotFound

# A name every family's names look like (a letter or digit at both ends): one that is not
# is refused before any storage work; one that is may be looked up first (each family's
# exact shape is its `names` pattern, which api/params.py checks).
PLAUSIBLE_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9.]{0,98}[A-Za-z0-9])?")


@contextlib.contextmanager
def chain_errors() -> Iterator[None]:
    """A chain's refusal becomes a bad request with the chain's own message and code."""
    try:
        yield
    except ChainError as exc:
        raise BadRequest(exc.message, code=exc.code) from None


def family_of(name: str) -> Family[Any]:
    try:
        return FAMILIES[name]
    except KeyError:
        raise NotFound(f"unknown chain family; families: {', '.join(FAMILIES)}") from None


def check_name(family: str, name: str) -> tuple[Family[Any], str]:
    """The family and the canonical name (bech32 is case-insensitive), before any I/O."""
    fam = family_of(family)
    with chain_errors():
        return fam, fam.check_name(name)


def lookup_name(family: str, name: str) -> tuple[Family[Any], str]:
    """`check_name` for a lookup: a name of the shape the API documents (api/params.py
    checked it) that fails the family's deeper check (an address's checksum) names no
    account, so it is a 404 that says why (a mistyped address), not a 400; a name of
    another shape is still a 400."""
    if PLAUSIBLE_NAME.fullmatch(name) is None:
        return check_name(family, name)
    fam = family_of(family)
    try:
        return fam, fam.check_name(name)
    except ChainError as exc:
        raise AccountNotFound(f"no {fam.name} account by that name ({exc.message})") from None
