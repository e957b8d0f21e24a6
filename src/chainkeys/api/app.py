"""create_app(settings): the ASGI application."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import msgspec
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from chainkeys import logs
from chainkeys.api import schemas as s
from chainkeys.api.envelope import endpoint, error_response, respond
from chainkeys.api.openapi import build_openapi
from chainkeys.api.ratelimit import with_rate_limiter
from chainkeys.api.routes import account_routes, list_audit, services
from chainkeys.chains.registry import FAMILIES
from chainkeys.config import Settings
from chainkeys.errors import ChainkeysError, MethodNotAllowed, NotFound
from chainkeys.service import Services, open_services

access_log = logging.getLogger("chainkeys.access")
REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")

DOCS_HTML = """<!doctype html>
<html><head><meta charset="utf-8"><title>chainkeys API</title>
<link rel="stylesheet" href="https://cdn.jsdelivr.net/npm/swagger-ui-dist@5/swagger-ui.css">
</head><body><div id="ui"></div>
<script src="https://cdn.jsdelivr.net/npm/swagger-ui-dist@5/swagger-ui-bundle.js"></script>
<script>SwaggerUIBundle({url: "/openapi.json", dom_id: "#ui"});</script>
</body></html>"""


def networks_body() -> s.NetworksResponse:
    families = {
        name: s.FamilyNetworks(
            default=fam.default_network,
            networks=[
                s.NetworkInfo(
                    name=n.name,
                    testnet=n.testnet,
                    coin_type=n.coin_type,
                    chain_id=n.chain_id,
                    bech32_prefix=n.hrp,
                )
                for n in fam.networks.values()
            ],
        )
        for name, fam in FAMILIES.items()
    }
    return s.NetworksResponse(
        success=True, message="networks listed", data=s.NetworksData(families=families)
    )


async def purge_expired(svc: Services, every: float = 600.0) -> None:
    """Expired idempotency records hold sealed one-time keys: drop them promptly
    (and deleted accounts once their retention period is over)."""
    while True:
        try:
            await svc.accounts.purge_expired()
        except ChainkeysError:
            access_log.warning("purge of expired records failed; will retry")
        await asyncio.sleep(every)


class RequestContext:
    """X-Request-ID on every response (the caller's if sane, else new) and an access log.

    The access log names method, path, status and time; never headers or bodies.
    """

    def __init__(self, app: ASGIApp, access_log: bool = True) -> None:
        self.app = app
        self.access_log = access_log

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given = ""
        for key, value in scope["headers"]:
            if key == b"x-request-id":
                given = value.decode("latin-1")
                break
        request_id = given if REQUEST_ID.match(given) else uuid.uuid4().hex
        scope.setdefault("state", {})["request_id"] = request_id
        logs.request_id.set(request_id)
        started = time.perf_counter()
        status = 500

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = list(message.get("headers", []))
                headers.append((b"x-request-id", request_id.encode()))
                message = {**message, "headers": headers}
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            if self.access_log and access_log.isEnabledFor(logging.INFO):
                access_log.info(
                    "%s %s %d %.1fms",
                    scope["method"],
                    scope["path"][:200],
                    status,
                    (time.perf_counter() - started) * 1000,
                    extra={"request_id": request_id},
                )


async def http_error(request: Request, exc: Exception) -> Response:
    """Router-level 404/405 in the same envelope as everything else."""
    assert isinstance(exc, HTTPException)
    err: ChainkeysError
    if exc.status_code == 405:
        err = MethodNotAllowed(f"{request.method} is not allowed on {request.url.path[:100]}")
    elif exc.status_code == 404:
        err = NotFound("no such endpoint")
    else:
        err = ChainkeysError(exc.detail or "error")
        err.status = exc.status_code
        err.code = "http_error"
    return error_response(err, headers=dict(exc.headers or {}))


def create_app(settings: Settings | None = None, svc: Services | None = None) -> Starlette:
    """The application; opens its own services at startup unless given them."""
    settings = settings or Settings()
    openapi = msgspec.json.encode(build_openapi(settings.list_max_limit))
    networks = respond(networks_body()).body

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        if svc is not None:
            app.state.services = svc
            yield
            return
        opened = await open_services(settings)
        app.state.services = opened
        purger = asyncio.create_task(purge_expired(opened))
        try:
            yield
        finally:
            purger.cancel()
            await opened.close()
            logs.flush()

    @endpoint
    async def healthz(request: Request) -> Response:
        await services(request).db_ping()
        return respond(s.MessageResponse(success=True, message="ok"))

    async def get_networks(request: Request) -> Response:
        return Response(networks, media_type="application/json")

    async def get_openapi(request: Request) -> Response:
        return Response(openapi, media_type="application/json")

    async def docs(request: Request) -> Response:
        return HTMLResponse(DOCS_HTML)

    routes = [
        Route("/healthz", healthz, methods=["GET"]),
        Route("/networks", get_networks, methods=["GET"]),
        Route("/openapi.json", get_openapi, methods=["GET"]),
        Route("/docs", docs, methods=["GET"]),
        Route("/audit", list_audit, methods=["GET"]),
        *account_routes(),
    ]
    app = Starlette(
        routes=routes,
        lifespan=with_rate_limiter(lifespan, settings),
        exception_handlers={HTTPException: http_error},
    )
    if svc is not None:
        app.state.services = svc
    app.add_middleware(RequestContext, access_log=settings.access_log)
    return app


def app_factory() -> Any:
    """uvicorn --factory entry point (used by `chainkeys serve`, in every worker process)."""
    settings = Settings()
    logs.configure(settings.log_level, settings.log_json)
    return create_app(settings)
