"""The console, `/ui`: packaged static files, no build chain, no CDN.

One page (`index.html`) and its ES modules, served from `api/static/console/`, read
once at start. The page holds a bearer token that may sign or approve spending, so
it is locked down: a Content-Security-Policy that lets it load only its own scripts
and styles and talk only to this origin (no inline script or style, no eval, so
injected markup cannot run), no framing (clickjacking an Approve button), no
referrer, no caching. It calls the same JSON API as every client; the token stays in
the tab's sessionStorage. `/ui/approvals` (the approvers' page before the console)
opens the console on its approvals page.

A sealed server (Shamir shares, api/sealing.py) answers everything but the unseal with
503 `sealed`; its `/ui` instead answers a page that says so and how to unseal
(`sealed.html`, with the console's style and a script that reads /sys/seal-status:
what any caller may read, no share set's id), so a person who opens the console sees
why it is closed rather than a JSON envelope.
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
SEALED_PAGE: Final = "/ui/sealed.html"  # answered at PAGE_PATHS while sealed, never itself
# what the sealed page loads: served while sealed (nothing in them needs the keys)
SEALED_ASSETS: Final = frozenset({"/ui/console.css", "/ui/favicon.svg", "/ui/sealed.mjs"})


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


def _answer(body: bytes, media_type: str) -> Response:
    return Response(body, media_type=media_type, headers=HEADERS)


class SealedPages:
    """What `/ui` answers while the server is sealed (api/sealing.py asks first)."""

    def __init__(self, found: dict[str, tuple[bytes, str]] | None = None) -> None:
        found = found if found is not None else assets()
        self.page = found[SEALED_PAGE]
        self.files = {path: found[path] for path in SEALED_ASSETS}

    def answer(self, path: str) -> Response | None:
        """The sealed page at the console's paths (503: it is not the console), its
        style and script; None for any other path (the gate's 503 envelope)."""
        if path in PAGE_PATHS:
            response = _answer(*self.page)
            response.status_code = 503
            return response
        found = self.files.get(path)
        return _answer(*found) if found is not None else None


def ui_routes() -> list[BaseRoute]:
    routes: list[BaseRoute] = []
    for path, (body, media_type) in assets().items():
        if path == SEALED_PAGE:
            continue

        async def asset(
            request: Request, body: bytes = body, media_type: str = media_type
        ) -> Response:
            return _answer(body, media_type)

        routes.append(resource(path, {"GET": Op(asset, None, NONE)}))
    return routes
