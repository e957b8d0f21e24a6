"""Dogecoin and Litecoin signers: Core's signmessage, BIP174 PSBTs, Core's raw transactions.

The coins differ only in data (`PARAMS`): message magic, ticker, whether
segwit exists. No per-coin code paths.
"""
