"""BIP39 mnemonics to BIP32 keys.

The seed functions of most libraries do not validate, so a mistyped phrase
would silently open an empty wallet: every phrase is normalised and fully
validated (word count, English word list, checksum) before any derivation.
Messages name the failed rule, never a word or the phrase.
"""

from __future__ import annotations

import unicodedata
from functools import cache
from typing import Final

from bip_utils import (  # type: ignore[import-untyped]
    Bip39Languages,
    Bip39SeedGenerator,
    MnemonicChecksumError,
)
from bip_utils.bip.bip39.bip39_mnemonic_utils import (  # type: ignore[import-untyped]
    Bip39WordsListGetter,
)

from chainkeys.chains.spec import ChainError

WORD_COUNTS: Final = (12, 15, 18, 21, 24)
HARDENED: Final = 2**31
# 24 words of at most 8 letters need 215 characters; anything far beyond is
# not a phrase, and is refused before normalising it.
MAX_MNEMONIC_CHARS: Final = 1024

_INVALID: Final = "invalid_mnemonic"


@cache
def _english_words() -> frozenset[str]:
    words = Bip39WordsListGetter().GetByLanguage(Bip39Languages.ENGLISH)
    return frozenset(str(words.GetWordAtIdx(i)) for i in range(words.Length()))


def normalise_mnemonic(mnemonic: str) -> str:
    """NFKD, lowercase, words joined by single spaces; then validate.

    Case and whitespace are normalised rather than refused (the vectors allow
    either), so "Abandon  abandon …" is the same wallet as "abandon abandon …".
    Normalising first also means the raw string never reaches PBKDF2.

    Args:
        mnemonic: The phrase as the caller typed it.

    Returns:
        The canonical phrase.

    Raises:
        ChainError: code "invalid_mnemonic": empty, too long, a word count
            other than 12/15/18/21/24, or a word outside the English list
            (checked in that order; the checksum is checked by the seed step).
    """
    if len(mnemonic) > MAX_MNEMONIC_CHARS:
        raise ChainError("mnemonic is too long", _INVALID)
    words = unicodedata.normalize("NFKD", mnemonic).lower().split()
    if not words:
        raise ChainError("mnemonic is empty", _INVALID)
    if len(words) not in WORD_COUNTS:
        raise ChainError(
            f"mnemonic has {len(words)} words; BIP-39 allows 12, 15, 18, 21 or 24", _INVALID
        )
    english = _english_words()
    for position, word in enumerate(words, start=1):
        if word not in english:
            raise ChainError(f"word {position} is not in the English BIP-39 word list", _INVALID)
    return " ".join(words)


def seed_from_mnemonic(mnemonic: str, passphrase: str = "") -> bytes:
    """The 64-byte BIP39 seed, after normalising and validating the phrase.

    Args:
        mnemonic: The phrase; see `normalise_mnemonic` for what is accepted.
        passphrase: The optional BIP39 passphrase: NFKD-normalised, never
            trimmed or case-folded (" TREZOR" and "TREZOR" are two wallets).

    Returns:
        PBKDF2-HMAC-SHA512(phrase, "mnemonic" + passphrase, 2048 rounds).

    Raises:
        ChainError: code "invalid_mnemonic", including a checksum that does
            not verify.
    """
    phrase = normalise_mnemonic(mnemonic)
    try:
        generator = Bip39SeedGenerator(phrase, Bip39Languages.ENGLISH)
    except MnemonicChecksumError:
        raise ChainError("mnemonic checksum does not verify", _INVALID) from None
    except ValueError:
        raise ChainError("mnemonic is not a valid BIP-39 phrase", _INVALID) from None
    return bytes(generator.Generate(unicodedata.normalize("NFKD", passphrase)))
