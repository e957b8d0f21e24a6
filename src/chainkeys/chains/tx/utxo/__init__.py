"""Dogecoin and Litecoin signers: Core's signmessage (more to come: PSBT, raw transactions).

The coins differ only in data (`PARAMS`): message magic, ticker, whether
segwit exists. No per-coin code paths.
"""
