"""Approval routes: list and read what the caller may see, vote (approvers), cancel
(the requester). Thin: decode, call the services, shape the envelope."""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec import UNSET
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from chainkeys.api import approval_schemas as aps
from chainkeys.api import params
from chainkeys.api import schemas as s
from chainkeys.api.auth import AUTHENTICATED, BY_REQUEST, services_of
from chainkeys.api.body import json_body, required_body
from chainkeys.api.doc import Doc
from chainkeys.api.routes.common import ERRORS_AUTH, Op, ok, paged, resource
from chainkeys.approvals.proofs import Proof
from chainkeys.approvals.service import ApprovalView
from chainkeys.tokens.service import Principal

TAG = "Approvals"
DECISION = params.Param(
    "decision",
    "query",
    params.enum(("approve", "reject")),
    "the vote to sign: approve or reject",
    required=True,
)


def approval(view: ApprovalView, who: Principal) -> aps.Approval:
    """The approval as `who` sees it: whether it may cancel it is the caller's own."""
    record: dict[str, Any] = view.record()
    return msgspec.convert({**record, "cancellable": view.cancellable_by(who)}, aps.Approval)


def answer(view: ApprovalView, who: Principal, message: str, status: int = 200) -> Response:
    response = ok(s.Envelope(success=True, message=message, data=approval(view, who)))
    response.status_code = status
    return response


def approval_id(request: Request) -> str:
    value: str = params.APPROVAL_ID.read(request)
    return value


async def list_approvals(request: Request, principal: Principal) -> Response:
    views, cursor = await services_of(request).approvals.page(
        principal, params.APPROVAL_STATE.read(request), *paged(request)
    )
    data = aps.ApprovalList(
        approvals=[approval(v, principal) for v in views], next_cursor=cursor or UNSET
    )
    return ok(s.Envelope(success=True, message="approvals listed", data=data))


async def get_approval(request: Request, principal: Principal) -> Response:
    view = await services_of(request).approvals.get(principal, approval_id(request))
    return answer(view, principal, f"approval {view.row.state}")


def proof(body: aps.ApproveBody | aps.RejectBody) -> Proof | None:
    """The passkey assertion or key signature a vote carries (None: the token alone)."""
    if body.assertion is not None:
        return Proof(assertion=body.assertion)
    if body.signature is not None:
        return Proof(credential=body.signature.credential, signature=body.signature.value)
    return None


async def approve(request: Request, principal: Principal) -> Response:
    body = await required_body(request, aps.ApproveBody)
    view = await services_of(request).signing.vote(
        principal, approval_id(request), True, body.digest, None, proof(body)
    )
    return answer(view, principal, f"approval {view.row.state}")


async def reject(request: Request, principal: Principal) -> Response:
    body = await json_body(request, aps.RejectBody) or aps.RejectBody()
    view = await services_of(request).signing.vote(
        principal, approval_id(request), False, None, body.reason, proof(body)
    )
    return answer(view, principal, f"approval {view.row.state}")


async def challenge(request: Request, principal: Principal) -> Response:
    decision = DECISION.read(request)
    options = await services_of(request).approvals.challenge(
        principal, approval_id(request), decision
    )
    return ok(s.Envelope(success=True, message=f"sign this to {decision}", data=options))


async def cancel(request: Request, principal: Principal) -> Response:
    view = await services_of(request).approvals.cancel(principal, approval_id(request))
    return answer(view, principal, "approval cancelled")


def approval_routes(list_max_limit: int) -> list[Route]:
    item = (params.APPROVAL_ID,)
    errors = ("400", "403", "404", "409", "423", *ERRORS_AUTH)
    docs = {
        "list": Doc(
            "listApprovals",
            "Approval requests the caller may see",
            TAG,
            aps.ApprovalListResponse,
            ("400", *ERRORS_AUTH),
            parameters=(params.APPROVAL_STATE, params.limit(list_max_limit), params.CURSOR),
            description="The requests the caller's token made, and, for an approver "
            "(`approve` scope), those of its group.",
        ),
        "get": Doc(
            "getApproval",
            "One approval request (with the signed result once signed)",
            TAG,
            aps.ApprovalResponse,
            ("404", *ERRORS_AUTH),
            parameters=item,
            response_examples={"pending": aps.APPROVAL_EXAMPLE},
        ),
        "approve": Doc(
            "approveApproval",
            "Approve, on the digest you looked at",
            TAG,
            aps.ApprovalResponse,
            errors,
            request=aps.ApproveBody,
            parameters=item,
            examples={"approve": {"digest": aps.APPROVAL_EXAMPLE["data"]["digest"]}},
            description="Approvers of the request's group only; never the requester "
            "or a token with its label; one vote per person; none while a freeze holds "
            "over the request's account or tenant (423). The vote that reaches the "
            "quorum signs (the policy, the caps, any freeze and the co-signer are "
            "checked then). On a request "
            "whose rule says `passkey`, the vote carries `assertion` or `signature` "
            "(GET /approvals/{id}/challenge). Beyond the schema: `assertion` is "
            "WebAuthn's free-form response object, and a text in it holding NUL "
            "or an unpaired surrogate is refused (400 `invalid_text`).",
        ),
        "reject": Doc(
            "rejectApproval",
            "Reject (one rejection ends the request)",
            TAG,
            aps.ApprovalResponse,
            errors,
            request=aps.RejectBody,
            request_required=False,
            parameters=item,
            examples={"reject": {"reason": "unknown payee"}},
            description="On a request whose rule says `passkey`, the rejection "
            "carries `assertion` or `signature` as an approval does. Beyond the "
            "schema: a text in `assertion` holding NUL or an unpaired surrogate is "
            "refused (400 `invalid_text`).",
        ),
        "cancel": Doc(
            "cancelApproval",
            "Cancel your own pending request",
            TAG,
            aps.ApprovalResponse,
            errors,
            parameters=item,
        ),
        "challenge": Doc(
            "approvalChallenge",
            "WebAuthn request options to sign a vote with",
            TAG,
            aps.OptionsResponse,
            errors,
            parameters=(*item, DECISION),
            description='Their `challenge` is SHA-256("chainkeys approval v2" '
            "|| id || digest || SHA-256(canonical summary JSON) || decision), the "
            "digest and the summary's SHA-256 in lowercase hex, canonical JSON with its "
            "keys sorted, no whitespace, UTF-8; `summary` beside it is the summary it "
            "covers (derived from the request now: a vote over another summary does not "
            "count). It allows the caller's passkeys; a script key (chainkeys approver "
            "add-key) signs the same 32 bytes. Passkeys need CHAINKEYS_PUBLIC_URL.",
        ),
    }
    return [
        resource(
            "/approvals", {"GET": Op(list_approvals, AUTHENTICATED, BY_REQUEST, docs["list"])}
        ),
        resource(
            "/approvals/{id}", {"GET": Op(get_approval, AUTHENTICATED, BY_REQUEST, docs["get"])}
        ),
        resource(
            "/approvals/{id}/approve", {"POST": Op(approve, "approve", BY_REQUEST, docs["approve"])}
        ),
        resource(
            "/approvals/{id}/reject", {"POST": Op(reject, "approve", BY_REQUEST, docs["reject"])}
        ),
        resource(
            "/approvals/{id}/challenge",
            {"GET": Op(challenge, "approve", BY_REQUEST, docs["challenge"])},
        ),
        resource(
            "/approvals/{id}/cancel",
            {"POST": Op(cancel, AUTHENTICATED, BY_REQUEST, docs["cancel"])},
        ),
    ]
