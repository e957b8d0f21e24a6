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
    from chainkeys.store.postgres.failures import PgDriverError
    from chainkeys.store.sql import row_class

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


def _module_of(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, module: str, known: set[str]) -> set[str]:
    """What `module` imports when it is loaded: module-level imports (not those under
    `if TYPE_CHECKING:` nor inside functions), `from pkg import sub` naming `pkg.sub`."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        for stmt in node.body if isinstance(node, ast.Try) else [node]:
            if isinstance(stmt, ast.Import):
                found.update(alias.name for alias in stmt.names)
            elif isinstance(stmt, ast.ImportFrom):
                base = stmt.module or ""
                if stmt.level:
                    up = package.split(".")[: len(package.split(".")) - stmt.level + 1]
                    base = ".".join([*up, base] if base else up)
                subs = {f"{base}.{a.name}" for a in stmt.names} & known
                found.update(subs or {base})
    return (found & known) - {module}


def test_no_import_cycles() -> None:
    """A module graph without cycles: each module can be read (and loaded) after the
    ones it uses. The cycle once here ran registry -> cosmos -> cosmos_transfer -> registry."""
    paths = {_module_of(p): p for p in SRC.rglob("*.py")}
    graph = {m: _imports(p, m, set(paths)) for m, p in paths.items()}
    state: dict[str, int] = {}  # 1: on the path being walked, 2: done
    cycles: list[list[str]] = []

    def walk(module: str, path: list[str]) -> None:
        state[module] = 1
        for used in sorted(graph[module]):
            if state.get(used) == 1:
                cycles.append([*path[path.index(used) :], used])
            elif used not in state:
                walk(used, [*path, used])
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            walk(module, [module])
    assert cycles == []


def test_modules_are_small_enough_to_read_in_one_sitting() -> None:
    sizes = {p.relative_to(SRC): len(p.read_text().splitlines()) for p in SRC.rglob("*.py")}
    assert {p: n for p, n in sizes.items() if n > 450} == {}


# The key types: a master key, the process's key set, the unseal key Shamir shares rebuild.
KEY_TYPES = frozenset({"MasterKey", "Vault", "GivenKey"})
# The door every package seals and opens through; its methods that hand out a key are
# found by name on a `barrier` (below), not by importing the class.
DOOR = "Barrier"


def _names_a_key(node: ast.AST, types: frozenset[str]) -> bool:
    """Whether an annotation names one of `types` (quoted annotations too)."""
    return any(
        (isinstance(n, ast.Name) and n.id in types)
        or (isinstance(n, ast.Attribute) and n.attr in types)
        or (
            isinstance(n, ast.Constant)
            and isinstance(n.value, str)
            and any(t in n.value for t in types)
        )
        for n in ast.walk(node)
    )


def _takes_or_gives(fn: ast.FunctionDef | ast.AsyncFunctionDef, types: frozenset[str]) -> bool:
    args = fn.args
    annotations = [a.annotation for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]]
    return any(a is not None and _names_a_key(a, types) for a in [*annotations, fn.returns])


def _key_handlers() -> tuple[frozenset[str], frozenset[str]]:
    """What in vault/ handles key bytes, read from its source: (names another module
    could import, methods of the door). A class handles keys when it is a key type or
    one of its methods takes or returns one (providers, `Keys`); a function when its
    parameters or return name a key type or such a class (`wrap`, `check_opens`,
    `provider_for`, `init_shares`). The door itself is neither: it is how others seal."""
    functions: list[ast.FunctionDef | ast.AsyncFunctionDef] = []
    classes: dict[str, list[ast.FunctionDef | ast.AsyncFunctionDef]] = {}
    for path in (SRC / "vault").rglob("*.py"):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                functions.append(node)
            elif isinstance(node, ast.ClassDef):
                classes[node.name] = [
                    n for n in node.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
                ]
    holders = KEY_TYPES | {
        name
        for name, methods in classes.items()
        if any(_takes_or_gives(m, KEY_TYPES) for m in methods if not m.name.startswith("_"))
    }
    door = frozenset(
        m.name
        for m in classes[DOOR]
        if _takes_or_gives(m, KEY_TYPES) and not m.name.startswith("_")
    )
    holders -= {DOOR}  # opening the door (`open_barrier`) hands out no key
    reach = holders | {f.name for f in functions if _takes_or_gives(f, holders)}
    return frozenset(reach), door


# Outside vault/, who handles a key, and why; a module leaves the list when it stops.
KEY_HOLDERS = {
    # rotation: the new key joins the barrier's set and every held key is re-wrapped
    # under it, from the configured provider
    "masterkey/service.py": {
        "KeyProvider",
        "provider_for",
        "wrap",
        "barrier.add",
        "barrier.current",
        "barrier.held",
        "barrier.key",
        "barrier.root",
    },
    # a move loads the key from one provider, proves it opens the store, hands it to another
    "masterkey/moves.py": {"check_opens", "provider_for"},
    # the unsealer (GivenKey: its repr hides the key) from shares to the barrier that opens
    "unsealing.py": {"init_shares", "unseal"},
    # `chainkeys init --shares` makes the first unsealer and prints its shares once
    "cli/masterkey.py": {"init_shares"},
}


def test_only_the_vault_holds_master_keys() -> None:
    """Key bytes (a `MasterKey`, the `Vault` key set, the unseal `GivenKey`) are private
    to vault/: outside it, a module imports no vault/ module whole and nothing of
    vault/'s that is a key type, a class whose public methods take or return one, or a
    function whose parameters or return name either, and reaches none of the
    barrier's public methods that take or return a key on anything named `barrier`.
    Every other package seals and opens through the barrier; the few that manage the
    key itself are KEY_HOLDERS, each with its reason."""
    reach, door = _key_handlers()
    assert {"MasterKey", "Vault", "wrap", "learn_keys", "provider_for"} <= reach
    assert {"root", "current", "key", "held", "add"} <= door
    found: dict[str, set[str]] = {}
    for path in SRC.rglob("*.py"):
        if path.relative_to(SRC).parts[0] == "vault":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import | ast.ImportFrom):
                # a vault module imported whole would hide which of its names are used
                named = [
                    f"{node.module}.{a.name}" if isinstance(node, ast.ImportFrom) else a.name
                    for a in node.names
                ]
                used = {
                    f"import {n}"
                    for n in named
                    if n.startswith("chainkeys.vault") and n.count(".") < 3
                }
                if (getattr(node, "module", None) or "").startswith("chainkeys.vault."):
                    used = {a.name for a in node.names if a.name in reach}
            elif isinstance(node, ast.Attribute) and node.attr in door:
                receiver = ast.unparse(node.value).rpartition(".")[2]
                used = {f"barrier.{node.attr}"} if receiver.endswith("barrier") else set()
            else:
                continue
            found.setdefault(path.relative_to(SRC).as_posix(), set()).update(used)
    assert {p: names for p, names in found.items() if names} == KEY_HOLDERS


def test_no_engine_test_outside_the_store() -> None:
    """Domain code asks the store for capabilities (`Tx.serialize`,
    `Backend.write(one_statement=True)`, `Backend.has_change_counter`), never for its
    engine."""
    engine = (
        "is_sqlite",
        ".dialect",
        '"sqlite"',
        '"postgresql"',
        "SqliteBackend",
        "PostgresBackend",
    )
    found = [
        f"{path.relative_to(SRC)}: {line.strip()}"
        for path in SRC.rglob("*.py")
        if path.relative_to(SRC).parts[0] not in ("store", "config.py", "private_apis.py")
        for line in path.read_text().splitlines()
        if any(word in line for word in engine)
    ]
    assert found == []


def test_one_backend_class_per_engine() -> None:
    """Each engine is one class in its own folder, reached through `open_backend`; both
    answer every method of the `Backend` protocol."""
    from chainkeys.config import Settings
    from chainkeys.store.backend import Backend, open_backend
    from chainkeys.store.postgres.backend import PostgresBackend
    from chainkeys.store.sqlite.backend import SqliteBackend

    settings = Settings()
    assert type(open_backend("sqlite:////tmp/x.db", settings)) is SqliteBackend
    assert type(open_backend("postgresql://u@h/d", settings)) is PostgresBackend
    wanted = {n for n in dir(Backend) if not n.startswith("_")} | set(Backend.__annotations__)
    for cls in (SqliteBackend, PostgresBackend):
        missing = {
            n for n in wanted if not hasattr(cls, n) and n not in cls.__init__.__code__.co_names
        }
        assert missing == set(), cls
    classes = {
        path.relative_to(SRC / "store").parts[0]
        for path in (SRC / "store").rglob("*.py")
        for line in path.read_text().splitlines()
        if line.startswith("class ") and line.split("(")[0].split(":")[0].endswith("Backend")
    }
    assert classes == {"backend.py", "sqlite", "postgres"}


def test_head_is_the_newest_migration() -> None:
    """The code compares the schema with `HEAD` without loading Alembic: it must be the
    head Alembic finds in migrations/versions/ (a new migration moves both)."""
    from chainkeys.store import migrate

    assert migrate.head_revision() == migrate.HEAD


def test_every_file_the_package_serves_is_in_the_wheel() -> None:
    """The wheel takes non-Python files only by pyproject's package-data patterns: a page,
    module or migration template in a folder no pattern names would be missing from an
    installed service (the console would answer 404 for it) while every test from the
    checkout passed."""
    import fnmatch
    import tomllib

    config = tomllib.loads((SRC.parents[1] / "pyproject.toml").read_text())
    patterns = config["tool"]["setuptools"]["package-data"]["chainkeys"]
    data = [
        p.relative_to(SRC).as_posix()
        for p in SRC.rglob("*")
        if p.is_file() and p.suffix not in (".py", ".pyc") and "__pycache__" not in p.parts
    ]
    assert [
        f
        for f in data
        if not any(fnmatch.fnmatch(f, pat) and f.count("/") == pat.count("/") for pat in patterns)
    ] == []
    assert any(f.startswith("api/static/console/pages/") for f in data)


def test_httpx_is_imported_by_the_first_call_not_at_start() -> None:
    """httpx (~0.14 s of CPU at each process start) is imported where an outbound call
    is first made (the HTTP audit device, the co-signer), never by a module loading."""
    import subprocess
    import sys

    code = (
        "import sys, chainkeys.api.app, chainkeys.cli.main, chainkeys.signing.service, "
        "chainkeys.audit.devices, chainkeys.signing.cosigner; print('httpx' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
