"""The vector copies in this repo are the shared ones, byte for byte."""

from __future__ import annotations

from pathlib import Path

import pytest
from chain_vectors import VECTORS_DIR

REPO_ROOT = Path(__file__).resolve().parents[2]  # the parent of tests/
SHARED = REPO_ROOT.parent / "shared" / "vectors"
FILES = ["vectors.json", "mnemonic_vectors.json"]


@pytest.mark.parametrize("name", FILES)
def test_copy_matches_shared_vectors(name: str) -> None:
    if not SHARED.is_dir():
        pytest.skip(f"no shared vectors at {SHARED}")
    assert (VECTORS_DIR / name).read_bytes() == (SHARED / name).read_bytes()


@pytest.mark.parametrize("name", FILES)
def test_copy_is_present(name: str) -> None:
    assert (VECTORS_DIR / name).stat().st_size > 0
