"""chainkeys: self-hosted multi-chain account (key) custody service."""

__version__ = "0.1.0"
