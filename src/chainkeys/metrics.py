"""Prometheus metrics: one registry of what operators watch.

Framework-free (it imports only prometheus_client), so the API, the services
and the store may all count here. With several worker processes, `serve` sets
PROMETHEUS_MULTIPROC_DIR before the workers start and `/metrics` merges every
worker's files (prometheus_client's multiprocess mode).
"""

from __future__ import annotations

import os

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client import multiprocess as mp

from chainkeys import __version__

LATENCY = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)

REQUESTS = Counter("chainkeys_requests", "HTTP requests answered", ["route", "method", "status"])
REQUEST_SECONDS = Histogram(
    "chainkeys_request_duration_seconds",
    "HTTP request latency",
    ["route", "method"],
    buckets=LATENCY,
)
ACCOUNTS_CREATED = Counter(
    "chainkeys_accounts_created", "Accounts created or imported", ["family", "source"]
)
SIGNATURES = Counter("chainkeys_signatures", "Requests signed", ["family", "kind"])
SIGN_REFUSALS = Counter(
    "chainkeys_sign_refusals", "Sign requests refused, by rule", ["family", "kind", "code"]
)
RATE_LIMITED = Counter("chainkeys_rate_limited", "Requests refused by the rate limit")
DB_POOL_IN_USE = Gauge(
    "chainkeys_db_pool_in_use", "PostgreSQL connections in use", multiprocess_mode="livesum"
)
DB_POOL_SIZE = Gauge("chainkeys_db_pool_size", "PostgreSQL pool size", multiprocess_mode="livemax")
COMMIT_SECONDS = Histogram(
    "chainkeys_db_commit_seconds", "Write transaction commit latency", buckets=LATENCY
)
SEAL_REFUSALS = Counter(
    "chainkeys_seal_refusals", "Seals and opens the barrier refused, by reason", ["reason"]
)
INTEGRITY_FAILURES = Counter(
    "chainkeys_integrity_failures",
    "Rows refused because their MAC failed (the database was edited), by table",
    ["table"],
)
BACKGROUND_ERRORS = Counter(
    "chainkeys_background_errors", "Errors that ended a round of a background task", ["task"]
)
CHANGE_COUNTER_READS = Counter(
    "chainkeys_change_counter_reads",
    "SQLite change-counter reads: answered by the shared-memory header (mapped), by PRAGMA "
    "data_version (pragma); header re-reads after a commit between the two (raced) and "
    "mappings given up as stale",
    ["path"],
)
CACHE_REFRESHES = Counter(
    "chainkeys_cache_refreshes",
    "Token, account-view and account-row cache checks that found a commit since the last: "
    "values kept "
    "(only this process's own commits, none changing the cache's tables), or cleared (by "
    "another connection's or process's commit, or an own one that changed them)",
    ["cache", "outcome"],
)
BUILD_INFO = Gauge(
    "chainkeys_build_info", "The running build", ["version"], multiprocess_mode="max"
)
BUILD_INFO.labels(__version__).set(1)


def exposition() -> tuple[bytes, str]:
    """The metrics text and its content type (every worker's, in multiprocess mode)."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        mp.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
        return generate_latest(registry), CONTENT_TYPE_LATEST
    return generate_latest(), CONTENT_TYPE_LATEST
