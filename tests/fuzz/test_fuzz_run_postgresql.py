"""schemathesis' runner, every phase, against a server on postgresql (tests/fuzz/fuzz_run.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.conftest import Server
from tests.fuzz.fuzz_run import every_phase, server_on

pytestmark = [pytest.mark.slow, pytest.mark.long(130)]  # seconds (busy run): scheduled first
export_server = server_on("postgresql")


@pytest.mark.timeout(600)  # `st run` itself is given 600 s: on a busy machine it took 250 s
def test_every_phase(
    export_server: Server, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    every_phase(export_server, tmp_path, caplog)
