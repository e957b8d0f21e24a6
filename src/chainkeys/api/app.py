"""create_app(settings): the Litestar application, wrapped in chainkeys' transport layer."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
from collections.abc import AsyncIterator
from typing import Any

import msgspec
from litestar import Litestar
from litestar.handlers import HTTPRouteHandler

from chainkeys import logs
from chainkeys.api.docs_ui import docs_routes
from chainkeys.api.errors import HANDLERS
from chainkeys.api.openapi import build_openapi
from chainkeys.api.ratelimit import build_limiter
from chainkeys.api.routes.accounts import account_routes
from chainkeys.api.routes.service import service_routes
from chainkeys.api.serve import die_with_parent
from chainkeys.api.transport import Transport
from chainkeys.config import Settings
from chainkeys.errors import ChainkeysError
from chainkeys.service import Services, open_services

log = logging.getLogger("chainkeys.api")


async def purge_expired(svc: Services, every: float = 600.0) -> None:
    """Expired idempotency records hold sealed one-time keys: drop them promptly
    (and deleted accounts once their retention period is over)."""
    while True:
        try:
            await svc.accounts.purge_expired()
        except ChainkeysError:
            log.warning("purge of expired records failed; will retry")
        await asyncio.sleep(every)


def api_routes(settings: Settings) -> list[HTTPRouteHandler]:
    """Every documented route."""
    return [*service_routes(settings.list_max_limit), *account_routes(settings.list_max_limit)]


def openapi_document(settings: Settings) -> dict[str, Any]:
    return build_openapi(api_routes(settings))


def create_app(settings: Settings | None = None, svc: Services | None = None) -> Transport:
    """The application; opens its own services at startup unless given them."""
    settings = settings or Settings()
    handlers = api_routes(settings)
    openapi = msgspec.json.encode(build_openapi(handlers))

    @contextlib.asynccontextmanager
    async def lifespan(app: Litestar) -> AsyncIterator[None]:
        limiter = build_limiter(settings)
        app.state.rate_limiter = limiter
        opened = svc
        purger = None
        try:
            if opened is None:
                opened = await open_services(settings)
                # Everything alive now lives as long as the process: out of the
                # collector's reach, a full collection walks only what requests allocate.
                gc.collect()
                gc.freeze()
                purger = asyncio.create_task(purge_expired(opened))
            app.state.services = opened
            yield
        finally:
            if purger is not None:
                purger.cancel()
            if opened is not None and svc is None:
                await opened.close()
            if limiter is not None:
                await limiter.aclose()
            logs.flush()

    litestar = Litestar(
        route_handlers=[*handlers, *docs_routes(openapi)],
        exception_handlers=HANDLERS,
        lifespan=[lifespan],
        openapi_config=None,
        request_max_body_size=None,  # bounded (and timed) by the transport
        logging_config=None,
    )
    litestar.state.services = svc
    return Transport(
        litestar,
        max_body=settings.max_body_bytes,
        body_timeout=settings.body_timeout_seconds,
        access_log=settings.access_log,
    )


def app_factory() -> Any:
    """The server's factory entry point (used by `chainkeys serve`, in every worker)."""
    die_with_parent()
    settings = Settings()
    logs.configure(settings.log_level, settings.log_json)
    return create_app(settings)
