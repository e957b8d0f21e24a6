"""Decode and sign, per family: pure, like the rest of `chains/`.

Every sign request goes through two steps that never mix: `prepare` decodes
what the caller sent into a `Summary` (chain id, what moves where, fee) and
checks it against the account, without any secret; only then is the key
opened and `Decoded.sign` run. A request that cannot be decoded or fails a
check raises `ChainError` from `prepare` and no key is ever touched.
"""
