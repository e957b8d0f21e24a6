"""Request and response bodies of the policy endpoints (msgspec Structs; see schemas.py)."""

from __future__ import annotations

from typing import Annotated, Any, Union

import msgspec
from msgspec import UNSET, Meta, Struct, UnsetType

from chainkeys.api.params import ACCOUNT_NAMES, enum
from chainkeys.api.schemas import Envelope, sign_request
from chainkeys.chains.registry import FAMILIES
from chainkeys.signing.dryrun import DryRun
from chainkeys.together import Together


class PolicyVersion(Struct, kw_only=True):
    version: int
    set: Annotated[str, Meta(description="when it was set (UTC, ISO 8601)")]
    policy: Annotated[
        dict[str, Any] | None, Meta(description="the document (null: the policy was cleared)")
    ]


class DenomUnit(Struct, kw_only=True, omit_defaults=True):
    base_unit: Annotated[
        str,
        Meta(
            description="what the integers count: litoshi, koinu, "
            "uatom, `units of 0.0001 EOS` (never the ticker)"
        ),
    ]
    unit: Annotated[str | UnsetType, Meta(description="display unit, when known")] = UNSET
    decimals: Annotated[int | UnsetType, Meta(description="base units per unit: 10^n")] = UNSET


class PolicyShown(Struct, kw_only=True):
    version: Annotated[int | None, Meta(description="null: the tenant never had a policy")]
    set: str | None
    policy: Annotated[
        dict[str, Any] | None,
        Meta(description="the policy in force (null: none; the token's scopes decide)"),
    ]
    units: Annotated[
        dict[str, dict[str, DenomUnit]],
        Meta(
            description="by family, then denom: the unit of each amount the rules name "
            "(max_per_tx, max_per_day, above), which the document gives in the smallest "
            "unit"
        ),
    ] = {}


class PolicyHistory(Struct, kw_only=True):
    versions: list[PolicyVersion]


def _policy_test(family: str) -> type[Struct]:
    """A dry run for one family, tagged by `family`: the account is named as the family's
    path names it, the kind is one of its sign endpoints."""
    kinds = sorted(kind.path for kind in FAMILIES[family].signers)
    fields: list[tuple[str, Any] | tuple[str, Any, Any]] = [
        ("account", ACCOUNT_NAMES[family].type),
        (
            "kind",
            Annotated[enum(kinds), Meta(description="the sign endpoint, as approvals name it")],
        ),
        (
            "request",
            Annotated[dict[str, Any], Meta(description="the sign endpoint's request body")],
        ),
        (
            "policy",
            Annotated[
                dict[str, Any] | None,
                Meta(
                    description="a candidate policy document, tried instead of the policy "
                    "in force (absent or null: the policy in force); refused with every "
                    "problem it has, as `policy set` would"
                ),
            ],
            None,
        ),
    ]
    requests = {kind.path: sign_request(kind.request) for kind in FAMILIES[family].signers}
    return msgspec.defstruct(
        f"PolicyTest{family.capitalize()}",
        fields,
        kw_only=True,
        forbid_unknown_fields=True,
        tag_field="family",
        tag=family,
        namespace={"together": Together(selects=(("kind", "request", requests),))},
    )


PolicyTest: Any = Union[tuple(_policy_test(f) for f in sorted(FAMILIES))]  # noqa: UP007


class RuleTried(Struct, kw_only=True, omit_defaults=True):
    index: int
    name: str | UnsetType = UNSET
    effect: Annotated[str, Meta(extra_json_schema={"enum": ["allow", "deny"]})]
    covers: Annotated[bool, Meta(description="its family and network match the request")]
    when: str | UnsetType = UNSET
    value: Annotated[
        bool | str | None,
        Meta(
            description="the when's value: true, false, an error (fails closed), or null "
            "(no when, or the rule does not cover the request)"
        ),
    ] = None


class PolicyDecision(Struct, kw_only=True, omit_defaults=True):
    decision: Annotated[str, Meta(extra_json_schema={"enum": ["allow", "deny", "approval"]})]
    rule: Annotated[int | None, Meta(description="the rule that decided (its index)")] = None
    rule_name: str | UnsetType = UNSET
    reason: str | UnsetType = UNSET
    approval: dict[str, Any] | UnsetType = UNSET
    rules: list[RuleTried]
    summary: Annotated[dict[str, Any], Meta(description="what the request would do")]
    cosigner: Annotated[
        bool,
        Meta(
            description="true: the co-signer (CHAINKEYS_COSIGNER_URL) would be asked before "
            "it signs, and signs only on its approval (docs/cosigner.md)"
        ),
    ] = False


class CapUsage(Struct, kw_only=True, omit_defaults=True):
    rule: Annotated[int, Meta(description="the rule's index in the policy")]
    name: str | UnsetType = UNSET
    family: str
    network: str
    denom: str
    base_unit: Annotated[
        str,
        Meta(
            description="the unit cap, spent and remaining count: "
            "litoshi, koinu, uatom (never the ticker)"
        ),
    ]
    cap: Annotated[str, Meta(description="max_per_day, in the denom's base unit (decimal)")]
    spent: Annotated[str, Meta(description="the last 24 h, counted as the cap counts it")]
    remaining: Annotated[str, Meta(description="what may still be signed in the window")]
    cap_display: Annotated[
        str | UnsetType, Meta(description="the cap in the display unit (`1 LTC`), when known")
    ] = UNSET
    spent_display: str | UnsetType = UNSET
    remaining_display: str | UnsetType = UNSET
    unit: Annotated[str | UnsetType, Meta(description="display unit, when known")] = UNSET
    decimals: Annotated[int | UnsetType, Meta(description="base units per unit: 10^n")] = UNSET


class PolicyUsage(Struct, kw_only=True):
    since_ms: Annotated[int, Meta(description="the window's start (ms since the epoch)")]
    caps: list[CapUsage]


PolicyShownResponse = Envelope[PolicyShown]
PolicyUsageResponse = Envelope[PolicyUsage]
PolicyHistoryResponse = Envelope[PolicyHistory]
PolicyDecisionResponse = Envelope[PolicyDecision]


def decision_of(run: DryRun) -> PolicyDecision:
    """A dry run as `POST /policy/test` and `chainkeys policy test` show it."""
    rules = [
        RuleTried(
            index=v.rule.index,
            name=v.rule.name or UNSET,
            effect=v.rule.effect,
            covers=v.covers,
            when=v.rule.when.source if v.rule.when else UNSET,
            value=v.value,
        )
        for v in run.rules
    ]
    approval: dict[str, Any] | UnsetType = UNSET
    if run.approval is not None:
        approval = {
            "quorum": run.approval.quorum,
            "group": run.approval.group,
            "ttl_ms": run.approval.ttl_ms,
        }
    return PolicyDecision(
        decision=run.decision,
        rule=run.rule.index if run.rule else None,
        rule_name=(run.rule.name or UNSET) if run.rule else UNSET,
        reason=run.reason or UNSET,
        approval=approval,
        rules=rules,
        summary=run.summary,
        cosigner=run.cosigner,
    )
