"""Signing with stored keys: decode, check, then sign; every signature audited."""
