"""The barrier (vault/barrier.py) and what it stands on: AES-GCM sealing (seal.py), the
master-key providers (providers.py, pkcs11.py), the ring's storage (repository.py),
opening at start (opening.py) and keys derived for other purposes (derive.py)."""
