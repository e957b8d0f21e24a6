"""The library versions store/pg_private.py was written for are the ones installed.

It is the one module that touches asyncpg's and SQLAlchemy's internals; another
version may have moved them. This fails loudly, naming what to re-read.
"""

from __future__ import annotations

from importlib.metadata import version

import pytest

from chainkeys.store import pg_private


@pytest.mark.parametrize(("package", "written_for"), sorted(pg_private.WRITTEN_FOR.items()))
def test_private_apis_match_the_installed_library(package: str, written_for: str) -> None:
    installed = version(package)
    assert installed == written_for, (
        f"{package} {installed} is installed but store/pg_private.py was written for "
        f"{written_for}: check its private uses against {package} {installed}'s source, "
        "then update WRITTEN_FOR"
    )


def test_no_other_module_reaches_into_private_library_apis() -> None:
    import pathlib
    import re

    src = pathlib.Path(pg_private.__file__).parent.parent
    pattern = re.compile(r"\b(conn|con)\._[a-z]|sqlalchemy\.sql\.crud|\._holder\b")
    offenders = [
        str(path.relative_to(src))
        for path in src.rglob("*.py")
        if path.name != "pg_private.py" and pattern.search(path.read_text())
    ]
    assert offenders == []
