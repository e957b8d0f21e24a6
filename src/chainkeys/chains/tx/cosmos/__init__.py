"""Cosmos signers: cosmjs `OfflineDirectSigner`/`OfflineAminoSigner`, Keplr ADR-036,
and Moon's transfer shapes, decoded before anything is signed.

Protobuf types come from `cosmospy-protobuf` (the SDK's own .proto files,
compiled). Decoding is strict, because protobuf is lenient: a parser keeps
fields it does not know and writes them back, so a chain newer than this
decoder (ibc-go v9's `tokens`, the SDK 0.46 `tip`) would act on bytes the
policy never saw. Every message is parsed, every unknown field at any depth
is a refusal, every `Any` is unpacked and checked the same way (or marked
undecoded), extension options are refused, and the bytes must re-encode to
exactly what was sent. Amino documents get the same treatment: every key of
a known message is read, any other key is a refusal.
"""

from __future__ import annotations

from chainkeys.chains.spec import MultisigForms, Vocabulary
from chainkeys.chains.tx.base import SignKind
from chainkeys.chains.tx.cosmos import amino, direct, multisig, transfer
from chainkeys.chains.tx.cosmos.common import IBC, SEND, UNITS, never_sign

__all__ = ["KINDS", "MULTISIG", "UNITS", "VOCABULARY", "never_sign"]

KINDS: tuple[SignKind, ...] = (direct.KIND, *amino.KINDS, *transfer.KINDS)
# rules list message type URLs; left out: transfers only
VOCABULARY = Vocabulary("messages", "message type", (SEND, IBC), ibc=True)
# LegacyAminoPubKey threshold keys; `combine` assembles the TxRaw its members signed
MULTISIG = MultisigForms(
    ("multisig",),
    multisig.register,
    multisig.build,
    chosen=False,
    combined=transfer.CosmosTransactionResponse,
)
