"""How a setting that cannot be used is said: one line naming the variable, what it
got (never a secret's value) and what it accepts (config.py `load_settings`)."""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import ValidationError
from pydantic.fields import FieldInfo


def describe(exc: ValidationError, fields: Mapping[str, FieldInfo], prefix: str) -> str:
    """The first problem as `CHAINKEYS_X='got': what it accepts` (secrets not echoed)."""
    error = exc.errors()[0]
    name = str(error["loc"][0]) if error["loc"] else "?"
    field = fields.get(name)
    secret = field is not None and "SecretStr" in str(field.annotation)
    got = "(hidden)" if secret else repr(error.get("input"))
    more = f" (and {len(exc.errors()) - 1} more)" if len(exc.errors()) > 1 else ""
    msg = str(error["msg"]).removeprefix("Value error, ")
    if not error["loc"]:  # a check across settings: its input is every setting, secrets too
        return f"{msg}{more}"
    if field is not None and error["type"] in RANGE_ERRORS:
        msg = f"out of range: {accepted_range(field)}"
    return f"{prefix}{name.upper()}={got}: {msg[:1].lower()}{msg[1:]}{more}"


RANGE_ERRORS = {
    "greater_than",
    "greater_than_equal",
    "less_than",
    "less_than_equal",
    "int_from_float",
    "finite_number",
}


def accepted_range(field: FieldInfo) -> str:
    """A field's bounds for a person: "from 1 to 65535", "above 0, at most 3600"."""
    low = high = ""
    for m in field.metadata:
        if getattr(m, "ge", None) is not None:
            low = f"from {m.ge}"
        elif getattr(m, "gt", None) is not None:
            low = f"above {m.gt}"
        if getattr(m, "le", None) is not None:
            high = f"{m.le}"
        elif getattr(m, "lt", None) is not None:
            high = f"below {m.lt}"
    if low.startswith("from") and high and not high.startswith("below"):
        return f"{low} to {high}"
    if high and not high.startswith("below"):
        high = f"at most {high}"
    return ", ".join(p for p in (low, high) if p)
