"""The shapes of sign requests' fields, as msgspec types (patterns end in `\\Z`, the end
of the text for Python, as `$` is for JSON Schema: api/openapi.py `ecma_patterns`): one
declaration both checks a field (msgspec refuses a value outside it, naming the field)
and states it in the OpenAPI document, so a client or fuzzer knows it before sending.

What a shape cannot say stays with each decoder: a transaction parsed whole, a chain id
that must be the account's, an amount within the coin's supply. A refusal at a field
whose name a request type lists in its `codes` carries that code (jsonvalues.py), so
an amount of the wrong shape is `invalid_amount` whether msgspec or the decoder saw it.
"""

from __future__ import annotations

from typing import Annotated, Final, TypeAlias

from msgspec import Meta

HEX: TypeAlias = Annotated[str, Meta(pattern=r"^([0-9a-fA-F]{2})*\Z", description="bytes as hex")]
HASH: TypeAlias = Annotated[str, Meta(pattern=r"^[0-9a-fA-F]{64}\Z", description="32 bytes as hex")]
BASE64: TypeAlias = Annotated[
    str,
    Meta(
        pattern=r"^([A-Za-z0-9+/]{4})*([A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?\Z",
        description="bytes as standard base64 (padded)",
    ),
]
DIGITS: TypeAlias = Annotated[
    str, Meta(pattern=r"^[0-9]{1,80}\Z", description="a whole number as a decimal string")
]
# msgspec takes no bound past int64 (it says so when the type is built): the document
# states the top, and each decoder that reads one checks it (cosmos/transfer.py `_counts`)
UINT64: TypeAlias = Annotated[int, Meta(ge=0, extra_json_schema={"maximum": 2**64 - 1})]
UINT32: TypeAlias = Annotated[int, Meta(ge=0, le=2**32 - 1)]
# Core's decimal coin amount as a string: at most 8 decimals, no exponent, no sign (a
# Decimal field: msgspec takes no pattern on one, so api/openapi.py states it)
COINS_PATTERN: Final = r"^[0-9]{1,12}(\.[0-9]{1,8})?$"
# a Cosmos denom (the SDK's own rule: sdk.ValidateDenom)
DENOM: TypeAlias = Annotated[str, Meta(pattern=r"^[a-zA-Z][a-zA-Z0-9/:._-]{2,127}\Z")]

# A sign-message's message (every family's): what a request at the schema's maximum needs
# of the default body cap (config.py `max_body_bytes`, 16 KiB) for the message's JSON
# string however a client's encoder writes it, leaving 1 KiB for the rest of the body (a
# policy dry run nests the request in its own). Every bound below is derived from it.
MESSAGE_JSON_BYTES: Final = 15 * 1024
# Text: one character outside the BMP, as ASCII-only encoders write it (Python's json,
# requests), is "\ud83d\ude00", 12 bytes: 1,280 characters (at most 5,120 bytes of UTF-8).
MAX_MESSAGE_CHARS: Final = MESSAGE_JSON_BYTES // 12
# Bytes: base64 is the larger in JSON, 2 bytes a character where "/" is written "\/"
# (PHP's json_encode): 7,680 characters, 5,760 bytes (11,520 hex digits, 1 byte each).
MAX_MESSAGE_BYTES: Final = MESSAGE_JSON_BYTES // 2 // 4 * 3
MESSAGE_TEXT: TypeAlias = Annotated[
    str,
    Meta(
        max_length=MAX_MESSAGE_CHARS,
        description=f"UTF-8 text, {MAX_MESSAGE_CHARS:,} characters at most",
    ),
]
MESSAGE_HEX: TypeAlias = Annotated[
    HEX,
    Meta(
        max_length=2 * MAX_MESSAGE_BYTES, description=f"bytes as hex, {MAX_MESSAGE_BYTES:,} at most"
    ),
]
MESSAGE_BASE64: TypeAlias = Annotated[
    BASE64,
    Meta(
        max_length=-(-MAX_MESSAGE_BYTES // 3) * 4,
        description=f"bytes as standard base64 (padded), {MAX_MESSAGE_BYTES:,} at most",
    ),
]
