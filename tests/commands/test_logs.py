"""Access lines: the direct path writes exactly what the logging formatter would."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator

import pytest

from chainkeys import logs

PLAIN = re.compile(
    r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} INFO chainkeys\.access GET /cosmos/abc 200 1\.5ms"
    r" rid=rid-1 token_id=tok1 client=127\.0\.0\.1:5000 client_request_id=mine$"
)
SCOPE = {"method": "GET", "path": "/cosmos/abc", "client": ("127.0.0.1", 5000)}


@pytest.fixture
def restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    logs._Direct.handler = None


def lines(capfd: pytest.CaptureFixture[str]) -> list[str]:
    logs.flush()
    return [line for line in capfd.readouterr().err.splitlines() if "chainkeys.access" in line]


@pytest.mark.parametrize("json_lines", [False, True])
def test_direct_and_formatted_access_lines_agree(
    capfd: pytest.CaptureFixture[str], restore_logging: None, json_lines: bool
) -> None:
    logs.configure("INFO", json_lines=json_lines)
    logs.access(SCOPE, 200, 1.54, "rid-1", "mine", "tok1")  # the direct path
    direct = lines(capfd)
    # The ordinary logging path: the same handler and formatter behind a filter.
    logs.access_log.addFilter(lambda record: True)
    try:
        logs.access(SCOPE, 200, 1.54, "rid-1", "mine", "tok1")
    finally:
        logs.access_log.filters.clear()
    formatted = lines(capfd)
    assert len(direct) == len(formatted) == 1
    if json_lines:
        a, b = json.loads(direct[0]), json.loads(formatted[0])
        assert a.keys() == b.keys()
        assert {k: v for k, v in a.items() if k != "time"} == {
            "level": "info",
            "logger": "chainkeys.access",
            "message": "request",
            "request_id": "rid-1",
            "method": "GET",
            "path": "/cosmos/abc",
            "status": 200,
            "duration_ms": 1.5,
            "token_id": "tok1",
            "client": "127.0.0.1:5000",
            "client_request_id": "mine",
        }
        assert {k: v for k, v in b.items() if k != "time"} == {
            k: v for k, v in a.items() if k != "time"
        }
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", a["time"])
    else:
        assert PLAIN.match(direct[0]) and PLAIN.match(formatted[0]), (direct, formatted)


def test_access_lines_follow_the_level(
    capfd: pytest.CaptureFixture[str], restore_logging: None
) -> None:
    logs.configure("WARNING")
    logs.access(SCOPE, 200, 1.0, "rid")
    assert lines(capfd) == []


@pytest.mark.parametrize("json_lines", [False, True])
def test_control_characters_in_a_path_cannot_forge_a_line(
    capfd: pytest.CaptureFixture[str], restore_logging: None, json_lines: bool
) -> None:
    """A path with CR, LF, NUL or spaces is logged escaped: one line, no forged fields."""
    logs.configure("INFO", json_lines=json_lines)
    forged = "/x\n2026-01-01 00:00:00,000 WARNING chainkeys.api DELETE /cosmos/y\r\x00 z"
    logs.access({**SCOPE, "path": forged}, 404, 1.0, "rid-2")
    logs.flush()
    err = capfd.readouterr().err
    assert len(err.splitlines()) == 1
    assert "\r" not in err and "\x00" not in err
    assert "%0A2026-01-01%2000:00:00,000%20WARNING" in err
