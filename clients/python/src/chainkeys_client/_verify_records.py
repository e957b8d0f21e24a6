"""What a kind's decoder rebuilds from a request (`Rebuilt`) and the summary's pieces it
is made of, in the server's one form: shared by the decoders (_verify_chains.py) and
`verify_approval` (_verify.py), which compares them with what the approval shows."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Rebuilt:
    """What a kind's decoder here makes of a request: the digest and the summary's
    fields (as the server's one form names them)."""

    digest: str
    items: list[dict[str, Any]]
    fee: list[dict[str, Any]] | None
    chain_id: str | None = None
    memo: str | None = None
    raw: bool = False
    message: bytes | None = None


Decoder = Callable[[dict[str, Any], dict[str, Any], str], Rebuilt]


def amount(denom: str, value: int, base: str | None, unit: str | None, decimals: int | None
           ) -> dict[str, Any]:  # fmt: skip
    """An amount as the approval shows it (the integer as decimal text)."""
    out: dict[str, Any] = {"denom": denom, "amount": str(value), "base_unit": base or denom}
    if unit is not None and decimals is not None:
        whole, part = divmod(value, 10**decimals)
        frac = f"{part:0{decimals}d}".rstrip("0") if decimals else ""
        out["display"] = f"{whole}{'.' + frac if frac else ''} {unit}"
    return out


def item(type_: str, recipient: str | None, amounts: list[dict[str, Any]], **extra: Any
         ) -> dict[str, Any]:  # fmt: skip
    return {"type": type_, "recipient": recipient, "amounts": amounts, **extra}
