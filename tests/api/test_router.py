"""The router finds a request's route among only the routes of its path's shape
(`api/router.py` `Shapes`): for any path and method, the route it picks, or its
404 or 405, must be the one a scan of every route in order would give."""

from __future__ import annotations

import tempfile

from hypothesis import given, settings
from hypothesis import strategies as st
from starlette.routing import BaseRoute, Match, Route

from chainkeys.api.app import create_app
from chainkeys.api.router import Router, Shapes
from chainkeys.config import Settings


def _router() -> Router:
    with tempfile.TemporaryDirectory(prefix="chainkeys-router-") as data_dir:
        app = create_app(Settings(data_dir=data_dir))  # (nothing is opened until it serves)
    router = app.app
    assert isinstance(router, Router)
    return router


ROUTER = _router()
# every literal segment the routes have, some near misses, and free text
LITERALS = sorted(
    {p for r in ROUTER.patterns for p in getattr(r, "path", "").split("/") if p and "{" not in p}
)
SEGMENT = st.one_of(
    st.sampled_from(LITERALS),
    st.sampled_from(["", "x", "cosmos1abc", "sign", "Sign-message", "%2F", "a:b", "{x}"]),
    st.text(min_size=0, max_size=12),
)


def scan(routes: list[BaseRoute], path: str, method: str) -> tuple[str, BaseRoute | None]:
    """What the router answered before `Shapes`: every route tried in order."""
    scope = {"type": "http", "path": path, "method": method, "root_path": ""}
    partial = None
    for route in routes:
        match, _ = route.matches(scope)
        if match is Match.FULL:
            return "found", route
        if match is Match.PARTIAL and partial is None:
            partial = route
    return ("405", partial) if partial is not None else ("404", None)


@settings(max_examples=3000, deadline=None)
@given(
    parts=st.lists(SEGMENT, min_size=0, max_size=7),
    trailing=st.booleans(),
    method=st.sampled_from(["GET", "POST", "DELETE", "PUT", "HEAD"]),
)
def test_the_shape_lookup_picks_what_a_full_scan_picks(
    parts: list[str], trailing: bool, method: str
) -> None:
    path = "/" + "/".join(parts) + ("/" if trailing and parts else "")
    shaped = scan(ROUTER.shapes.candidates(path), path, method)
    assert shaped == scan(ROUTER.patterns, path, method), path


def test_every_pattern_route_is_found_by_its_own_shape() -> None:
    for route in ROUTER.patterns:
        assert isinstance(route, Route)
        path = route.path.replace("{", "").replace("}", "")  # each parameter a literal
        assert route in ROUTER.shapes.candidates(path), route.path


def test_a_sign_request_tries_one_route() -> None:
    """The reason for Shapes: 40 pattern routes, of which a sign request tried ~24."""
    assert len(ROUTER.patterns) > 20
    assert ROUTER.shapes.candidates("/cosmos/cosmos1xyz/sign-transfer") == [
        r
        for r in ROUTER.patterns
        if getattr(r, "path", "") == "/cosmos/{accountName}/sign-transfer"
    ]


def test_a_route_of_another_kind_is_tried_for_every_path() -> None:
    catch_all = Route("/files/{rest:path}", lambda r: None)
    mixed = Shapes([Route("/a/{x}", lambda r: None), catch_all])
    assert mixed.candidates("/files/a/b/c/d/e/f/g/h") == [catch_all]
    assert catch_all in mixed.candidates("/a/b")
    assert len(mixed._table) <= 2


@settings(max_examples=3000, deadline=None)
@given(
    parts=st.lists(SEGMENT, min_size=1, max_size=4),
    method=st.sampled_from(["GET", "POST", "DELETE", "PUT"]),
)
def test_the_router_picks_what_a_scan_of_every_route_picks(parts: list[str], method: str) -> None:
    """Literal paths included: `GET /cosmos/multisig` (a fuzzer's find) is the account
    route's (a 400 for the name), not a 405 from `POST /cosmos/multisig`."""
    path = "/" + "/".join(parts)
    scope = {"type": "http", "path": path, "method": method, "root_path": ""}
    route, partial = ROUTER.resolve(scope)
    kind, expected = scan(ROUTER.routes, path, method)
    if kind == "found":
        assert route is expected, path
    else:
        assert route is None, path
        assert (partial is None) == (kind == "404"), path


def test_a_literal_path_without_the_method_falls_to_the_account_route() -> None:
    for family in ("cosmos", "dogecoin", "litecoin"):
        for method in ("GET", "DELETE"):
            scope = {
                "type": "http",
                "path": f"/{family}/multisig",
                "method": method,
                "root_path": "",
            }
            route, _ = ROUTER.resolve(scope)
            assert getattr(route, "path", None) == f"/{family}/{{accountName}}", (family, method)
