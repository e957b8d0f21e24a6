"""create_app(settings): the ASGI application."""

from __future__ import annotations

import asyncio
import contextlib
import gc
from collections.abc import AsyncIterator
from typing import Any

import msgspec

from chainkeys import logs
from chainkeys.api import schemas as s
from chainkeys.api.http import App, Request, Response, Router, log, respond
from chainkeys.api.openapi import build_openapi
from chainkeys.api.ratelimit import with_rate_limiter
from chainkeys.api.routes import add_account_routes, list_audit, services
from chainkeys.chains.registry import FAMILIES
from chainkeys.config import Settings
from chainkeys.errors import ChainkeysError
from chainkeys.service import Services, open_services

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
            log.warning("purge of expired records failed; will retry")
        await asyncio.sleep(every)


def create_app(settings: Settings | None = None, svc: Services | None = None) -> App:
    """The application; opens its own services at startup unless given them."""
    settings = settings or Settings()
    openapi = msgspec.json.encode(build_openapi(settings.list_max_limit))
    networks = respond(networks_body()).body

    @contextlib.asynccontextmanager
    async def lifespan(app: App) -> AsyncIterator[None]:
        if svc is not None:
            app.services = svc
            yield
            return
        opened = await open_services(settings)
        app.services = opened
        # Everything alive now (modules, compiled statements, the chain registry)
        # lives as long as the process: out of the collector's reach, a full
        # collection walks only what requests allocate (less CPU, shorter pauses).
        gc.collect()
        gc.freeze()
        purger = asyncio.create_task(purge_expired(opened))
        try:
            yield
        finally:
            purger.cancel()
            await opened.close()
            logs.flush()

    async def healthz(request: Request) -> Response:
        await services(request).db_ping()
        return respond(s.MessageResponse(success=True, message="ok"))

    async def get_networks(request: Request) -> Response:
        return Response(networks)

    async def get_openapi(request: Request) -> Response:
        return Response(openapi)

    async def docs(request: Request) -> Response:
        return Response(DOCS_HTML.encode(), content_type=b"text/html; charset=utf-8")

    router = Router()
    router.add("/healthz", {"GET": healthz})
    router.add("/networks", {"GET": get_networks})
    router.add("/openapi.json", {"GET": get_openapi})
    router.add("/docs", {"GET": docs})
    router.add("/audit", {"GET": list_audit})
    add_account_routes(router)
    app = App(router, with_rate_limiter(lifespan, settings), access_log=settings.access_log)
    app.services = svc
    return app


def app_factory() -> Any:
    """uvicorn --factory entry point (used by `chainkeys serve`, in every worker process)."""
    settings = Settings()
    logs.configure(settings.log_level, settings.log_json)
    return create_app(settings)
