"""Approver routes: an approver enrols and manages their own passkeys (docs/approvals.md
"Passkeys"). The operator's side (invite codes, script keys, revoking any credential)
is the CLI's (`chainkeys approver`). Thin: decode, call the service, shape the envelope."""

from __future__ import annotations

from typing import Annotated

from msgspec import UNSET, Meta
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from chainkeys.api import approval_schemas as aps
from chainkeys.api import params
from chainkeys.api import schemas as s
from chainkeys.api.auth import NONE, services_of
from chainkeys.api.body import required_body
from chainkeys.api.doc import Doc
from chainkeys.api.routes.common import ERRORS_AUTH, Op, ok, resource
from chainkeys.approvals.credentials import CredentialRow
from chainkeys.clock import iso
from chainkeys.tokens.service import Principal

TAG = "Approvers"
CREDENTIAL = params.Param(
    "id", "path", Annotated[str, Meta(min_length=1, max_length=40)], "the credential's id (apc_…)"
)


def credential(row: CredentialRow) -> aps.Credential:
    return aps.Credential(
        id=row.id,
        kind=row.kind,
        label=row.label,
        group=row.approver_group,
        created_at=iso(row.created_ms),
        last_used_at=iso(row.last_used_ms) if row.last_used_ms else UNSET,
        revoked_at=iso(row.revoked_ms) if row.revoked_ms else UNSET,
    )


async def creation_options(request: Request, principal: Principal) -> Response:
    body = await required_body(request, aps.EnrolCode)
    options = await services_of(request).approvals.passkeys.creation_options(principal, body.code)
    return ok(s.Envelope(success=True, message="create a passkey with these", data=options))


async def register(request: Request, principal: Principal) -> Response:
    body = await required_body(request, aps.CredentialBody)
    row = await services_of(request).approvals.passkeys.register(
        principal, body.code, body.credential
    )
    data = aps.CredentialCreated(id=row.id, created_at=iso(row.created_ms))
    return ok(s.Envelope(success=True, message="passkey enrolled", data=data))


async def list_credentials(request: Request, principal: Principal) -> Response:
    rows = await services_of(request).approvals.passkeys.mine(principal)
    data = aps.CredentialList(credentials=[credential(r) for r in rows])
    return ok(s.Envelope(success=True, message="credentials listed", data=data))


async def remove(request: Request, principal: Principal) -> Response:
    row = await services_of(request).approvals.passkeys.remove(principal, CREDENTIAL.read(request))
    return ok(s.Envelope(success=True, message="credential revoked", data=credential(row)))


def approver_routes() -> list[Route]:
    errors = ("400", "403", "404", "409", *ERRORS_AUTH)
    docs = {
        "options": Doc(
            "approverCredentialOptions",
            "WebAuthn creation options for an enrolment code",
            TAG,
            aps.CreationOptionsResponse,
            errors,
            request=aps.EnrolCode,
            examples={"code": {"code": "cki_3q2-7wVb1XyZ0aBcDeFgHi"}},
            description="The code is an operator's (chainkeys approver invite: 15 "
            "minutes, for this token's label and group). Resident key and user "
            "verification required; the RP is CHAINKEYS_PUBLIC_URL's host. Beyond "
            "the schema: without CHAINKEYS_PUBLIC_URL on the server, 400 "
            "`passkeys_not_configured`.",
        ),
        "register": Doc(
            "registerApproverCredential",
            "Enrol a passkey (spends the code)",
            TAG,
            aps.CredentialCreatedResponse,
            errors,
            request=aps.CredentialBody,
            description="`credential` is the authenticator's registration "
            "response (PublicKeyCredential.toJSON()). Beyond the schema: it must "
            "be an attestation made for this server's challenge and origin (400 "
            "`registration_invalid`); without CHAINKEYS_PUBLIC_URL, 400 "
            "`passkeys_not_configured`.",
        ),
        "list": Doc(
            "listApproverCredentials",
            "Your passkeys and keys",
            TAG,
            aps.CredentialListResponse,
            ERRORS_AUTH,
        ),
        "remove": Doc(
            "removeApproverCredential",
            "Revoke one of your credentials",
            TAG,
            aps.CredentialResponse,
            ("404", *ERRORS_AUTH),
            parameters=(CREDENTIAL,),
            description="Its signatures count no more, on votes already cast too "
            "(they are verified again when the quorum signs).",
        ),
    }
    return [
        resource(
            "/approvers/me/credentials/options",
            {"POST": Op(creation_options, "approve|admin", NONE, docs["options"])},
        ),
        resource(
            "/approvers/me/credentials",
            {
                "GET": Op(list_credentials, "approve|admin", NONE, docs["list"]),
                "POST": Op(register, "approve|admin", NONE, docs["register"]),
            },
        ),
        resource(
            "/approvers/me/credentials/{id}",
            {"DELETE": Op(remove, "approve|admin", NONE, docs["remove"])},
        ),
    ]
