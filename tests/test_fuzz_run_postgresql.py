"""schemathesis' runner, every phase, against a server on postgresql (tests/fuzz_run.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import Server, own_server
from tests.fuzz_run import every_phase

pytestmark = [pytest.mark.slow, pytest.mark.long(115)]  # seconds (busy run): scheduled first


@pytest.fixture(scope="module")
def export_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with own_server("postgresql", tmp_path_factory.mktemp("export"), export_enabled=True) as srv:
        yield srv


def test_every_phase(export_server: Server, tmp_path: Path) -> None:
    every_phase(export_server, tmp_path)
