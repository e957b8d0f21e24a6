"""The API document and its browsable page, served from packaged assets.

Swagger UI comes from the pinned `swagger-ui-bundle-v2` wheel (no CDN): the
page where people paste bearer tokens loads nothing from elsewhere, and a
Content-Security-Policy says so to the browser too.
"""

from __future__ import annotations

from typing import Any

from litestar import Response, get
from litestar.static_files import create_static_files_router
from swagger_ui_bundle import swagger_ui_path  # type: ignore[import-untyped]

ASSETS = "/docs/static"
PAGE = f"""<!doctype html>
<html><head><meta charset="utf-8"><title>chainkeys API</title>
<link rel="stylesheet" href="{ASSETS}/swagger-ui.css">
</head><body><div id="ui"></div>
<script src="{ASSETS}/swagger-ui-bundle.js"></script>
<script src="{ASSETS}/chainkeys-init.js"></script>
</body></html>""".encode()
INIT = b'SwaggerUIBundle({url: "/openapi.json", dom_id: "#ui"});\n'
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'"
)


def docs_routes(openapi: bytes) -> list[Any]:
    common: dict[str, Any] = {"include_in_schema": False}

    @get("/openapi.json", **common)
    async def document() -> Response[bytes]:
        return Response(openapi, media_type="application/json")

    @get("/docs", **common)
    async def page() -> Response[bytes]:
        return Response(PAGE, media_type="text/html; charset=utf-8",
                        headers={"Content-Security-Policy": CSP})  # fmt: skip

    @get(f"{ASSETS}/chainkeys-init.js", **common)
    async def init() -> Response[bytes]:
        return Response(INIT, media_type="text/javascript")

    assets = create_static_files_router(
        path=ASSETS, directories=[swagger_ui_path], include_in_schema=False
    )
    return [document, page, init, assets]
