"""What a reader of the source must be able to trust, checked over every module.

A decorator that returns something else than a class (an `lru_cache` left on a class
once) turns `isinstance(x, TheClass)` into a TypeError at run time that mypy and ruff
do not see; `assert` vanishes under `python -O`, so no check that matters may be one.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path

import pytest

import chainkeys

SRC = Path(chainkeys.__file__).parent
MODULES = sorted(
    m.name
    for m in pkgutil.walk_packages([str(SRC)], "chainkeys.")
    if ".migrations." not in m.name and not m.name.endswith("__main__")  # __main__ runs the CLI
)


def _classes(module: str) -> list[str]:
    path = SRC.joinpath(*module.split(".")[1:])
    file = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
    tree = ast.parse(file.read_text())
    return [n.name for n in tree.body if isinstance(n, ast.ClassDef)]


@pytest.mark.parametrize("module", MODULES)
def test_every_class_statement_defines_a_class(module: str) -> None:
    loaded = importlib.import_module(module)
    for name in _classes(module):
        assert isinstance(getattr(loaded, name), type), f"{module}.{name} is not a class"


def test_the_driver_error_is_a_class_and_row_classes_are_cached() -> None:
    from chainkeys.store.pg import PgDriverError
    from chainkeys.store.pg_plan import row_class

    error = PgDriverError(ValueError("boom: query argument $1: secret-value"))
    assert isinstance(error, PgDriverError) and "secret-value" not in str(error)
    assert row_class(("a", "b")) is row_class(("a", "b"))


def test_no_assert_in_the_source() -> None:
    found = [
        f"{path.relative_to(SRC)}:{node.lineno}"
        for path in SRC.rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Assert)
    ]
    assert found == []
