"""chainkeys/private_apis.py lists every use of a library's internals, and stays true.

The scan reads every module's syntax tree: an import of a module path with a private
component (`coincurve._libsecp256k1`), an import of a private name, and an attribute
with a leading underscore that chainkeys does not define itself (its own classes'
private attributes are not a library's). Each must be in the table; each entry of the
table must still be used; each pinned version must be the installed one.
"""

from __future__ import annotations

import ast
import sqlite3
from importlib.metadata import version
from pathlib import Path

import pytest

import chainkeys
from chainkeys.private_apis import USES

SRC = Path(chainkeys.__file__).parent
PUBLIC_UNDERSCORE = {"_mapping", "_asdict", "_fields", "_replace", "_make"}  # documented APIs


def _trees() -> dict[str, ast.Module]:
    return {str(p.relative_to(SRC)): ast.parse(p.read_text()) for p in sorted(SRC.rglob("*.py"))}


def _own_private_names(trees: dict[str, ast.Module]) -> set[str]:
    """Underscore names chainkeys defines: functions, classes, attributes it assigns."""
    own = set()
    for tree in trees.values():
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                own.add(node.name)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                own.add(node.attr)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                own.add(node.id)
    return {n for n in own if n.startswith("_")}


def found_private_uses(trees: dict[str, ast.Module]) -> set[tuple[str, str]]:
    own = _own_private_names(trees)
    found = set()
    for module, tree in trees.items():
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                if node.module.startswith(("chainkeys", "__future__")):
                    continue
                if any(p.startswith("_") for p in node.module.split(".")):
                    found.add((module, node.module))
                found |= {
                    (module, a.name)
                    for a in node.names
                    if a.name.startswith("_") and not a.name.startswith("__")
                }
            elif isinstance(node, ast.Import):
                found |= {
                    (module, a.name)
                    for a in node.names
                    if any(p.startswith("_") for p in a.name.split("."))
                }
            elif isinstance(node, ast.Attribute):
                name = node.attr
                private = name.startswith("_") and not name.startswith("__")
                if private and name not in PUBLIC_UNDERSCORE and name not in own:
                    found.add((module, name))
    return found


def listed() -> set[tuple[str, str]]:
    return {(use.module, name) for use in USES for name in use.names}


def test_every_private_use_is_listed() -> None:
    unlisted = found_private_uses(_trees()) - listed()
    assert unlisted == set(), (
        "private library APIs used but not in chainkeys/private_apis.py (add them, with "
        f"the version read and why): {sorted(unlisted)}"
    )


@pytest.mark.parametrize("use", USES, ids=lambda u: f"{u.package}:{u.module}")
def test_every_listed_use_exists_and_its_version_is_installed(use: object) -> None:
    from chainkeys.private_apis import PrivateUse

    assert isinstance(use, PrivateUse)
    text = (SRC / use.module).read_text()
    for name in use.names:
        assert name in text, f"{use.module} no longer uses {name}: drop it from the table"
    installed = sqlite3.sqlite_version if use.package == "sqlite" else version(use.package)
    assert installed == use.version, (
        f"{use.package} {installed} is installed but {use.module}'s use of {use.names} was "
        f"read against {use.version}: re-read it against {installed}'s source, then update "
        "chainkeys/private_apis.py"
    )


def test_the_scan_sees_a_private_import_and_attribute() -> None:
    """The scan itself: a module with both kinds is reported (not only the known ones)."""
    probe = (
        "from asyncpg._private import thing\nfrom redis import _hidden\n"
        "def f(x):\n    return x._secret_attr\n"
    )
    found = found_private_uses({**_trees(), "probe.py": ast.parse(probe)})
    assert {
        ("probe.py", "asyncpg._private"),
        ("probe.py", "_hidden"),
        ("probe.py", "_secret_attr"),
    } <= found
