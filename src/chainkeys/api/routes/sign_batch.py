"""`POST /{family}/{accountName}/sign-batch`: up to 1,000 of an account's sign requests
in one request and one transaction (signing/batch.py), each answered in its place as
its endpoint alone would answer it.

Declared in the route table like the sign routes (scope `sign`, the family's own
rule), so the route x token matrix covers it by construction; its body cap is its own
(`Op.max_body`, 1 MiB), stated in the document. Thin: read the body into items
(api/batch_schemas.py), call the batch, shape each outcome.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from chainkeys.api import batch_schemas as bs
from chainkeys.api import schemas as s
from chainkeys.api.auth import services_of
from chainkeys.api.body import required_body
from chainkeys.api.doc import Doc
from chainkeys.api.errors import status_of
from chainkeys.api.params import ACCOUNT_NAMES
from chainkeys.api.routes.approvals import approval
from chainkeys.api.routes.common import ERRORS_AUTH, Op, ok, resource
from chainkeys.api.routes.signing import BEYOND_THE_SCHEMA, envelope_type
from chainkeys.approvals.service import ApprovalView
from chainkeys.chains.registry import FAMILIES
from chainkeys.chains.tx.base import Signed
from chainkeys.errors import ChainkeysError
from chainkeys.signing.batch import KIND, MAX_BODY, MAX_ITEMS, Outcome, sign_batch
from chainkeys.tokens.service import Principal

DESCRIPTION = (
    "Up to {max_items:,} of this account's sign requests in one request: each item is the "
    "body of one of its sign endpoints plus `kind`, that endpoint's last path segment "
    "({kinds}). Each item is decided, capped, audited and answered exactly as that "
    "endpoint alone would answer it, in order: an item's caps and conditions see what the "
    "items before it spent. Its answer is in `results`, in the item's place: `status` "
    "(200 signed, 202 waits for approval, or the refusal's), with `data` or `code` and "
    "`message`. The batch's signatures, audit rows and cap counts are one transaction: "
    "none is handed out unless all of it committed. The batch as a whole is refused "
    "(400 `invalid_batch`, nothing signed) when it has no item or more than "
    "{max_items:,}, an item is not an object with its `kind`, or a kind is not one of this "
    "family's; each item's JSON must fit the server's body limit "
    "(`CHAINKEYS_MAX_BODY_BYTES`) as the endpoint's body must (else that item's 413). "
    "A batch counts as one request against a token's rate limit."
)


def result(outcome: Outcome, who: Principal) -> bs.BatchResult:
    """An item's outcome as its endpoint would have answered it."""
    if isinstance(outcome, Signed):
        return bs.BatchResult(status=200, data=outcome.data)
    if isinstance(outcome, ApprovalView):
        return bs.BatchResult(status=202, data=approval(outcome, who))
    return bs.BatchResult(status=status_of(outcome), code=outcome.code, message=outcome.message)


def summary_of(results: list[bs.BatchResult]) -> str:
    signed = sum(r.status == 200 for r in results)
    held = sum(r.status == 202 for r in results)
    refused = len(results) - signed - held
    return f"{signed} signed, {held} waiting for approval, {refused} refused"


def batch_route(family: str) -> Route:
    account = ACCOUNT_NAMES[family]
    request_type = bs.batch_request(family)

    async def sign(request: Request, principal: Any) -> Response:
        svc = services_of(request)
        try:
            name = account.read(request)
            body = await required_body(request, bs.BatchBody)
            items = bs.read_items(family, body.items, svc.settings.max_body_bytes)
        except ChainkeysError as exc:  # a bad name; too large, malformed, no batch: audited
            given = str(request.path_params.get("accountName", ""))
            await svc.signing.refuse_unread(principal, family, given, KIND, exc)
            raise
        outcomes = await sign_batch(svc.signing, principal, family, name, items)
        results = [result(o, principal) for o in outcomes]
        data = bs.BatchResults(results=results)
        return ok(s.Envelope(success=True, message=summary_of(results), data=data))

    title = family.capitalize()
    kinds = ", ".join(f"`{k.path}`" for k in FAMILIES[family].signers)
    doc = Doc(
        f"{family}SignBatch",
        f"{title}: sign up to {MAX_ITEMS:,} requests in one transaction",
        f"{title} signing",
        envelope_type(bs.BatchResults),
        ("400", "404", "408", "413", "415", *ERRORS_AUTH),
        request=request_type,
        parameters=(account,),
        description=f"{DESCRIPTION.format(max_items=MAX_ITEMS, kinds=kinds)} {BEYOND_THE_SCHEMA}",
        examples=_examples(family),
    )
    path = f"/{family}/{{accountName}}/{KIND}"
    return resource(path, {"POST": Op(sign, "sign", family, doc, max_body=MAX_BODY)})


def _examples(family: str) -> dict[str, Any]:
    """Each kind's first example as an item, in one batch."""
    items = [
        {"kind": kind.path, **next(iter(kind.examples.values()))}
        for kind in FAMILIES[family].signers
        if kind.examples
    ]
    return {"mixed": {"items": items}} if items else {}


def sign_batch_routes() -> list[Route]:
    return [batch_route(family) for family in FAMILIES]
