"""HD wallets: sealed BIP39 phrases, accounts derived by path, extended public keys
(service.py: the rules; repository.py: their SQL)."""
