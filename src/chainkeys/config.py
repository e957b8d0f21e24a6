"""One settings object, read once from CHAINKEYS_* environment variables."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    """Service configuration; secrets are SecretStr so they never print."""

    model_config = SettingsConfigDict(env_prefix="CHAINKEYS_", frozen=True, extra="ignore")

    data_dir: Path = Path("./chainkeys-data")
    # Default: SQLite in data_dir. postgresql://… switches to PostgreSQL.
    database_url: SecretStr | None = None
    # 32 bytes, base64. When unset the key file in data_dir is used (created on first start).
    master_key: SecretStr | None = None
    master_key_file: Path | None = None
    # Comma-separated base64 keys still held to open older seals during a rotation.
    previous_master_keys: SecretStr | None = None
    # Deleted accounts stay sealed (restorable by an operator) this long; 0 erases at once.
    deleted_retention_days: int = Field(default=30, ge=0)
    # How long a POST with an Idempotency-Key replays its first response.
    idempotency_ttl_seconds: int = Field(default=24 * 3600, ge=60)

    host: str = "127.0.0.1"
    port: int = 8000

    # A generated private key is returned once in the create response.
    reveal_generated_keys: bool = True
    # POST /{family}/{name}/export answers only when this is on and the token has `export`.
    export_enabled: bool = False

    max_body_bytes: int = Field(default=16 * 1024, ge=1024)
    # Deadlines (not idle timers): the request head, then the whole body.
    head_timeout_seconds: float = Field(default=10.0, gt=0)
    body_timeout_seconds: float = Field(default=10.0, gt=0)
    # After SIGTERM: in-flight requests finishing within this are answered, then the
    # workers are stopped whatever they hold.
    shutdown_timeout: float = Field(default=10.0, gt=0)
    list_default_limit: int = Field(default=100, ge=1)
    list_max_limit: int = Field(default=1000, ge=1)

    # Per-token token bucket: refill per second (0 = off) and bucket size
    # (None: one second's worth, at least 1). Shared across replicas via redis_url.
    rate_limit_per_second: float = Field(default=0.0, ge=0)
    rate_limit_burst: int | None = Field(default=None, ge=1)
    redis_url: SecretStr | None = None

    # FULL: an acknowledged write survives power loss, not only a process crash.
    sqlite_synchronous: Literal["NORMAL", "FULL", "EXTRA"] = "FULL"
    sqlite_busy_timeout_ms: int = Field(default=5000, ge=0)
    db_pool_size: int = Field(default=10, ge=1)
    db_pool_timeout: float = Field(default=5.0, gt=0)
    db_connect_timeout: float = Field(default=5.0, gt=0)
    db_statement_timeout_ms: int = Field(default=10_000, ge=0)

    log_level: str = "INFO"
    log_json: bool = False
    # One line per request (~7 µs each); off where the load balancer logs requests.
    access_log: bool = True

    @property
    def sqlite_path(self) -> Path:
        return self.data_dir / "chainkeys.db"

    @property
    def key_file(self) -> Path:
        return self.master_key_file or self.data_dir / "master.key"

    @property
    def db_url(self) -> str:
        if self.database_url is not None:
            return self.database_url.get_secret_value()
        return f"sqlite:///{self.sqlite_path}"
