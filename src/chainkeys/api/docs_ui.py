"""The API document and its browsable page, served from packaged assets.

Swagger UI comes from the pinned `swagger-ui-bundle-v2` wheel (no CDN): the
page where people paste bearer tokens loads nothing from elsewhere, and a
Content-Security-Policy says so to the browser too. Only the two assets the page
uses are served (the wheel's own index.html and oauth2-redirect.html would point at
an outside document), each with the same headers: no framing, no sniffing.
"""

from __future__ import annotations

from pathlib import Path

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute
from swagger_ui_bundle import swagger_ui_path  # type: ignore[import-untyped]

from chainkeys.api.auth import NONE
from chainkeys.api.routes.common import Op, resource

ASSETS = "/docs/static"
PAGE = f"""<!doctype html>
<html><head><meta charset="utf-8"><title>chainkeys API</title>
<link rel="stylesheet" href="{ASSETS}/swagger-ui.css">
</head><body><div id="ui"></div>
<script src="{ASSETS}/swagger-ui-bundle.js"></script>
<script src="/docs/init.js"></script>
</body></html>""".encode()
INIT = b'SwaggerUIBundle({url: "/openapi.json", dom_id: "#ui"});\n'
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'"
)
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
}
SERVED = {"swagger-ui.css": "text/css", "swagger-ui-bundle.js": "text/javascript"}


def docs_routes(openapi: bytes) -> list[BaseRoute]:
    async def document(request: Request) -> Response:
        return Response(openapi, media_type="application/json")

    async def page(request: Request) -> Response:
        return Response(PAGE, media_type="text/html", headers=HEADERS)

    async def init(request: Request) -> Response:
        return Response(INIT, media_type="text/javascript", headers=HEADERS)

    routes: list[BaseRoute] = [
        resource("/openapi.json", {"GET": Op(document, None, NONE)}),
        resource("/docs", {"GET": Op(page, None, NONE)}),
        resource("/docs/init.js", {"GET": Op(init, None, NONE)}),
    ]
    for name, media_type in SERVED.items():
        body = (Path(swagger_ui_path) / name).read_bytes()

        async def asset(request: Request, body: bytes = body, kind: str = media_type) -> Response:
            return Response(body, media_type=kind, headers=HEADERS)

        routes.append(resource(f"{ASSETS}/{name}", {"GET": Op(asset, None, NONE)}))
    return routes
