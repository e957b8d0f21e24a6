"""The instruction counter (`python -m bench.icount`) stays runnable and prices a request.

It runs each app under valgrind (callgrind), which nothing here installs: `.ci/run`
installs it, and without it the tool stops naming the install command.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from bench import icount, preload
from bench.asgi_cost import _lifespan

pytestmark = pytest.mark.long(145)  # seconds (busy run): scheduled first


@pytest.mark.timeout(900)  # valgrind runs ~50x slower: beside two CPU hogs it passed 300 s
def test_a_sign_is_priced_for_both_apps() -> None:
    by = icount.measure(["sign-dogecoin-message"], n=4, size=50)["sign-dogecoin-message"]
    # More than the signature alone (coincurve's ~100,000 instructions), far less than a
    # start-up (hundreds of millions): the difference isolated a request's own work.
    assert 200_000 < by["baseline"] < 5_000_000, by
    assert 200_000 < by["chainkeys"] < 5_000_000, by
    # chainkeys does what the baseline does and more (routing, policy, validation).
    assert by["chainkeys"] > by["baseline"], by


def test_a_request_that_is_not_answered_200_stops_the_count(tmp_path: Path) -> None:
    """A count of requests that failed would price the refusal, not the work."""
    from chainkeys.api.app import create_app
    from chainkeys.config import Settings

    ds = preload.sqlite_dataset(tmp_path, 20)

    async def run() -> None:
        app = create_app(Settings(data_dir=ds.data_dir, log_level="WARNING"))
        inbox, task = await _lifespan(app)
        try:
            await icount._serve(app, 2, lambda i: ("GET", "/cosmos/no-such-name", b""), ds.token)
        finally:
            await inbox.put({"type": "lifespan.shutdown"})
            await task

    with pytest.raises(RuntimeError, match="unexpected statuses"):
        asyncio.run(run())


def test_no_count_printed_is_an_error() -> None:
    assert icount.collected("==1== Events    : Ir\n==1== Collected : 12345\n") == 12345
    with pytest.raises(RuntimeError, match="no count"):
        icount.collected("valgrind: command not found")
