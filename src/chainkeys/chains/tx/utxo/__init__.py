"""Dogecoin and Litecoin signers: Core's signmessage, BIP174 PSBTs, Core's raw transactions.

The coins differ only in data (`PARAMS`): message magic, ticker, whether
segwit exists. No per-coin code paths.
"""

from chainkeys.chains.spec import Vocabulary
from chainkeys.chains.tx.utxo import message, multisig, psbt, rawtx
from chainkeys.chains.tx.utxo.params import units
from chainkeys.chains.tx.utxo.transaction import never_sign

__all__ = ["VOCABULARY", "message", "multisig", "never_sign", "psbt", "rawtx", "units"]

VOCABULARY = Vocabulary(None, "output", outputs=True)  # outputs: no types to list
