"""EOS answers, checked before they are returned.

An EOS account name does not name its key, so the key is the one the caller passes
(`public_key=`, PUB_K1_… or the legacy EOS… form) or, without it, the one the
account lookup answers (`GET /eos/{name}`, read scope). Each `SIG_K1_` signature's
checksum is checked and the key it recovers to (libsecp256k1) over the digest
computed here must be that key: sha256(chainId || serializedTransaction ||
sha256(context-free data) or 32 zero bytes) for a transaction, sha256(data) for a
message (eosjs-ecc `sign`). The answer's transaction must be the one sent.
"""

from __future__ import annotations

from collections.abc import Callable

from chainkeys_client._check import b58decode, fail, recover, sha256, unhex
from chainkeys_client._models import Account, EosTransactionSigned, MessageSignature
from chainkeys_client._ripemd160 import ripemd160

K1_PUBLIC, LEGACY_PUBLIC, K1_SIGNATURE = "PUB_K1_", "EOS", "SIG_K1_"


def _checked(body: str, size: int, suffix: bytes) -> bytes | None:
    try:
        raw = b58decode(body)
    except ValueError:
        return None
    data, check = raw[:-4], raw[-4:]
    if len(data) != size or ripemd160(data + suffix)[:4] != check:
        return None
    return data


def parse_public_key(text: str) -> bytes:
    """The 33 bytes of a PUB_K1_… or legacy EOS… key (its checksum checked), or of
    66 hex digits; ValueError otherwise."""
    key: bytes | None = None
    if text.startswith(K1_PUBLIC):
        key = _checked(text[len(K1_PUBLIC) :], 33, b"K1")
    elif text.startswith(LEGACY_PUBLIC):
        key = _checked(text[len(LEGACY_PUBLIC) :], 33, b"")
    elif len(text) == 66:
        try:
            key = bytes.fromhex(text)
        except ValueError:
            key = None
    if key is None or key[0] not in (2, 3):
        raise ValueError("not an EOS public key (PUB_K1_…, EOS… or compressed hex)")
    return key


def account_key(account: Account) -> bytes:
    """The key of an EOS account lookup; both forms, when both are given, must agree."""
    keys = set()
    for text in (account.public_key_k1, account.public_key):
        if text:
            try:
                keys.add(parse_public_key(text))
            except ValueError:
                fail(f"the account lookup of {account.name} gives a key that does not parse")
    if len(keys) != 1:
        fail(f"the account lookup of {account.name} gives no key, or two different ones")
    return keys.pop()


def signature_key(signature: str, digest: bytes) -> bytes:
    """The compressed key a SIG_K1_ signature of `digest` recovers to."""
    if not isinstance(signature, str) or not signature.startswith(K1_SIGNATURE):
        fail("a signature is not a SIG_K1_ signature")
    data = _checked(signature[len(K1_SIGNATURE) :], 65, b"K1")
    if data is None:
        fail("a SIG_K1_ signature's checksum does not match")
    if not 27 <= data[0] <= 34:
        fail("a SIG_K1_ signature's header byte is not 27 + 4 + recovery id")
    return bytes(recover(data[1:], (data[0] - 27) & 3, digest).format(compressed=True))


def _same_key(signature: str, digest: bytes, key: bytes, name: str) -> None:
    if signature_key(signature, digest) != key:
        fail(f"a signature recovers to another key than the account's ({name})")


def check_transaction(
    name: str, key: bytes, chain_id: str, serialized: str | bytes, cfd: str | bytes | None
) -> Callable[[EosTransactionSigned], None]:
    def check(answer: EosTransactionSigned) -> None:
        tx = unhex(serialized, "serializedTransaction")
        free = unhex(cfd or "", "serializedContextFreeData")
        if unhex(answer.serializedTransaction, "the answer's serializedTransaction") != tx:
            fail("the answer's serializedTransaction is not the one sent")
        if unhex(answer.serializedContextFreeData or "", "the answer's context-free data") != free:
            fail("the answer's serializedContextFreeData is not the one sent")
        if not answer.signatures:
            fail("the answer carries no signature")
        digest = sha256(unhex(chain_id, "chainId") + tx + (sha256(free) if free else bytes(32)))
        for signature in answer.signatures:
            _same_key(signature, digest, key, name)

    return check


def check_message(
    name: str, key: bytes, message: str | None, data: bytes | str | None
) -> Callable[[MessageSignature], None]:
    def check(answer: MessageSignature) -> None:
        raw = message.encode() if message is not None else unhex(data or "", "data")
        _same_key(answer.signature, sha256(raw), key, name)

    return check
