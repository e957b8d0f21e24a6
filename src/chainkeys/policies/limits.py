"""A rule's `limits`: amounts or counts over any window (1 min to 30 d) or a lifetime,
per tenant, account, wallet or token (DESIGN.md "Governance").

A limit is counted on the same serialized counters as the 24 h caps (`Spends`,
policies/repository.py): one running total per counter, MACed and pinned in the
tenant's head, and one row per counted signature so the total can shed what leaves
the window. The counter's identity is what it counts, not where the rule sits: the
family and network (the lock's scope), the window, the `per` and its subject, and
the unit (a denom, or `COUNT`). Two rules counting the same thing share a counter;
a policy change keeps the counts of limits it keeps.

Here: the document's shape (`LimitFile`), its validated form (`Limit`) and the pure
part of a decision (`Counted`: what one request adds to which counter, within which
bound). Subjects come from the request's facts; a limit per account, wallet or token
with no facts to name its subject refuses (fail closed).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

import msgspec

from chainkeys.errors import BadRequest
from chainkeys.tokens.service import parse_duration

MINUTE_MS: Final = 60_000
MAX_WINDOW_MS: Final = 30 * 86_400_000
MAX_COUNT: Final = 10**9
PERS: Final = ("tenant", "account", "wallet", "token")
COUNT: Final = "#count"  # the unit of a count limit (no denom starts with "#")
KEY_PREFIX: Final = "#"  # a counter's key in policy_totals' `denom` column


class LimitFile(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """One limit as the file writes it: `amount` or `count`, `window` or `lifetime`."""

    amount: dict[str, Any] | None = None  # values checked as caps are (document._caps)
    count: int | None = None
    window: str | None = None
    lifetime: bool = False
    per: str = "tenant"


@dataclass(frozen=True, slots=True)
class Limit:
    """A validated limit: `amount` (per denom) or `count`; `window_ms` None: lifetime."""

    index: int
    amount: Mapping[str, int] | None
    count: int | None
    window_ms: int | None
    per: str

    @property
    def span(self) -> str:
        """The window in words: "1h", "90m", "lifetime"."""
        if self.window_ms is None:
            return "lifetime"
        for unit, ms in (("d", 86_400_000), ("h", 3_600_000), ("m", MINUTE_MS)):
            if self.window_ms % ms == 0:
                return f"{self.window_ms // ms}{unit}"
        return f"{self.window_ms // 1000}s"

    @property
    def label(self) -> str:
        what = "signatures" if self.count is not None else "amount"
        per = "" if self.per == "tenant" else f" per {self.per}"
        window = "in its lifetime" if self.window_ms is None else f"per {self.span}"
        return f"limits[{self.index}] ({what} {window}{per})"


@dataclass(frozen=True, slots=True)
class Counted:
    """What one request adds to one counter: `amount` of `unit` (1 for a count), within
    `bound` over the limit's window."""

    limit: Limit
    key: str  # the counter's identity (policy_totals' denom column)
    unit: str  # a denom, or COUNT
    amount: int
    bound: int


Caps = Callable[[dict[str, Any] | None, str, list[str]], Mapping[str, int] | None]


def read_limits(
    raws: list[LimitFile] | None, at: str, found: list[str], caps: Caps
) -> tuple[Limit, ...]:
    """The validated limits of a rule; each problem (path first) added to `found`."""
    out = []
    for i, raw in enumerate(raws or ()):
        here = f"{at}[{i}]"
        before = len(found)
        if (raw.amount is None) == (raw.count is None):
            found.append(f'{here}: give either "amount" ({{denom: n}}) or "count" (n)')
        if (raw.window is None) == (not raw.lifetime):
            found.append(f'{here}: give either "window" (1m to 30d) or "lifetime": true')
        if raw.per not in PERS:
            found.append(f"{here}.per: one of {', '.join(PERS)}, not {raw.per[:40]!r}")
        if raw.count is not None and not 1 <= raw.count <= MAX_COUNT:
            found.append(f"{here}.count: from 1 to {MAX_COUNT}")
        amount = caps(raw.amount, f"{here}.amount", found)
        if raw.amount is not None and not raw.amount:
            found.append(f"{here}.amount: names no denom")
        window_ms = None
        if raw.window is not None:
            window_ms = _window(raw.window, f"{here}.window", found)
        if len(found) == before:
            out.append(Limit(i, amount, raw.count, window_ms, raw.per))
    return tuple(out)


def _window(text: str, at: str, found: list[str]) -> int | None:
    try:
        ms = parse_duration(text)
    except BadRequest:
        found.append(f"{at}: {text[:40]!r} is not a duration such as 1m, 15m, 24h, 30d")
        return None
    if not MINUTE_MS <= ms <= MAX_WINDOW_MS:
        found.append(f"{at}: from 1m to 30d")
        return None
    return ms


def subject(per: str, token_id: str, account: str, wallet: str) -> str:
    """Whose counter a request counts on: the tenant's one, or its account's, wallet's
    (an account not derived from a wallet counts alone) or token's."""
    if per == "token":
        return f"token:{token_id}"
    if per == "wallet" and wallet:
        return f"wallet:{wallet}"
    if per in ("account", "wallet"):
        return f"account:{account}"
    return "tenant"


def counter_key(limit: Limit, who: str, unit: str) -> str:
    """`#<window ms|life>/<per>/<digest>`: fits policy_totals' denom column (128), never
    a denom (no denom starts with "#"); names no account or token in clear."""
    span = "life" if limit.window_ms is None else str(limit.window_ms)
    digest = hashlib.sha256(f"{who}\0{unit}".encode()).hexdigest()[:40]
    return f"{KEY_PREFIX}{span}/{limit.per}/{digest}"


def counted(
    limits: tuple[Limit, ...], spent: Mapping[str, int], who: Callable[[str], str]
) -> tuple[list[Counted], str | None]:
    """What a request spending `spent` adds to each of `limits`' counters (`who` names the
    subject of a `per`), or the reason it alone is over one (then nothing counts)."""
    out = []
    for limit in limits:
        if limit.count is not None:
            out.append(
                Counted(limit, counter_key(limit, who(limit.per), COUNT), COUNT, 1, limit.count)
            )
            continue
        for denom, bound in (limit.amount or {}).items():
            amount = spent.get(denom, 0)
            if amount <= 0:
                continue
            if amount > bound:
                return [], f"{limit.label}: {amount} {denom} alone is over its {bound}"
            out.append(
                Counted(limit, counter_key(limit, who(limit.per), denom), denom, amount, bound)
            )
    return out, None


def over(c: Counted, total: int) -> str:
    """Why a counter refuses (`total`: what it holds before this request): the limit,
    its window, what it holds and what is left."""
    left = max(c.bound - total, 0)
    span = "its lifetime" if c.limit.window_ms is None else f"the last {c.limit.span}"
    if c.unit == COUNT:
        return f"{c.limit.label}: {total} of {c.bound} signatures used in {span}; {left} left"
    return (
        f"{c.limit.label}: {c.amount} {c.unit} would bring {span} to {total + c.amount} "
        f"{c.unit}, over {c.bound}; {left} {c.unit} left"
    )
