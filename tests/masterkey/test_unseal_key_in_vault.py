"""The unseal key is made, split and combined inside vault/ only (issue 62): every other
module asks vault/shamir.py (`init_shares`, `unseal`, `AskedShares`, `rekey`) and
never holds the key, so the barrier owns the key operations as it owns the master key.

Read from the source, as tests/house/test_source_shapes.py reads it: an import of the
splitting functions, the key's class or the sharing library, or a call through the
shares module by attribute, anywhere outside vault/, fails here by file and line.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import chainkeys

SRC = Path(chainkeys.__file__).parent
SHARES = "chainkeys.vault.shares"
# What only vault/ may touch: the split and its inverse, the key they make, the library.
KEY_OPERATIONS = frozenset({"split", "combine", "UnsealKey"})
SHARING_LIBRARY = ("Crypto.Protocol.SecretSharing", "Cryptodome.Protocol.SecretSharing")


def _module_of(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _absolute(node: ast.ImportFrom, package: str) -> str:
    """The module an `from … import` names, relative imports resolved from `package`."""
    if not node.level:
        return node.module or ""
    up = package.split(".")[: len(package.split(".")) - node.level + 1]
    return ".".join([*up, node.module] if node.module else up)


def key_operations(path: Path) -> list[str]:
    """Where the module at `path` imports or calls one of the unseal key's operations."""
    module = _module_of(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    return operations_in(path.read_text(), package)


def operations_in(source: str, package: str) -> list[str]:
    """Where `source` (a module of `package`) imports or calls one of the unseal key's
    operations, as `line: what`."""
    tree = ast.parse(source)
    aliases: set[str] = set()  # names bound to the shares module itself
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith(SHARING_LIBRARY):
                    found.append(f"{node.lineno}: import {alias.name}")
                if alias.name == SHARES:
                    aliases.add(alias.asname or alias.name)
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node, package)
            if base.startswith(SHARING_LIBRARY):
                found.append(f"{node.lineno}: from {base} import …")
            for alias in node.names:
                # (from any vault module: vault/shamir.py has them in its namespace too)
                if base.startswith("chainkeys.vault") and alias.name in KEY_OPERATIONS:
                    found.append(f"{node.lineno}: from {base} import {alias.name}")
                if f"{base}.{alias.name}" == SHARES:
                    aliases.add(alias.asname or alias.name)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in KEY_OPERATIONS:
            owner = ast.unparse(node.value)
            if owner in aliases:
                found.append(f"{node.lineno}: {owner}.{node.attr}")
    return found


def test_no_module_outside_the_vault_splits_combines_or_holds_the_unseal_key() -> None:
    outside = {
        str(path.relative_to(SRC)): found
        for path in sorted(SRC.rglob("*.py"))
        if path.relative_to(SRC).parts[0] != "vault" and (found := key_operations(path))
    }
    assert outside == {}


def test_the_guard_sees_what_the_vault_itself_does() -> None:
    """Not vacuous: the same reading finds the vault's own uses, in each form it knows."""
    shamir = key_operations(SRC / "vault" / "shamir.py")
    assert any("import combine" in f for f in shamir) and any("import split" in f for f in shamir)
    assert any("SecretSharing" in f for f in key_operations(SRC / "vault" / "shares.py"))


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("import chainkeys.vault.shares as s\ns.combine([])\n", "s.combine"),
        ("import chainkeys.vault.shares\nchainkeys.vault.shares.split(k, 3, 2)\n", ".split"),
        ("from chainkeys.vault import shares\nshares.split(k, 3, 2)\n", "shares.split"),
        ("from ..vault.shares import UnsealKey\n", "import UnsealKey"),
        ("from ..vault import shares as x\nx.UnsealKey.new()\n", "x.UnsealKey"),
        ("from chainkeys.vault.shamir import combine\n", "import combine"),
        ("from Crypto.Protocol.SecretSharing import Shamir\n", "SecretSharing"),
    ],
)
def test_the_guard_sees_each_way_in(source: str, expected: str) -> None:
    """An alias of the shares module, a relative import, the library: each is caught
    (as a module of chainkeys.cli would write it)."""
    found = operations_in(source, "chainkeys.cli")
    assert any(expected in f for f in found), found
