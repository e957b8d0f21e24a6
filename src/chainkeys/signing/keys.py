"""The key that signs: an account's sealed key opened and checked against its stored
public key, for every signature (signing/service.py `_sign`); the items of a batch
(signing/batch.py) share what was opened, so each key is opened once per batch."""

from __future__ import annotations

import logging

from chainkeys.accounts.families import family_of
from chainkeys.accounts.repository import AccountRow
from chainkeys.accounts.service import AccountService
from chainkeys.chains.secp256k1 import key_from_secret
from chainkeys.chains.spec import Key
from chainkeys.errors import KeyMismatch

log = logging.getLogger("chainkeys.signing")

OpenedKeys = dict[tuple[bytes, str], Key]  # by sealed key and public key: a batch's


def open_checked(
    accounts: AccountService, row: AccountRow, opened: OpenedKeys | None = None
) -> Key:
    """The account's key, checked against its stored public key (KeyMismatch, logged,
    when it is not that key's); `opened`: what the batch opened already, and keeps it."""
    if opened is not None and (found := opened.get((row.secret, row.public_key))):
        return found
    public = family_of(row.family).public_key_bytes(row.public_key)
    key = key_from_secret(accounts.open_key(row), len(public) == 33)
    if key.public != public:  # decoded and checked against this key
        log.error(
            "refused to sign: the %s account %s opened a key that is not its stored public key's",
            row.family,
            row.name,
        )
        raise KeyMismatch()
    if opened is not None:
        opened[(row.secret, row.public_key)] = key
    return key
