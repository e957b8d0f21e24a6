"""Governance change routes: admins file, read, vote on and cancel a governed tenant's
changes (docs/governance.md). Thin: decode, call the service, shape the envelope."""

from __future__ import annotations

from typing import Annotated

import msgspec
from msgspec import Meta
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from chainkeys.api import change_schemas as cs
from chainkeys.api import params
from chainkeys.api import schemas as s
from chainkeys.api.auth import NONE, services_of
from chainkeys.api.body import required_body
from chainkeys.api.doc import Doc
from chainkeys.api.routes.common import ERRORS_AUTH, Op, ok, resource
from chainkeys.approvals.proofs import Proof
from chainkeys.chains.registry import FAMILIES
from chainkeys.errors import BadRequest, ChainkeysError
from chainkeys.governance.views import ChangeView
from chainkeys.tokens.service import Principal

TAG = "Governance"
_FAMILY = min(FAMILIES)  # the example's (chains/ names the families)
CHANGE_ID = params.Param(
    "id", "path", Annotated[str, Meta(min_length=1, max_length=40)], "the change's id (chg_…)"
)
CHANGE_STATE = params.Param("state", "query", params.enum(cs.STATES), "only changes in this state")


def answer(view: ChangeView, message: str, status: int = 200) -> Response:
    data = msgspec.convert(view.record(), cs.Change)
    response = ok(s.Envelope(success=True, message=message, data=data))
    response.status_code = status
    return response


def change_id(request: Request) -> str:
    value: str = CHANGE_ID.read(request)
    return value


async def file_change(request: Request, principal: Principal) -> Response:
    governance = services_of(request).governance
    try:
        body = await required_body(request, cs.ChangeBody)
    except ChainkeysError as exc:  # refused before the service sees it: audited all the same
        if exc.code == "unknown_kind":  # a kind this server does not build (yet)
            exc = BadRequest(exc.message, code="unsupported_change_kind")
        await governance.refused(principal, None, exc)
        raise exc from None
    filed = msgspec.to_builtins(body)  # the tag comes back as "kind"
    view = await governance.file(principal, filed)
    message = "change filed: it waits for the admins' quorum"
    if view.secret is not None:
        message += "; the token is shown here only, and works once the change applies"
    return answer(view, message, 202)


async def list_changes(request: Request, principal: Principal) -> Response:
    views = await services_of(request).governance.listed(principal, CHANGE_STATE.read(request))
    data = cs.ChangeList(changes=[msgspec.convert(v.record(), cs.Change) for v in views])
    return ok(s.Envelope(success=True, message=f"{len(views)} changes", data=data))


async def get_change(request: Request, principal: Principal) -> Response:
    view = await services_of(request).governance.get(principal, change_id(request))
    return answer(view, f"change {view.row.state}")


def proof(body: cs.VoteBody) -> Proof | None:
    if body.assertion is not None:
        return Proof(assertion=body.assertion)
    if body.signature is not None:
        return Proof(credential=body.signature.credential, signature=body.signature.value)
    return None


async def vote(request: Request, principal: Principal, decision: str) -> Response:
    body = await required_body(request, cs.VoteBody)
    view = await services_of(request).governance.vote(
        principal, change_id(request), decision, body.digest, proof(body)
    )
    return answer(view, f"change {view.row.state}")


async def approve(request: Request, principal: Principal) -> Response:
    return await vote(request, principal, "approve")


async def reject(request: Request, principal: Principal) -> Response:
    return await vote(request, principal, "reject")


async def cancel(request: Request, principal: Principal) -> Response:
    view = await services_of(request).governance.cancel(principal, change_id(request))
    return answer(view, "change cancelled")


def change_routes() -> list[Route]:
    item = (CHANGE_ID,)
    errors = ("400", "403", "404", "409", *ERRORS_AUTH)
    vote_text = (
        "An admin's vote, signed: `signature` by a key enrolled with `chainkeys admin "
        'add-key` over SHA-256("chainkeys change v1" || id || digest || decision). One '
        "vote per person; the digest must be the change's (409 `digest_mismatch`). "
        "Beyond the schema: a text in `assertion` holding NUL or an unpaired surrogate "
        "is refused (400 `invalid_text`)."
    )
    docs = {
        "file": Doc(
            "fileChange",
            "File a change to the tenant's rules",
            TAG,
            cs.ChangeResponse,
            errors,
            request=cs.ChangeBody,
            status="202",
            examples={
                "policy": {
                    "kind": "policy",
                    "document": {
                        "rules": [{"family": _FAMILY, "effect": "deny", "name": "no-more-for-now"}]
                    },
                },
                "freeze.lift": {"kind": "freeze.lift", "freeze": "frz_5b0c9d1e2f3a4b5c6d7e8f90"},
                "governance": {"kind": "governance", "quorum": 3, "delay": "48h"},
                "token": {
                    "kind": "token",
                    "label": "payouts-bot",
                    "scopes": ["sign"],
                    "families": [_FAMILY],
                    "expires": "90d",
                },
                "admin": {
                    "kind": "admin",
                    "label": "dave",
                    "key": "MCowBQYDK2VwAyEAGb9ECWmEzf6FQbrBZ9w7lshQhqowtrbLDFw4rXAxZuE=",
                },
            },
            description="Admins only, on a governed tenant (409 `not_governed`). The "
            "answer carries the diff in words, whether it loosens anything, and the "
            "digest to vote on. At the quorum a change that only tightens applies at "
            "once; one that loosens anything is scheduled for the tenant's delay. Beyond "
            "the schema: `kind` is a kind this server builds (400 "
            "`unsupported_change_kind`); a policy's `document` a whole valid policy (400 "
            "`invalid_policy` naming the field); a freeze to lift one of the tenant's "
            "that holds (404 `freeze_not_found`, 409 `freeze_ended`); a governance "
            "`delay` a duration (400 `invalid_delay`) and its `quorum` at most the admins "
            "with a live key (409 `quorum_unreachable`); a key P-256 or Ed25519 (400 "
            "`invalid_key`). A token change's answer carries the new token once, to the "
            "admin who files it: it opens nothing until the change applies.",
        ),
        "list": Doc(
            "listChanges",
            "The tenant's changes, newest first",
            TAG,
            cs.ChangeListResponse,
            ("400", *ERRORS_AUTH),
            parameters=(CHANGE_STATE,),
        ),
        "get": Doc(
            "getChange",
            "One change",
            TAG,
            cs.ChangeResponse,
            ("404", *ERRORS_AUTH),
            parameters=item,
        ),
        "approve": Doc(
            "approveChange",
            "Approve a change",
            TAG,
            cs.ChangeResponse,
            errors,
            request=cs.VoteBody,
            parameters=item,
            description=vote_text,
        ),
        "reject": Doc(
            "rejectChange",
            "Reject a change (one rejection ends it)",
            TAG,
            cs.ChangeResponse,
            errors,
            request=cs.VoteBody,
            parameters=item,
            description=vote_text,
        ),
        "cancel": Doc(
            "cancelChange",
            "Cancel a change before it applies",
            TAG,
            cs.ChangeResponse,
            errors,
            parameters=item,
            description="Any one admin, while it is pending or scheduled.",
        ),
    }
    return [
        resource(
            "/changes",
            {
                "POST": Op(file_change, "admin", NONE, docs["file"]),
                "GET": Op(list_changes, "admin", NONE, docs["list"]),
            },
        ),
        resource("/changes/{id}", {"GET": Op(get_change, "admin", NONE, docs["get"])}),
        resource("/changes/{id}/approve", {"POST": Op(approve, "admin", NONE, docs["approve"])}),
        resource("/changes/{id}/reject", {"POST": Op(reject, "admin", NONE, docs["reject"])}),
        resource("/changes/{id}/cancel", {"POST": Op(cancel, "admin", NONE, docs["cancel"])}),
    ]
