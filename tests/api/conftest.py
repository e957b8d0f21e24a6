"""Fixtures of the API tests (the server fixtures are in tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from tests.api.tenants import Tenant
from tests.conftest import Server


@pytest.fixture
def tenant(server: Server) -> Iterator[Tenant]:
    """A fresh tenant with a token of all default scopes, closed after the test."""
    t = Tenant(server)
    yield t
    t.client.close()
