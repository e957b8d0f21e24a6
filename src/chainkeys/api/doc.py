"""What a route says about itself for the OpenAPI document."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from chainkeys.api.params import Param


@dataclass(frozen=True, slots=True)
class Doc:
    """One operation: its id, summary, tag, body and answer types, error statuses, params.

    The types are the msgspec Structs the handler really decodes and encodes, so
    the document cannot drift from the code.
    """

    operation_id: str
    summary: str
    tag: str
    response: type[Any]
    errors: tuple[str, ...] = ()
    request: type[Any] | None = None
    request_required: bool = True
    parameters: tuple[Param | dict[str, Any], ...] = ()
    description: str = ""
    examples: dict[str, Any] = field(default_factory=dict)  # of the request body
    response_examples: dict[str, Any] = field(default_factory=dict)
    media: dict[str, Any] | None = None  # a 200 that is not the JSON envelope (a download)
    # OpenAPI links of the 200: operation id -> {parameter: runtime expression}, so a
    # client or a stateful fuzzer follows create -> get, sign, delete, …
    links: dict[str, dict[str, str]] = field(default_factory=dict)
    status: str = "200"  # the success status (201: something was made)


def links(operations: list[str], **parameters: str) -> dict[str, dict[str, str]]:
    """The same parameters, from this answer, for each of these operations."""
    return {op: parameters for op in operations}
