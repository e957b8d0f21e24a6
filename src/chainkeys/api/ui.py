"""The approver page, `/ui/approvals`: packaged static files, no build chain, no CDN.

The page holds a bearer token that can approve spending, so it is locked down:
a Content-Security-Policy that lets it load only its own script and style and
talk only to this origin (no inline script, so injected markup cannot run),
no framing (clickjacking an Approve button), no referrer, no caching. It calls
the same JSON API as every client; the token stays in the tab's sessionStorage.
"""

from __future__ import annotations

from importlib.resources import files
from typing import Final

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute

from chainkeys.api.auth import NONE
from chainkeys.api.routes.common import Op, resource

CSP: Final = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
HEADERS: Final = {
    "Content-Security-Policy": CSP,
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
ASSETS: Final = {  # path → (packaged file, media type)
    "/ui/approvals": ("approvals.html", "text/html; charset=utf-8"),
    "/ui/approvals.js": ("approvals.js", "text/javascript; charset=utf-8"),
    "/ui/approvals.css": ("approvals.css", "text/css; charset=utf-8"),
    "/ui/favicon.svg": ("favicon.svg", "image/svg+xml"),
}


def ui_routes() -> list[BaseRoute]:
    static = files("chainkeys.api") / "static"
    routes: list[BaseRoute] = []
    for path, (name, media_type) in ASSETS.items():
        body = (static / name).read_bytes()

        async def asset(
            request: Request, body: bytes = body, media_type: str = media_type
        ) -> Response:
            return Response(body, media_type=media_type, headers=HEADERS)

        routes.append(resource(path, {"GET": Op(asset, None, NONE)}))
    return routes
