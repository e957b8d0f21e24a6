"""The known-answer files are the published ones, byte for byte.

They were made by independent code (cosmjs, bitcoinjs, wharfkit, bitcore) and
every chain test checks chainkeys against them: an edit to a vector would hide a
regression instead of catching it. Their sha256 are those of the copies shared
with the project (shared/vectors) and of the signing vectors as generated; a
deliberate update changes the digest here in the same commit.
"""

from __future__ import annotations

import hashlib

import pytest
from tests.chains.chain_vectors import VECTORS_DIR

PUBLISHED = {
    "vectors.json": "166da43c3c5a51737fcda0235351155a32c59772791eb3cca0584c5268bb9b51",
    "mnemonic_vectors.json": "a99bcf667c1de1ad51fd294fbf278e26ee955e8bbcf01adbb8e791c9513312f1",
    "cosmos_signing.json": "5551f4368ce0b5fc3dc7772f86c653658eced81a0d9e460d1d0c41c3a02440c4",
    "utxo_signing.json": "578ae824ef070da72beaa636752f633bc9c523d426533534bcbab99ff409117a",
}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_vector_file_is_the_published_one(name: str) -> None:
    digest = hashlib.sha256((VECTORS_DIR / name).read_bytes()).hexdigest()
    assert digest == PUBLISHED[name], f"{name} differs from the published vectors"


def test_every_vector_file_is_checked() -> None:
    assert {p.name for p in VECTORS_DIR.glob("*.json")} == set(PUBLISHED)
