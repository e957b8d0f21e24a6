"""A family is one folder and one registry row (DESIGN.md "Architecture", STYLE.md
"Chains as data"): what a family knows is declared in `chains/`, which stands on the
ground floor of the domain, and read from the registry everywhere else."""

from __future__ import annotations

import ast
import re
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


def _names() -> frozenset[str]:
    from chainkeys.chains.registry import FAMILIES

    return frozenset(FAMILIES)


def _literals(path: Path, names: frozenset[str]) -> int:
    """How many times a family's name is written as a string in the file: a Python string
    constant that is exactly one (`family == "cosmos"`, `FAMILIES["eos"]`, f-string
    parts too), or a quoted one in another text file (the console's modules)."""
    text = path.read_text()
    if path.suffix == ".py":
        return sum(isinstance(node, ast.Constant) and node.value in names
                   for node in ast.walk(ast.parse(text)))  # fmt: skip
    return len(re.findall(rf"[\"'`]({'|'.join(sorted(names))})[\"'`]", text))


# Files that still name a family, each owned by other work when this test was written:
# move what they know into chains/ (or read it from the registry) and take them off the
# list, which only shrinks.
KNOWN = {
    # the console: each family's fields on the accounts page, EOS's name on the wallets page
    "api/static/console/pages/accounts.mjs": 8,
    "api/static/console/pages/wallets.mjs": 1,
}


def test_no_family_is_named_outside_chains() -> None:
    """What a family knows is declared in chains/ and read from the registry: no file
    outside chains/ and the migrations (which record what the schema was) names one, so
    a fifth family touches nothing outside chains/ but tests and docs."""
    names = _names()
    found = {
        str(path.relative_to(SRC)): count
        for path in sorted(SRC.rglob("*"))
        if path.suffix in (".py", ".mjs", ".js", ".html")
        and CHAINS not in path.parents and "migrations" not in path.parts
        and (count := _literals(path, names))
    }  # fmt: skip
    assert found == KNOWN, (
        "a family is named outside chains/ (declare it in the family's module or registry "
        "row and read it from chains.registry.FAMILIES), or a known file no longer does "
        "(take it off KNOWN)"
    )
