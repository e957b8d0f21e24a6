"""Routing without the framework's wrappers: a request is resolved once, then handled.

`Starlette(...)` puts two error middlewares, a router, the route and a
request/response adapter around every handler, each wrapping `send` again; a
sampled profile of a `get` under load spent about a fifth of its time in them.
None of it is needed here: every chainkeys handler already turns every error into
the envelope (`routes/common.py`), and the transport (`transport.py`) does the
rest. So this router keeps what costs little and is public API of Starlette, its
`Route` (the path compiler and `matches`), `Request`, `Response` and, for
the one-off lifespan, its `Router`, and drops the layers:

- a path without parameters is found with one dict lookup; the others are tried
  in the order given, but only those of the request path's shape (`Shapes`: its
  number of segments, its first and last segment), so a sign request tries one
  regular expression, not the twenty-odd routes before it;
- a chainkeys route's endpoint is called directly with the `Request`; anything
  else (the docs' static files) is handed to the route as Starlette would;
- no such path is the envelope's 404 and a path without the method a 405 with
  `Allow`, as before; a route of the method is looked for among the patterns too
  before a literal path's 405 (`resolve`).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from starlette.requests import Request
from starlette.routing import BaseRoute, Match, Route
from starlette.routing import Router as LifespanRouter

from chainkeys import errors as e
from chainkeys.api.errors import (
    NO_SUCH_ENDPOINT,
    ORDER,
    MethodNotAllowed,
    error_response,
    internal_error,
)
from chainkeys.api.transport import Receive, Scope, Send

Lifespan = Callable[["Router"], contextlib.AbstractAsyncContextManager[None]]


class AppState:
    """`request.app.state`: plain attributes (Starlette's `State` answers each read
    through `__getattr__`, three times a request)."""

    __slots__ = ("gate", "rate_limiter", "services")

    def __init__(self) -> None:
        self.services: Any = None
        self.rate_limiter: Any = None
        self.gate: Any = None  # a shamir server's seal (api/sealing.py); None: no seal


class Router:
    """The ASGI app under the transport: `state` is `request.app.state`."""

    def __init__(self, routes: Sequence[BaseRoute], lifespan: Lifespan) -> None:
        self.routes = list(routes)
        self.state = AppState()
        self.exact: dict[str, Route] = {}
        self.patterns: list[BaseRoute] = []
        for route in self.routes:
            if isinstance(route, Route) and "{" not in route.path:
                self.exact[route.path] = route
            else:
                self.patterns.append(route)
        self.shapes = Shapes(self.patterns)

        @contextlib.asynccontextmanager
        async def context(app: Any) -> AsyncIterator[None]:
            async with lifespan(self):
                yield

        self._lifespan = LifespanRouter(lifespan=context)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        scope["app"] = self
        if scope["type"] != "http":
            await self._lifespan(scope, receive, send)
            return
        gate = self.state.gate
        if gate is not None and gate.sealed:  # sealed: the gate answers all but the unseal
            sealed = await gate.while_sealed(scope["path"])
            if sealed is not None:
                await sealed(scope, receive, send)
                return
        route, partial = self.resolve(scope)
        if route is None:
            if partial is not None:
                await self._not_allowed(scope, receive, send, partial)
            else:
                await error_response(e.NotFound(NO_SUCH_ENDPOINT))(scope, receive, send)
            return
        scope["route"] = route  # the metrics' label (transport.py)
        endpoint = getattr(route, "endpoint", None)
        if endpoint is None or not hasattr(endpoint, "ops"):
            await route.handle(scope, receive, send)  # a Mount: the docs' static files
            return
        try:
            response = await endpoint(Request(scope, receive, send))
        except Exception as exc:  # the endpoint answers every error itself; never a 5xx page
            response = internal_error(exc)
        await response(scope, receive, send)

    def resolve(self, scope: Scope) -> tuple[BaseRoute | None, BaseRoute | None]:
        """(the route, None), or (None, a route of the path without the method: 405),
        or (None, None): 404. As a scan of every route in order would answer: a full
        match wins over a partial one wherever it is, so `GET /cosmos/multisig` is the
        account route's (a 400 for its name), not a 405 from `POST /cosmos/multisig`."""
        exact = self.exact.get(scope["path"])
        if exact is not None and (exact.methods is None or scope["method"] in exact.methods):
            scope["path_params"] = {}
            return exact, None
        partial: BaseRoute | None = exact
        for candidate in self.shapes.candidates(scope["path"]):
            match, child = candidate.matches(scope)
            if match is Match.FULL:
                scope.update(child)
                return candidate, None
            if match is Match.PARTIAL and partial is None:
                partial = candidate
        return None, partial

    def allowed(self, path: str) -> list[str]:
        """Every method some route answers on `path` (the 405's `Allow`): at
        `/cosmos/multisig`, `POST` (its own route) and `GET`, `DELETE` (the account's)."""
        routes = [r for r in (self.exact.get(path), *self.shapes.candidates(path)) if r is not None]
        scope = {"type": "http", "path": path, "method": "", "root_path": ""}
        methods = {
            m
            for r in routes
            if r.matches(scope)[0] is not Match.NONE
            for m in getattr(r, "methods", None) or ()
        }
        return sorted((m for m in methods if m in ORDER), key=ORDER.index)

    async def _not_allowed(
        self, scope: Scope, receive: Receive, send: Send, route: BaseRoute
    ) -> None:
        scope["route"] = route
        message = f"{scope['method'][:20]} is not allowed on {scope['path'][:100]}"
        refusal = MethodNotAllowed(message, allow=", ".join(self.allowed(scope["path"])))
        await error_response(refusal)(scope, receive, send)


class Shapes:
    """The pattern routes a path can match, by its shape, in the order given.

    A `{name}` parameter matches one non-empty segment (Starlette's `[^/]+`), so a
    route whose path has n segments matches only paths of n segments whose literal
    segments are its own. The candidates of a path are looked up by (n, its first
    segment, its last segment), each segment reduced to a literal some route has or
    None: a bounded table, built as paths arrive. A route this cannot reason about (a
    Mount, a convertor such as `{p:path}`) is a candidate of every path.
    """

    def __init__(self, routes: Sequence[BaseRoute]) -> None:
        self.routes = list(routes)
        self._segments: list[tuple[str | None, ...] | None] = [_segments(r) for r in routes]
        literal = [s for s in self._segments if s is not None]
        self._longest = max((len(s) for s in literal), default=0)
        self._firsts = {s[1] for s in literal if s[1] is not None}
        self._lasts = {s[-1] for s in literal if s[-1] is not None}
        self._everywhere = [r for r, s in zip(routes, self._segments, strict=True) if s is None]
        self._table: dict[tuple[int, str | None, str | None], list[BaseRoute]] = {}

    def candidates(self, path: str) -> list[BaseRoute]:
        parts = path.split("/")
        n = len(parts)
        if n > self._longest:
            return self._everywhere
        first = parts[1] if n > 1 and parts[1] in self._firsts else None
        last = parts[-1] if parts[-1] in self._lasts else None
        key = (n, first, last)
        found = self._table.get(key)
        if found is None:
            found = self._table[key] = self._select(n, first, last)
        return found

    def _select(self, n: int, first: str | None, last: str | None) -> list[BaseRoute]:
        return [
            route
            for route, segments in zip(self.routes, self._segments, strict=True)
            if segments is None
            or (len(segments) == n and _fits(segments[1], first) and _fits(segments[-1], last))
        ]


def _fits(segment: str | None, seen: str | None) -> bool:
    """A route's segment (None: a parameter) against a path's, reduced as in `candidates`
    (None: no route's literal, so only a parameter fits it)."""
    return segment is None or segment == seen


def _segments(route: BaseRoute) -> tuple[str | None, ...] | None:
    """A route's path split at "/", each parameter None; None for a route whose
    matching is not one parameter per segment."""
    if not isinstance(route, Route):  # (a Route's path starts with "/": Starlette checks)
        return None
    out: list[str | None] = []
    for part in route.path.split("/"):
        if "{" not in part and "}" not in part:
            out.append(part)
        elif (
            part.startswith("{")
            and part.endswith("}")
            and part.count("{") == 1
            and (":" not in part or part.endswith(":str}"))
        ):
            out.append(None)
        else:
            return None
    return tuple(out)
