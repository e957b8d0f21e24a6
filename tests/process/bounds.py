"""The database bounds the outage, fault and failover tests run servers with: small, so a
request made while PostgreSQL is away answers within seconds (a pool wait, a statement
timeout and a connect timeout of 2 s each), not after the defaults' minutes."""

from __future__ import annotations

TIMEOUTS = {
    "CHAINKEYS_DB_CONNECT_TIMEOUT": "2",
    "CHAINKEYS_DB_POOL_TIMEOUT": "2",
    "CHAINKEYS_DB_STATEMENT_TIMEOUT_MS": "2000",
    "CHAINKEYS_DB_POOL_SIZE": "4",
}
