"""One settings object, read once: CHAINKEYS_* variables, then `CHAINKEYS_<SECRET>_FILE`
files, then an optional TOML file (CHAINKEYS_CONFIG). `load_settings` turns every
mistake into one line naming the variable, what it got and what it accepts."""

from __future__ import annotations

import difflib
import ipaddress
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from chainkeys.settings_words import describe

PREFIX = "CHAINKEYS_"
# Secrets that may come from a file named by CHAINKEYS_<NAME>_FILE (Docker/systemd
# credentials). The master key's file form is CHAINKEYS_MASTER_KEY_FILE (the key file),
# the PIN's is the pkcs11_pin_file setting.
SECRET_FILES = (
    "audit_http_authorization",
    "cosigner_secret",
    "database_url",
    "metrics_token",
    "operator_token",
    "previous_master_keys",
    "redis_url",
    "webhook_secret",
)


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
    # Where the master key lives: file (default), env (CHAINKEYS_MASTER_KEY; chosen when
    # it is set), pkcs11 (wrapped by an AES key in an HSM, docs/security.md) or shamir
    # (wrapped by a key only a quorum of operators' shares rebuilds: starts sealed).
    # awskms, transit (Vault/OpenBao) and kmip wrap it by a key outside (docs/deploy.md).
    master_key_provider: (
        Literal["file", "env", "pkcs11", "shamir", "awskms", "transit", "kmip"] | None
    ) = None
    # Bearer token of POST /sys/seal (seals a shamir server again); unset: no HTTP seal.
    operator_token: SecretStr | None = None
    pkcs11_module: Path | None = None  # the token's PKCS#11 .so
    pkcs11_token_label: str | None = None
    pkcs11_key_label: str = Field(default="chainkeys-master", min_length=1)
    pkcs11_pin: SecretStr | None = None
    pkcs11_pin_file: Path | None = None
    # awskms: the KMS key (id, ARN or alias/…); region, credentials and endpoint come the
    # AWS SDK's usual way (AWS_REGION, AWS_PROFILE, AWS_ENDPOINT_URL, an instance role).
    awskms_key_id: str | None = None
    # transit: Vault's or OpenBao's transit engine; the token is read from a file.
    transit_addr: str | None = None
    transit_mount: str = Field(default="transit", min_length=1)
    transit_key: str | None = None
    transit_token_file: Path | None = None
    transit_ca: Path | None = None  # a CA bundle for an https:// address (default: system)
    # kmip: a KMIP server's AES key, over mutual TLS.
    kmip_host: str | None = None
    kmip_port: int = Field(default=5696, ge=1, le=65535)
    kmip_cert: Path | None = None
    kmip_key: Path | None = None
    kmip_ca: Path | None = None
    kmip_key_id: str | None = None
    # Deleted accounts stay sealed (restorable by an operator) this long; 0 erases at once.
    deleted_retention_days: int = Field(default=30, ge=0, le=36_500)
    # How long a POST with an Idempotency-Key replays its first response.
    idempotency_ttl_seconds: int = Field(default=24 * 3600, ge=60, le=30 * 24 * 3600)

    host: str = "127.0.0.1"
    # The event loop `serve`'s workers run on: uvloop (a dependency of chainkeys, what
    # bench/README.md measures) or Python's own asyncio (api/serve.py run_granian).
    event_loop: Literal["uvloop", "asyncio"] = "uvloop"
    # `serve`'s worker processes when --workers is not given: "auto" (one per core the
    # process may use, one under shamir) or a number (api/serve.py worker_count)
    workers: str = Field(default="auto", pattern=r"^(auto|[1-9][0-9]{0,2})$")
    port: int = Field(default=8000, ge=1, le=65535)

    # A generated private key is returned once in the create response.
    reveal_generated_keys: bool = True
    # POST /{family}/{name}/export answers only when this is on and the token has `export`.
    export_enabled: bool = False

    max_body_bytes: int = Field(default=16 * 1024, ge=1024, le=64 * 1024 * 1024)
    # Deadlines (not idle timers): the request head, then the whole body.
    head_timeout_seconds: float = Field(default=10.0, gt=0, le=3600)
    body_timeout_seconds: float = Field(default=10.0, gt=0, le=3600)
    # After SIGTERM: in-flight requests finishing within this are answered, then the
    # workers are stopped whatever they hold.
    shutdown_timeout: float = Field(default=10.0, gt=0, le=3600)
    # How often a server re-reads a tenant's signing policy: changes apply within it.
    policy_refresh_seconds: float = Field(default=1.0, gt=0, le=10)
    # How often a server reads the master-key ring and writes its heartbeat: a key
    # rotation reaches every process within it (vault/barrier.py).
    key_refresh_seconds: float = Field(default=2.0, gt=0, le=10)
    list_default_limit: int = Field(default=100, ge=1, le=100_000)
    list_max_limit: int = Field(default=1000, ge=1, le=100_000)

    # Per-token token bucket: refill per second (0 = off) and bucket size
    # (None: one second's worth, at least 1). Shared across replicas via redis_url.
    rate_limit_per_second: float = Field(default=0.0, ge=0, le=1_000_000)
    rate_limit_burst: int | None = Field(default=None, ge=1, le=1_000_000)
    redis_url: SecretStr | None = None
    # /metrics: unauthenticated on the API port unless a token is set (then it needs
    # `Authorization: Bearer <token>`); with metrics_port it moves to its own listener
    # (bind metrics_host to an internal address) and the API port no longer serves it.
    metrics_token: SecretStr | None = None
    metrics_port: int | None = Field(default=None, ge=1, le=65535)
    metrics_host: str = "127.0.0.1"
    # Approval state changes are POSTed here (docs/approvals.md), signed with the secret.
    webhook_url: str | None = None
    webhook_secret: SecretStr | None = None
    # Delivered webhook events are forgotten after this many days.
    webhook_retention_days: int = Field(default=7, ge=1, le=3650)
    # The co-signer (docs/cosigner.md): before any key opens, every signature the policy
    # allows is POSTed here, signed with the secret (32 bytes or more, best from
    # CHAINKEYS_COSIGNER_SECRET_FILE), and signed only if its signed answer approves.
    # https://, or http:// to a loopback host only.
    cosigner_url: str | None = None
    cosigner_secret: SecretStr | None = None
    cosigner_timeout: float = Field(default=10.0, gt=0, le=120)
    # Where people reach the console (https://keys.example.com): approver passkeys are
    # bound to its origin and host (the WebAuthn RP id); unset, passkeys are off.
    public_url: str | None = None

    # Audit devices (audit/devices.py): copies of the audit table shipped beside it, each
    # event with its row's id. A JSON Lines file (reopened on SIGHUP or when logrotate
    # moves it), RFC 5424 syslog (udp://host:514 or tcp://host:port) and HTTP batches.
    audit_file: Path | None = None
    audit_syslog: str | None = None
    audit_syslog_facility: Literal[
        "kern",
        "user",
        "auth",
        "daemon",
        "authpriv",
        "local0",
        "local1",
        "local2",
        "local3",
        "local4",
        "local5",
        "local6",
        "local7",
    ] = "auth"
    audit_http_url: str | None = None
    # The HTTP device's Authorization header, whole ("Bearer …", "Splunk …").
    audit_http_authorization: SecretStr | None = None
    # Refuse (503 audit_unavailable) a change while no device that confirms delivery
    # (file, tcp syslog, HTTP) is healthy.
    audit_required: bool = False

    # FULL: an acknowledged write survives power loss, not only a process crash.
    sqlite_synchronous: Literal["NORMAL", "FULL", "EXTRA"] = "FULL"
    sqlite_busy_timeout_ms: int = Field(default=5000, ge=0, le=3_600_000)
    db_pool_size: int = Field(default=10, ge=1, le=1000)
    db_pool_timeout: float = Field(default=5.0, gt=0, le=3600)
    db_connect_timeout: float = Field(default=5.0, gt=0, le=3600)
    db_statement_timeout_ms: int = Field(default=10_000, ge=0, le=3_600_000)

    log_level: str = "INFO"
    log_json: bool = False
    # One line per request (~7 µs each); off where the load balancer logs requests.
    access_log: bool = True

    @field_validator("webhook_url")
    @classmethod
    def _webhook_url(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            return None
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError("the webhook URL is http:// or https://")
        return value

    @field_validator("public_url")
    @classmethod
    def _public_url(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        parsed = urlsplit(value.strip())
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise ValueError("the public URL is https://host[:port] (http:// only for localhost)")
        if parsed.scheme == "http" and parsed.hostname != "localhost":
            raise ValueError(
                "the public URL is https:// (browsers allow passkeys over http:// "
                "only on localhost)"
            )
        return f"{parsed.scheme}://{parsed.netloc}"

    @model_validator(mode="after")
    def _webhook_needs_a_secret(self) -> Settings:
        if self.webhook_url is not None and self.webhook_secret is None:
            raise ValueError(
                "CHAINKEYS_WEBHOOK_URL needs CHAINKEYS_WEBHOOK_SECRET (receivers "
                "check every event's signature with it)"
            )
        return self

    @field_validator("cosigner_url")
    @classmethod
    def _cosigner_url(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        parsed = urlsplit(value.strip())
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise ValueError("the co-signer URL is https://host[:port]/path")
        if parsed.scheme == "http" and not loopback(parsed.hostname):
            raise ValueError(
                "the co-signer URL is https:// (http:// only to a loopback host: "
                "localhost, 127.0.0.1, ::1)"
            )
        return value.strip()

    @model_validator(mode="after")
    def _cosigner_needs_a_secret(self) -> Settings:
        secret = self.cosigner_secret
        if self.cosigner_url is not None and (
            secret is None or len(secret.get_secret_value().encode()) < 32
        ):
            raise ValueError(
                "CHAINKEYS_COSIGNER_URL needs CHAINKEYS_COSIGNER_SECRET_FILE, a file of at "
                "least 32 bytes (questions and answers are signed with it)"
            )
        return self

    @field_validator("audit_syslog")
    @classmethod
    def _audit_syslog(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        parsed = urlsplit(value.strip())
        try:
            port = parsed.port
        except ValueError:  # not a number, or out of range
            port = 0
        if parsed.scheme not in ("udp", "tcp") or not parsed.hostname or port == 0:
            raise ValueError("the syslog address is udp://host[:port] or tcp://host[:port]")
        return value.strip()

    @field_validator("audit_http_url")
    @classmethod
    def _audit_http_url(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        parsed = urlsplit(value.strip())
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise ValueError("the audit HTTP URL is http:// or https://")
        return value.strip()

    @model_validator(mode="after")
    def _audit_required_needs_a_device(self) -> Settings:
        confirming = (
            self.audit_file is not None
            or self.audit_http_url is not None
            or (self.audit_syslog or "").startswith("tcp:")
        )
        if self.audit_required and not confirming:
            raise ValueError(
                "CHAINKEYS_AUDIT_REQUIRED needs an audit device that confirms "
                "delivery: CHAINKEYS_AUDIT_FILE, CHAINKEYS_AUDIT_HTTP_URL or a "
                "tcp:// CHAINKEYS_AUDIT_SYSLOG (udp:// never learns of a "
                "loss)"
            )
        return self

    @field_validator("database_url")
    @classmethod
    def _known_database(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and not value.get_secret_value().strip():
            return None  # CHAINKEYS_DATABASE_URL= means unset: the embedded default
        if value is not None:
            scheme = value.get_secret_value().partition(":")[0].lower()
            if scheme.partition("+")[0] not in ("postgresql", "postgres", "sqlite"):
                raise ValueError(
                    f"the scheme {scheme!r} is not supported: use postgresql://user@host/db "
                    "(or sqlite:////absolute/path.db; unset: SQLite in the data directory)"
                )
        return value

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        config = os.environ.get(f"{PREFIX}CONFIG")
        sources: list[PydanticBaseSettingsSource] = [
            init_settings,
            env_settings,
            SecretFiles(settings_cls),
        ]
        if config:
            sources.append(TomlConfigSettingsSource(settings_cls, toml_file=Path(config)))
        return tuple(sources)

    @property
    def key_provider(self) -> str:
        """The master-key provider in use (CHAINKEYS_MASTER_KEY alone means env)."""
        if self.master_key_provider is not None:
            return self.master_key_provider
        return "env" if self.master_key is not None else "file"

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


def loopback(host: str) -> bool:
    """Whether `host` names this machine only (plain http:// stays on it)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class SecretFiles(PydanticBaseSettingsSource):
    """CHAINKEYS_<SECRET>_FILE: the secret is the file's content (trailing newline dropped)."""

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        if field_name not in SECRET_FILES:
            return None, field_name, False
        path = os.environ.get(f"{PREFIX}{field_name.upper()}_FILE")
        if not path:
            return None, field_name, False
        try:
            return Path(path).read_text().rstrip("\r\n"), field_name, False
        except OSError as exc:
            raise ConfigError(f"{PREFIX}{field_name.upper()}_FILE={path}: {exc.strerror}") from None

    def __call__(self) -> dict[str, Any]:
        found = {}
        for name, field in self.settings_cls.model_fields.items():
            value, _, _ = self.get_field_value(field, name)
            if value is not None:
                found[name] = value
        return found


class ConfigError(ValueError):
    """A setting that cannot be used: the message is one line for the operator."""


ALLOW_UNKNOWN = f"{PREFIX}ALLOW_UNKNOWN_SETTINGS"


def known_variables() -> set[str]:
    names = {f"{PREFIX}{n.upper()}" for n in Settings.model_fields}
    # read by the CLI's `--url` options (cli/remote.py), not by Settings
    cli = {f"{PREFIX}URL", f"{PREFIX}TOKEN_FILE", f"{PREFIX}CA_FILE"}
    extra = {f"{PREFIX}CONFIG", ALLOW_UNKNOWN, *cli}
    return names | {f"{PREFIX}{n.upper()}_FILE" for n in SECRET_FILES} | extra


def unknown_variables(environ: Mapping[str, str]) -> list[str]:
    """Warnings for CHAINKEYS_* variables no setting reads, with a "did you mean"."""
    known = known_variables()
    out = []
    for name in sorted(environ):
        if name.startswith(PREFIX) and name not in known and not name.startswith(f"{PREFIX}TEST_"):
            close = difflib.get_close_matches(name, known, n=1, cutoff=0.75)
            hint = f" (did you mean {close[0]}?)" if close else ""
            out.append(f"{name} is not a chainkeys setting{hint}")
    return out


def _config_file_problems(path: str) -> list[str]:
    try:
        data = tomllib.loads(Path(path).read_text())
    except OSError as exc:
        raise ConfigError(f"{PREFIX}CONFIG={path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{PREFIX}CONFIG={path}: not valid TOML ({exc})") from None
    fields = set(Settings.model_fields)
    out = []
    for key in sorted(data):
        if key not in fields:
            close = difflib.get_close_matches(key, fields, n=1, cutoff=0.75)
            hint = f" (did you mean {close[0]}?)" if close else ""
            out.append(f"{path}: {key} is not a chainkeys setting{hint}")
    return out


def load_settings() -> tuple[Settings, list[str]]:
    """Settings and warnings; ConfigError (one line) for a value that cannot be used,
    and for a setting name no setting reads (a misspelled one would silently leave a
    default in force: a custody service must not start on a typo) unless
    CHAINKEYS_ALLOW_UNKNOWN_SETTINGS=1 turns those into warnings."""
    unknown = unknown_variables(os.environ)
    config = os.environ.get(f"{PREFIX}CONFIG")
    if config:
        unknown += _config_file_problems(config)
    warnings = [f"{w}; ignored ({ALLOW_UNKNOWN}=1)" for w in unknown]
    if unknown and os.environ.get(ALLOW_UNKNOWN, "").strip().lower() not in ("1", "true", "yes"):
        more = f" (and {len(unknown) - 1} more)" if len(unknown) > 1 else ""
        raise ConfigError(
            f"{unknown[0]}{more}; fix it, or set {ALLOW_UNKNOWN}=1 to start with it ignored"
        )
    try:
        return Settings(), warnings
    except ValidationError as exc:
        raise ConfigError(describe(exc, Settings.model_fields, PREFIX)) from None
