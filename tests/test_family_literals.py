"""A family is one folder and one registry row (DESIGN.md "Architecture", STYLE.md
"Chains as data"): what a family knows is declared in `chains/`, which stands on the
ground floor of the domain, and read from the registry everywhere else."""

from __future__ import annotations

import ast
from pathlib import Path

import chainkeys

SRC = Path(chainkeys.__file__).parent
CHAINS = SRC / "chains"


def _imported(tree: ast.AST) -> set[str]:
    """Every module an `import` anywhere in the tree names (under TYPE_CHECKING and
    inside functions too: a type-only or late import is still a dependency)."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
    return found


def test_chains_import_nothing_above_them() -> None:
    """`chains/` is pure (no HTTP, no storage, no request validation): it imports only
    itself and third-party libraries."""
    above = {
        f"{path.relative_to(SRC)}: {name}"
        for path in CHAINS.rglob("*.py")
        for name in _imported(ast.parse(path.read_text()))
        if name.split(".")[0] == "chainkeys" and not name.startswith("chainkeys.chains")
    }
    assert above == set()
