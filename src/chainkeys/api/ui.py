"""The console, `/ui`: packaged static files, no build chain, no CDN.

One page (`index.html`) and its ES modules, served from `api/static/console/`, read
once at start. The page holds a bearer token that may sign or approve spending, so
it is locked down: a Content-Security-Policy that lets it load only its own scripts
and styles and talk only to this origin (no inline script or style, no eval, so
injected markup cannot run), no framing (clickjacking an Approve button), no
referrer, no caching. It calls the same JSON API as every client; the token stays in
the tab's sessionStorage. `/ui/approvals` (the approvers' page before the console)
opens the console on its approvals page.
"""

from __future__ import annotations

from importlib.resources import files
from importlib.resources.abc import Traversable
from typing import Final

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute

from chainkeys.api.auth import NONE
from chainkeys.api.routes.common import Op, resource

CSP: Final = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self' blob:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
HEADERS: Final = {
    "Content-Security-Policy": CSP,
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
MEDIA: Final = {  # the only kinds of file served (anything else in the folder is not)
    ".html": "text/html; charset=utf-8",
    ".mjs": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}
PAGE_PATHS: Final = ("/ui", "/ui/approvals")  # both answer the console's page


def assets(root: Traversable | None = None) -> dict[str, tuple[bytes, str]]:
    """URL path → (body, media type) of every servable file under static/console/."""
    root = root or files("chainkeys.api") / "static" / "console"
    out: dict[str, tuple[bytes, str]] = {}

    def walk(node: Traversable, prefix: str) -> None:
        for child in sorted(node.iterdir(), key=lambda c: c.name):
            if child.is_dir():
                walk(child, f"{prefix}{child.name}/")
                continue
            suffix = "." + child.name.rsplit(".", 1)[-1]
            if suffix in MEDIA:
                out[f"/ui/{prefix}{child.name}"] = (child.read_bytes(), MEDIA[suffix])

    walk(root, "")
    page = out.pop("/ui/index.html")
    for path in PAGE_PATHS:
        out[path] = page
    return out


def ui_routes() -> list[BaseRoute]:
    routes: list[BaseRoute] = []
    for path, (body, media_type) in assets().items():

        async def asset(
            request: Request, body: bytes = body, media_type: str = media_type
        ) -> Response:
            return Response(body, media_type=media_type, headers=HEADERS)

        routes.append(resource(path, {"GET": Op(asset, None, NONE)}))
    return routes
