"""The API document and its browsable page, served from packaged assets.

Swagger UI comes from the pinned `swagger-ui-bundle-v2` wheel (no CDN): the
page where people paste bearer tokens loads nothing from elsewhere, and a
Content-Security-Policy says so to the browser too.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Mount
from starlette.staticfiles import StaticFiles
from swagger_ui_bundle import swagger_ui_path  # type: ignore[import-untyped]

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


def docs_routes(openapi: bytes) -> list[BaseRoute]:
    async def document(request: Request) -> Response:
        return Response(openapi, media_type="application/json")

    async def page(request: Request) -> Response:
        return Response(PAGE, media_type="text/html", headers={"Content-Security-Policy": CSP})

    async def init(request: Request) -> Response:
        return Response(INIT, media_type="text/javascript")

    return [
        resource("/openapi.json", {"GET": Op(document, None)}),
        resource("/docs", {"GET": Op(page, None)}),
        resource("/docs/init.js", {"GET": Op(init, None)}),
        Mount(ASSETS, app=StaticFiles(directory=swagger_ui_path)),
    ]
