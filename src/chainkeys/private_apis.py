"""Every use chainkeys makes of a library's internals, in one table, with the version
each was read against.

A library's private names (a leading underscore) and its undocumented internals may
change in any release. Each one chainkeys relies on is listed here, with the module
that uses it and why; tests/store/test_private_apis.py fails when an installed
version differs from the one pinned here (re-read the use against the new source,
then update the pin), when a module uses a private name not listed here, and when a
listed use no longer exists (the table stays true).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final


@dataclass(frozen=True, slots=True)
class PrivateUse:
    package: str  # the distribution, as importlib.metadata names it ("sqlite": the C library)
    version: str  # the version the use was read against
    module: str  # where chainkeys uses it, relative to src/chainkeys
    names: tuple[str, ...]  # the private module paths or attribute names used
    why: str


USES: Final = (
    PrivateUse(
        "coincurve",
        "21.0.0",
        "chains/tx/ecdsa.py",
        ("coincurve._libsecp256k1",),
        "the cffi handle and library: RFC 6979 extra entropy (EOS canonical retries), "
        "and a signature without the two public keys PrivateKey() computes first",
    ),
    PrivateUse(
        "bip_utils",
        "2.12.3",
        "chains/mnemonic.py",
        ("bip_utils.bip.bip39.bip39_mnemonic_utils",),
        "the English word list, to name an unknown word in a refused mnemonic",
    ),
    PrivateUse(
        "asyncpg",
        "0.32.0",
        "store/postgres/private.py",
        ("_con", "_on_release", "_holder"),
        "giving a pool connection back without Pool.release()'s shielded task",
    ),
    # The SQLite library itself (sqlite3.sqlite_version), not a Python distribution.
    PrivateUse(
        "sqlite",
        "3.40.1",
        "store/sqlite/counter.py",
        ("WAL_INDEX_VERSION", "mxFrame"),
        "the WAL-index header (rewritten by every commit), read from the -shm mapping "
        "instead of a PRAGMA data_version statement per request (checked against it)",
    ),
)
