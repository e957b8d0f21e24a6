"""A family by its name in the URL, and a chain's refusal as the API's bad request."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from chainkeys.chains.registry import FAMILIES
from chainkeys.chains.spec import ChainError, Family
from chainkeys.errors import BadRequest, NotFound


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
