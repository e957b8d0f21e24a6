"""The kinds of governed change: what each one's filed body means, says and does.

A kind turns a filed body into a `Plan` (the canonical document the digest covers, the
diff in words, whether it loosens anything), read in the filing transaction, and later
applies it in the transaction that decides it. `loosens` is decided conservatively:
false only where every difference is known to tighten. A kind's plan names what it was
made against (a policy version, the governance as it was, a freeze that held); when
that no longer holds at applying, the change is `NoLongerHolds` and rejected as
superseded: the admins signed words that are no longer true.

Bodies are checked here whole (types included), not only by the API's schema, so any
caller of the service gets the same refusals.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol

import msgspec

from chainkeys.approvals.credentials import Credentials
from chainkeys.approvals.proofs import ADMINS, person
from chainkeys.clock import now_ms
from chainkeys.errors import BadRequest, Conflict, IntegrityFailure
from chainkeys.freezes.repository import FreezeRow, Freezes
from chainkeys.freezes.service import FreezeNotFound, FreezeService
from chainkeys.governance.diff import policy_diff
from chainkeys.governance.repository import ChangeRow, Governance, GovernanceRow
from chainkeys.policies.document import parse
from chainkeys.policies.service import PolicyService
from chainkeys.store.integrity import APPROVER_CREDENTIALS
from chainkeys.store.sql import Tx
from chainkeys.tokens.service import Principal, parse_duration
from chainkeys.vault.gate import Gate

MAX_QUORUM: Final = 20
MAX_DELAY_MS: Final = 30 * 86_400_000
_SPANS: Final = ((86_400_000, "d"), (3_600_000, "h"), (60_000, "m"), (1000, "s"))


@dataclass(frozen=True, slots=True)
class Plan:
    document: str | None  # canonical JSON (policy: None clears the policy)
    base: int  # policy: the version the diff is against; 0 for the other kinds
    words: list[str]
    loosens: bool
    secret: str | None = None  # a token kind's token: answered once, to the filer, never stored


class NoLongerHolds(Exception):
    """What a change was made against moved on before it applied (the reason, in words)."""


class Kind(Protocol):
    async def plan(self, tx: Tx, who: Principal, body: Mapping[str, Any]) -> Plan: ...

    async def apply(self, tx: Tx, row: ChangeRow) -> dict[str, object]:
        """Do it, in `tx`; what the `change.applied` audit row adds. NoLongerHolds
        (before writing anything) when it was made against a state that moved on."""
        ...


def fields_of(body: Mapping[str, Any], kind: str, required: set[str], optional: set[str]) -> None:
    """400 naming the first field missing, or one this kind does not take."""
    missing = sorted(required - set(body))
    if missing:
        raise BadRequest(f"{missing[0]} is required for a {kind} change", code="invalid_change")
    extra = sorted(set(body) - required - optional - {"kind"})
    if extra:
        raise BadRequest(f"{extra[0]} is not a field of a {kind} change", code="invalid_change")


def canonical(document: Mapping[str, Any]) -> str:
    return msgspec.json.encode(document, order="sorted").decode()


def parse_delay(text: object) -> int:
    """A delay as governance takes it: `30s`, `15m`, `24h`, `7d` (at most 30 d) or `0`."""
    if not isinstance(text, str) or len(text) > 16:
        raise BadRequest("delay is a duration like 30s, 15m, 24h, 7d, or 0", code="invalid_delay")
    try:
        value = 0 if text.strip() in ("0", "0s") else parse_duration(text)
    except BadRequest:
        raise BadRequest(
            "delay is a duration like 30s, 15m, 24h, 7d, or 0", code="invalid_delay"
        ) from None
    if value > MAX_DELAY_MS:
        raise BadRequest("delay is at most 30d", code="invalid_delay")
    return value


def quorum_of(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_QUORUM:
        raise BadRequest(f"quorum is 1 to {MAX_QUORUM} admins", code="invalid_quorum")
    return value


def span(ms: int) -> str:
    """A delay in the units it was most likely written in (`86400000` → `24h`... `1d`)."""
    if ms == 0:
        return "0"
    unit, name = next((u, n) for u, n in _SPANS if ms % u == 0 or u == 1000)
    return f"{ms // unit}{name}"


async def live_admins(tx: Tx, tenant_id: str) -> int:
    """How many people have a live admin key in the tenant (each key authenticated, and
    the copy the head pins: one a writer put back from before its revocation fails)."""
    gate = tx.signer
    if not isinstance(gate, Gate):
        raise IntegrityFailure("the integrity key is not open here: nothing was done")
    people = set()
    for row in await Credentials.of(tx, tenant_id):
        if row.approver_group != ADMINS or row.revoked_ms is not None:
            continue
        if gate.valid(APPROVER_CREDENTIALS, row.covered()):
            await Credentials.current(tx, gate, row)
            people.add(person(row.label))
    return len(people)


class PolicyKind:
    """`{"kind": "policy", "document": {…} | null}`: the whole new policy (docs/policies.md)."""

    def __init__(self, policies: PolicyService) -> None:
        self.policies = policies

    async def plan(self, tx: Tx, who: Principal, body: Mapping[str, Any]) -> Plan:
        fields_of(body, "policy", set(), {"document"})
        document = body.get("document")
        if document is not None and not isinstance(document, dict):
            raise BadRequest(
                "document is a policy (an object with rules) or null (clear the policy)",
                code="invalid_policy",
            )
        text = None if document is None else parse(msgspec.json.encode(document)).canonical
        return await self.plan_canonical(tx, who.tenant_id, text)

    async def plan_canonical(self, tx: Tx, tenant_id: str, document: str | None) -> Plan:
        """The plan of a policy already validated (the operator's `policy set`)."""
        latest = await self.policies.latest(tx, tenant_id)
        base = latest.version if latest is not None else 0
        old = parse(latest.document) if latest is not None and latest.document else None
        words, loosens = policy_diff(old, parse(document) if document is not None else None)
        return Plan(document, base, words, loosens)

    async def apply(self, tx: Tx, row: ChangeRow) -> dict[str, object]:
        latest = await self.policies.latest(tx, row.tenant_id)
        current = latest.version if latest is not None else 0
        if current != row.base_version:
            raise NoLongerHolds(
                f"the policy is at version {current}, not {row.base_version} as when this "
                "change was filed; file it again"
            )
        version = await self.policies.write_version(tx, row.tenant_id, "", row.document, row.id)
        return {"version": version.version}


class FreezeLiftKind:
    """`{"kind": "freeze.lift", "freeze": "frz_…"}`: end a freeze before its `until`.
    Lifting always loosens (what the freeze stops may be done again), so it waits the
    delay after the quorum; a freeze that ended meanwhile leaves nothing to lift."""

    def __init__(self, freezes: FreezeService) -> None:
        self.freezes = freezes

    async def plan(self, tx: Tx, who: Principal, body: Mapping[str, Any]) -> Plan:
        fields_of(body, "freeze.lift", {"freeze"}, set())
        freeze_id = body["freeze"]
        if not isinstance(freeze_id, str) or not 1 <= len(freeze_id) <= 40:
            raise BadRequest("freeze is a freeze's id (frz_…)", code="invalid_freeze")
        row = await Freezes.get(tx, who.tenant_id, freeze_id)
        if row is None:
            raise FreezeNotFound(f"no freeze {freeze_id} in this tenant")
        if not _holds(row):
            raise Conflict(f"freeze {row.id} has ended already", code="freeze_ended")
        scope = f"the account {row.account}" if row.account else "the whole tenant"
        words = [
            f"freeze {row.id} over {scope} ({row.reason}) is lifted: what it stops may be "
            "done again"
        ]
        return Plan(canonical({"freeze": row.id}), 0, words, True)

    async def apply(self, tx: Tx, row: ChangeRow) -> dict[str, object]:
        freeze_id = str(msgspec.json.decode(row.document or "{}").get("freeze", ""))
        found = await Freezes.get(tx, row.tenant_id, freeze_id)
        if found is None or not _holds(found):
            raise NoLongerHolds(f"freeze {freeze_id} has ended already")
        lifted = await self.freezes.lift_in(tx, Principal(row.tenant_id, "", ""), found, row.id)
        if lifted is None:
            raise NoLongerHolds(f"freeze {freeze_id} has ended already")
        return {"freeze": freeze_id}


def _holds(row: FreezeRow) -> bool:
    return row.lifted_ms is None and (row.until_ms is None or row.until_ms > now_ms())


class GovernanceKind:
    """`{"kind": "governance", "quorum": K, "delay": "24h"}`: the tenant's quorum and
    delay themselves. Raising either (and lowering neither) only tightens and applies
    at the quorum; lowering either loosens and waits the delay as it is now. A quorum
    above the admins who hold a live key could never be met again: refused."""

    async def plan(self, tx: Tx, who: Principal, body: Mapping[str, Any]) -> Plan:
        fields_of(body, "governance", {"quorum", "delay"}, set())
        quorum, delay = quorum_of(body["quorum"]), parse_delay(body["delay"])
        current = await Governance.get(tx, who.tenant_id)
        if current is None:  # never: the service files on a governed tenant only
            raise Conflict("this tenant is not governed", code="not_governed")
        await _reachable(tx, who.tenant_id, quorum)
        words, loosens = _governance_diff(current, quorum, delay)
        old = {"quorum": current.quorum, "delay_ms": current.delay_ms}
        document = {"quorum": quorum, "delay_ms": delay, "from": old}
        return Plan(canonical(document), 0, words, loosens)

    async def apply(self, tx: Tx, row: ChangeRow) -> dict[str, object]:
        document = msgspec.json.decode(row.document or "{}")
        current = await Governance.get(tx, row.tenant_id)
        was = document.get("from", {})
        if current is None or (current.quorum, current.delay_ms) != (
            was.get("quorum"),
            was.get("delay_ms"),
        ):
            raise NoLongerHolds(
                "the tenant's quorum or delay changed since it was filed; file it again"
            )
        quorum, delay = int(document["quorum"]), int(document["delay_ms"])
        admins = await live_admins(tx, row.tenant_id)
        if quorum > admins:
            raise NoLongerHolds(
                f"quorum {quorum} is more than the {admins} admins with a live key now"
            )
        new = GovernanceRow(row.tenant_id, quorum, delay, now_ms())
        if await Governance.replace(tx, current, new) is None:  # never under the tenant's scope
            raise NoLongerHolds("the tenant's quorum or delay changed while it applied")
        return {"quorum": quorum, "delay_ms": delay}


async def _reachable(tx: Tx, tenant_id: str, quorum: int) -> None:
    admins = await live_admins(tx, tenant_id)
    if quorum > admins:
        raise Conflict(
            f"quorum {quorum} is more than the {admins} admins with a live key in this "
            "tenant: no change could be signed again; enrol admins' keys first "
            "(chainkeys admin add-key)",
            code="quorum_unreachable",
        )


def _governance_diff(current: GovernanceRow, quorum: int, delay: int) -> tuple[list[str], bool]:
    words: list[str] = []
    if quorum != current.quorum:
        how = "raised" if quorum > current.quorum else "lowered"
        words.append(f"quorum {how}: {current.quorum} -> {quorum} admins")
    if delay != current.delay_ms:
        how = "raised" if delay > current.delay_ms else "lowered"
        words.append(f"delay {how}: {span(current.delay_ms)} -> {span(delay)}")
    loosens = quorum < current.quorum or delay < current.delay_ms
    return words or ["no change"], loosens
