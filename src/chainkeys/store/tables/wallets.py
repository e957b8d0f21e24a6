"""HD wallets: their sealed phrases, index counters and multisigs."""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Column,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Table,
    Text,
    UniqueConstraint,
)

from chainkeys.store.tables.base import Id, metadata

# HD wallets: one sealed BIP39 phrase (and passphrase) per wallet. A deleted wallet
# keeps its row (deleted_ms set) for the retention period, restorable; the accounts
# derived from it are ordinary accounts and stay usable either way.
wallets = Table(
    "wallets",
    metadata,
    Column("seq", Id, primary_key=True, autoincrement=True),  # keyset pages, rotation batches
    Column("id", String(32), nullable=False, unique=True),  # public: random, not guessable
    Column("tenant_id", String(32), ForeignKey("tenants.id"), nullable=False),
    Column("name", String(64), nullable=False),
    Column("fingerprint", String(8), nullable=False),  # the master key's (public)
    Column("secret", LargeBinary, nullable=False),  # sealed {"mnemonic", "passphrase"}
    Column("key_id", String(16), nullable=False),
    Column("created_ms", BigInteger, nullable=False),
    Column("exported", Integer, nullable=False),  # 1 once exported, for good
    Column("deleted_ms", BigInteger, nullable=True),
    # HMAC-SHA256 of the phrase and passphrase under a per-store key (sealed in `meta`):
    # one wallet per seed per tenant, held by the database, with nothing unkeyed stored
    # (NULL for wallets made before it existed: the phrases themselves are compared).
    Column("seed_key", String(64), nullable=True),
    Column("mac", String(80), nullable=True),  # store/integrity.py WALLETS
    UniqueConstraint("tenant_id", "name"),
    UniqueConstraint("tenant_id", "seed_key"),
    Index("ix_wallets_tenant_id_seq", "tenant_id", "seq"),
    Index("ix_wallets_tenant_id_fingerprint", "tenant_id", "fingerprint"),
    Index("ix_wallets_key_id", "key_id"),
)

# The next index of each (wallet, family, network, address type, account, change): the
# one after the highest derived so far, taken under the tenant's head (wallets/
# repository.py). MACed and pinned by the tenant's head (the `counters` set): a counter
# lowered or put back would hand out an index, and so an address, a second time.
wallet_counters = Table(
    "wallet_counters",
    metadata,
    Column("wallet_id", String(32), primary_key=True),
    Column("tenant_id", String(32), nullable=False),  # whose head pins it
    Column("family", String(16), primary_key=True),
    Column("network", String(32), primary_key=True),
    Column("address_type", String(16), primary_key=True),  # "" where the family has one
    Column("account", Integer, primary_key=True),
    Column("change", Integer, primary_key=True),
    Column("next_index", BigInteger, nullable=False),
    Column("mac", String(80), nullable=True),  # store/integrity.py WALLET_COUNTERS
    Index("ix_wallet_counters_tenant_id", "tenant_id"),
)

# HD multisigs of a wallet (docs/multisig.md): the wallet's BIP48 key is one member,
# the others' extended public keys are stored as given (public data); each index's
# address is a multisig account, its next index a wallet counter named by `id`.
wallet_multisigs = Table(
    "wallet_multisigs",
    metadata,
    Column("seq", Id, primary_key=True, autoincrement=True),
    Column("id", String(16), nullable=False, unique=True),  # public: wms_ + 12 hex
    Column("tenant_id", String(32), ForeignKey("tenants.id"), nullable=False),
    Column("wallet_id", String(32), nullable=False),
    Column("family", String(16), nullable=False),
    Column("network", String(32), nullable=False),
    Column("address_type", String(16), nullable=False),
    Column("threshold", Integer, nullable=False),
    Column("account", Integer, nullable=False),
    Column("xpubs", Text, nullable=False),  # JSON: the other members, as given
    Column("descriptor", Text, nullable=False),  # the receive chain, ranged, with checksum
    Column("created_ms", BigInteger, nullable=False),
    Column("mac", String(80), nullable=True),  # store/integrity.py: the members are facts
    Index("ix_wallet_multisigs_tenant_wallet", "tenant_id", "wallet_id"),
)
