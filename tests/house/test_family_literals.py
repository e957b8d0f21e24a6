"""A family is one folder and one registry row (DESIGN.md "Architecture", STYLE.md
"Chains as data"): what a family knows is declared in `chains/`, which stands on the
ground floor of the domain, and read from the registry everywhere else."""

from __future__ import annotations

import ast
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import chainkeys

SRC = Path(chainkeys.__file__).parent
CHAINS = SRC / "chains"
# Names the families also go by, which the registry does not list: EOS's chain
# software (Antelope) and the chain the UTXO families' forms come from (PSBT, BIP48).
OTHER_NAMES = ("antelope", "bitcoin")


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


def _families() -> tuple[frozenset[str], frozenset[str]]:
    """The families' names, and the sign kinds that are some families' only (a kind
    every family has, `sign-message`, says nothing of a family)."""
    from chainkeys.chains.registry import FAMILIES

    kinds = [{k.path for k in f.signers} for f in FAMILIES.values()]
    return frozenset(FAMILIES), frozenset(set().union(*kinds) - set.intersection(*kinds))


def _identifiers(tree: ast.AST) -> Iterator[str]:
    """Every name the code itself is written with: names and attributes, the names of
    functions, classes, parameters and keyword arguments, and what an import names."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            yield node.id
        elif isinstance(node, ast.Attribute):
            yield node.attr
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            yield node.name
        elif isinstance(node, ast.arg | ast.keyword) and node.arg:
            yield node.arg
        elif isinstance(node, ast.alias):
            yield from filter(None, (node.name, node.asname))
        elif isinstance(node, ast.ImportFrom) and node.module:
            yield node.module


def _findings(path: Path, names: frozenset[str], kinds: frozenset[str]) -> Counter[str]:
    """What in the file names a family, counted: an identifier or import containing a
    family's name (`CosmosAccount`, `chains.tx.cosmos`, `isinstance(x, EosKey)`), or a
    string constant that is exactly a family's name or one of its own sign kinds
    (`family == "eos"`, `"sign-psbt"`, f-string parts too); in the console's modules,
    a quoted family name or kind."""
    text = path.read_text()
    words = (*sorted(names), *OTHER_NAMES)
    if path.suffix != ".py":
        return Counter(re.findall(rf"[\"'`]({'|'.join(sorted(names | kinds))})[\"'`]", text))
    tree = ast.parse(text)
    found = Counter(i for i in _identifiers(tree) if any(w in i.lower() for w in words))
    found.update(
        f'"{node.value}"'
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and node.value in names | kinds
    )
    return found


# What still names a family outside chains/, file by file: why, and what it names how
# often. The list only shrinks. Nothing on it is something the registry cannot carry:
# each is "to move", knowledge that belongs in the family's module or registry row
# (docs/families.md "What still names families"), left for the work that moves it.
KNOWN: dict[str, tuple[str, dict[str, int]]] = {
    "api/routes/policy.py": (
        "to move: the dry run's example is found by Cosmos's sign-transfer kind",
        {'"sign-transfer"': 2},
    ),
    "api/routes/shapes.py": (
        "to move: the Cosmos SDK keyring shape (`response_shape = KEYRING`) is built from "
        "types named for Cosmos, not for the keyring",
        {
            "CosmosAccount": 1,
            "CosmosAccountData": 1,
            "CosmosAccountResponse": 1,
            "CosmosKey": 2,
            "CosmosKeys": 1,
            "CosmosKeysData": 1,
            "CosmosListResponse": 1,
        },
    ),
    "api/schemas.py": (
        "to move: the keyring shape's types are named for Cosmos (and its prose, which "
        "this test does not read, says which fields are EOS's)",
        {
            "CosmosAccount": 2,
            "CosmosAccountData": 2,
            "CosmosAccountResponse": 1,
            "CosmosKey": 2,
            "CosmosKeys": 2,
            "CosmosKeysData": 2,
            "CosmosListResponse": 1,
        },
    ),
    "api/static/console/pages/accounts.mjs": (
        "to move: each family's fields on the accounts page, until it reads /networks",
        {"cosmos": 5, "dogecoin": 1, "eos": 1, "litecoin": 1},
    ),
    "api/static/console/pages/wallets.mjs": (
        "to move: EOS left out of deriving (it needs a chosen name), by name",
        {"eos": 1},
    ),
    "policies/conditions.py": (
        "to move: `tx.kind`'s word for each family's sign kind, a table beside the kinds "
        "rather than read from each `SignKind`",
        {
            '"sign-amino"': 1,
            '"sign-direct"': 1,
            '"sign-ibc-transfer"': 1,
            '"sign-psbt"': 1,
            '"sign-raw-transaction"': 1,
            '"sign-transaction"': 1,
            '"sign-transfer"': 1,
        },
    ),
    "signing/combine.py": (
        "to move: combining a multisig's signatures is Cosmos's (its amino kind, "
        "document, multisig and response), where `MultisigForms.combine` should say it",
        {
            '"sign-amino"': 1,
            "CosmosDoc": 2,
            "CosmosMultisig": 2,
            "CosmosTransactionResponse": 2,
            "chainkeys.chains.tx.cosmos.common": 1,
            "chainkeys.chains.tx.cosmos.multisig": 1,
            "chainkeys.chains.tx.cosmos.transfer": 1,
        },
    ),
    "signing/requests.py": (
        "to move: MULTISIG_KINDS names the kinds a multisig signs with by family "
        "(Dogecoin's and Litecoin's sign-psbt, Cosmos's sign-amino), not from `MultisigForms`",
        {'"sign-amino"': 1, '"sign-psbt"': 1},
    ),
}


def test_no_family_is_named_outside_chains() -> None:
    """What a family knows is declared in chains/ and read from the registry: no file
    outside chains/ and the migrations (which record what the schema was) names one in
    its code (see `_findings`) beyond KNOWN, so a fifth family touches nothing outside
    chains/ but tests and docs. Prose (docstrings, descriptions, help) is not read."""
    names, kinds = _families()
    found = {
        str(path.relative_to(SRC)): dict(sorted(count.items()))
        for path in sorted(SRC.rglob("*"))
        if path.suffix in (".py", ".mjs", ".js", ".html")
        and CHAINS not in path.parents
        and "migrations" not in path.parts
        and (count := _findings(path, names, kinds))
    }
    assert found == {path: seen for path, (_, seen) in KNOWN.items()}, (
        "a family is named outside chains/ (declare it in the family's module or registry "
        "row and read it from chains.registry.FAMILIES), or a known file no longer does "
        "(take it off KNOWN)"
    )
