"""The seal of a server whose master key is held by Shamir shares (api/sealing.py).

`POST /sys/unseal` takes one share, no token (a sealed server cannot check one:
token digests are keyed from the master key), rate-limited per client address;
`GET /sys/seal-status` says where the unseal stands; `POST /sys/seal` seals again
with the operator token (CHAINKEYS_OPERATOR_TOKEN): sealing stops the service for
every tenant, so no tenant's token may do it. On a server with another provider
they answer 404, saying why.
"""

from __future__ import annotations

import hmac

import msgspec
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from chainkeys.api.auth import NONE
from chainkeys.api.body import required_body
from chainkeys.api.doc import Doc
from chainkeys.api.routes.common import Op, ok, resource
from chainkeys.api.sealing import SealGate
from chainkeys.errors import Forbidden, NotFound, Unauthorized
from chainkeys.unsealing import SealStatus

TAG = "Seal"
NOT_SHAMIR = (
    "this server's master key is not held by Shamir shares "
    "(CHAINKEYS_MASTER_KEY_PROVIDER=shamir): it has no seal"
)


class UnsealRequest(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """One operator's share, as `chainkeys init` or `operator rekey` printed it."""

    share: str


class SealStatusResponse(msgspec.Struct, kw_only=True):
    """Whether the server is sealed, the shares given so far and how many it needs."""

    success: bool
    message: str
    sealed: bool
    progress: int
    threshold: int


def answer(status: SealStatus) -> Response:
    if status.sealed:
        message = f"sealed: {status.progress} of {status.threshold} shares given"
    else:
        message = "unsealed"
    return ok(
        SealStatusResponse(
            success=True,
            message=message,
            sealed=status.sealed,
            progress=status.progress,
            threshold=status.threshold,
        )
    )


def gate_of(request: Request) -> SealGate:
    gate: SealGate | None = getattr(request.app.state, "gate", None)
    if gate is None:
        raise NotFound(NOT_SHAMIR)
    return gate


async def unseal(request: Request) -> Response:
    gate = gate_of(request)
    client = request.client.host if request.client is not None else "-"
    gate.limit(client)
    body = await required_body(request, UnsealRequest)
    return answer(await gate.unseal(body.share))


async def seal_status(request: Request) -> Response:
    return answer(gate_of(request).status())


async def seal(request: Request) -> Response:
    gate = gate_of(request)
    want = gate.store.settings.operator_token
    refusal: Forbidden | Unauthorized | None = None
    if want is None:
        refusal = Forbidden(
            "sealing over HTTP is off: set CHAINKEYS_OPERATOR_TOKEN (or stop the "
            "process: a shamir server starts sealed)"
        )
    else:
        given = request.headers.get("authorization", "").removeprefix("Bearer ").strip()
        if not hmac.compare_digest(given.encode(), want.get_secret_value().encode()):
            refusal = Unauthorized(
                "send the operator token (CHAINKEYS_OPERATOR_TOKEN) as a bearer token"
            )
    if refusal is not None:  # every refusal audited, whoever sent it
        await gate.refused_seal(refusal.code)
        raise refusal
    await gate.seal()
    return answer(gate.status())


def sys_routes() -> list[Route]:
    errors = ("400", "404", "415", "429", "500")
    return [
        resource(
            "/sys/unseal",
            {
                "POST": Op(
                    unseal,
                    None,
                    NONE,
                    Doc(
                        "unseal",
                        "Give one Shamir share (no token; rate-limited per address); the "
                        "threshold-th opens the master key",
                        TAG,
                        SealStatusResponse,
                        errors,
                        request=UnsealRequest,
                        description="A mistyped share fails its check digits "
                        "(nothing counted); a quorum that does not rebuild the unseal key "
                        "is refused as "
                        "`wrong_shares` and the progress starts again.",
                    ),
                )
            },
        ),
        resource(
            "/sys/seal-status",
            {
                "GET": Op(
                    seal_status,
                    None,
                    NONE,
                    Doc(
                        "sealStatus",
                        "Whether this server is sealed, and the shares given so far",
                        TAG,
                        SealStatusResponse,
                        ("404", "500"),
                    ),
                )
            },
        ),
        resource(
            "/sys/seal",
            {
                "POST": Op(
                    seal,
                    None,
                    NONE,
                    Doc(
                        "seal",
                        "Seal this server again (the operator token, CHAINKEYS_OPERATOR_TOKEN): "
                        "its keys are dropped until the shares are given again",
                        TAG,
                        SealStatusResponse,
                        ("401", "403", "404", "500"),
                    ),
                )
            },
        ),
    ]
