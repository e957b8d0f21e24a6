"""Policy routes: a tenant reads its policy and its history, and tries a sign request
against it (a dry run: nothing signed, no key opened, no cap counted). Operators set
policies with the CLI."""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec import UNSET, UnsetType
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from chainkeys.api import policy_schemas as ps
from chainkeys.api import schemas as s
from chainkeys.api.auth import BY_REQUEST, NONE, services_of
from chainkeys.api.body import required_body
from chainkeys.api.doc import Doc
from chainkeys.api.routes.common import ERRORS_AUTH, Op, ok, resource
from chainkeys.chains.registry import FAMILIES
from chainkeys.chains.spec import Unit
from chainkeys.chains.tx.base import in_display
from chainkeys.chains.tx.units import unit_of
from chainkeys.clock import iso, now_ms
from chainkeys.errors import Forbidden
from chainkeys.policies.document import parse
from chainkeys.policies.service import DAY_MS
from chainkeys.signing.dryrun import dry_run
from chainkeys.tokens.service import Principal
from chainkeys.vault.gate import opened

TAG = "Policy"


# the example's request: the first family's sign-transfer example (Moon's transfer)
_FAMILY, _TRANSFER = next(
    (f.name, k.examples["moon"])
    for f in FAMILIES.values()
    for k in f.signers
    if k.path == "sign-transfer"
)


def _document(text: str | None) -> dict[str, Any] | None:
    return None if text is None else msgspec.json.decode(text)


def _shown_to(principal: Principal, text: str | None) -> dict[str, Any] | None:
    """The stored document as this token may read it: only the rules of the families it
    may use, as /audit, /overview and /policy/usage show it only those; of the others
    nothing is said, not even that there are any."""
    document = _document(text)
    if document is None or principal.families is None:
        return document
    rules = [r for r in document["rules"] if principal.may_use(r.get("family", ""))]
    return {**document, "rules": rules}


# the rule fields that map denoms to amounts (policies/document.py RuleFields)
_AMOUNTS = ("max_per_tx", "max_per_day", "above")


def _shown(amount: int, unit: Unit) -> str | UnsetType:
    return in_display(amount, unit.display, unit.decimals) or UNSET


def _units(document: dict[str, Any] | None) -> dict[str, dict[str, ps.DenomUnit]]:
    """The unit of each denom the rules' amounts name, by family (the document is shown
    as it was set; people read its integers in these: `100000000 litoshi (1 LTC)`)."""
    out: dict[str, dict[str, ps.DenomUnit]] = {}
    for rule in document["rules"] if document else ():
        family = rule.get("family")
        if family not in FAMILIES:
            continue
        for key in _AMOUNTS:
            for denom in rule.get(key) or {}:
                unit = unit_of(family, denom)
                out.setdefault(family, {})[denom] = ps.DenomUnit(
                    base_unit=unit.base,
                    unit=unit.display or UNSET,
                    decimals=unit.decimals if unit.decimals is not None else UNSET,
                )
    return out


async def get_policy(request: Request, principal: Principal) -> Response:
    shown = await services_of(request).policies.show(principal.tenant)
    v = shown.version
    document = _shown_to(principal, v.document) if v else None
    data = ps.PolicyShown(
        version=v.version if v else None,
        set=iso(v.created_ms) if v else None,
        policy=document,
        units=_units(document),
    )
    return ok(s.Envelope(success=True, message="policy", data=data))


async def policy_history(request: Request, principal: Principal) -> Response:
    versions = await services_of(request).policies.history(principal.tenant)
    data = ps.PolicyHistory(
        versions=[
            ps.PolicyVersion(
                version=v.version, set=iso(v.created_ms), policy=_shown_to(principal, v.document)
            )
            for v in versions
        ]
    )
    return ok(s.Envelope(success=True, message="policy history", data=data))


async def test_policy(request: Request, principal: Principal) -> Response:
    body = await required_body(request, ps.PolicyTest)
    family = s.family_of(body)
    if not principal.may_use(family):
        raise Forbidden(f"this token may not use {family} accounts")
    candidate = None
    if body.policy is not None:  # read as `policy set` reads a file: every problem named
        candidate = parse(msgspec.json.encode(body.policy), "json")
    svc = services_of(request)
    run = await dry_run(
        svc.db,
        opened(svc.barrier.integrity),
        svc.policies,
        principal,
        family,
        body.account,
        body.kind,
        body.request,
        candidate,
        cosigner=svc.settings.cosigner_url is not None,
    )
    return ok(
        s.Envelope(
            success=True, message=f"the policy would {run.decision}", data=ps.decision_of(run)
        )
    )


async def policy_usage(request: Request, principal: Principal) -> Response:
    caps = []
    for u in await services_of(request).policies.usage(principal):
        unit = unit_of(u.rule.family, u.denom)
        remaining = max(0, u.cap - u.spent)
        caps.append(
            ps.CapUsage(
                rule=u.rule.index,
                name=u.rule.name or UNSET,
                family=u.rule.family,
                network=u.network,
                denom=u.denom,
                base_unit=unit.base,
                cap=str(u.cap),
                spent=str(u.spent),
                remaining=str(remaining),
                cap_display=_shown(u.cap, unit),
                spent_display=_shown(u.spent, unit),
                remaining_display=_shown(remaining, unit),
                unit=unit.display if unit.display is not None else UNSET,
                decimals=unit.decimals if unit.decimals is not None else UNSET,
            )
        )
    data = ps.PolicyUsage(since_ms=now_ms() - DAY_MS, caps=caps)
    return ok(s.Envelope(success=True, message="daily caps used", data=data))


def policy_routes() -> list[Route]:
    return [
        resource(
            "/policy",
            {
                "GET": Op(
                    get_policy,
                    "read",
                    NONE,
                    Doc(
                        "getPolicy",
                        "The tenant's signing policy in force",
                        TAG,
                        ps.PolicyShownResponse,
                        ERRORS_AUTH,
                    ),
                )
            },
        ),
        resource(
            "/policy/history",
            {
                "GET": Op(
                    policy_history,
                    "read",
                    NONE,
                    Doc(
                        "policyHistory",
                        "Every version of the tenant's policy, oldest first",
                        TAG,
                        ps.PolicyHistoryResponse,
                        ERRORS_AUTH,
                    ),
                )
            },
        ),
        resource(
            "/policy/usage",
            {
                "GET": Op(
                    policy_usage,
                    "read",
                    NONE,
                    Doc(
                        "policyUsage",
                        "Each daily cap of the policy in force against its last 24 h "
                        "(the rules of the families the token may use)",
                        TAG,
                        ps.PolicyUsageResponse,
                        ERRORS_AUTH,
                    ),
                )
            },
        ),
        resource(
            "/policy/test",
            {
                "POST": Op(
                    test_policy,
                    "read",
                    BY_REQUEST,
                    Doc(
                        "testPolicy",
                        "What the policy in force (or a candidate, `policy`) would decide "
                        "on a sign request, and why: nothing signed, no key opened, no cap "
                        "counted",
                        TAG,
                        ps.PolicyDecisionResponse,
                        ("400", "404", "408", "413", "415", *ERRORS_AUTH),
                        request=ps.PolicyTest,
                        description="`request` is the body of the sign endpoint "
                        "`kind` names (its schema, by `kind`). Beyond the schema: "
                        "the request must fit "
                        "the account as that endpoint's must (400 with its codes); an address's "
                        "checksum is checked (`invalid_account_name`).",
                        examples={
                            "transfer": {
                                "family": _FAMILY,
                                "account": "cosmos1w508d6qejxtdg4y5r3zarvary0c5xw7k6ah60c",
                                "kind": "sign-transfer",
                                "request": _TRANSFER,
                            }
                        },
                    ),
                )
            },
        ),
    ]
