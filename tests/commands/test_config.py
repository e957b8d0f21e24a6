"""Configuration as an operator meets it: every bad setting is one line naming the
variable, what it got and what it accepts (exit 2); misspelled CHAINKEYS_* variables
are warned about with a "did you mean"; a TOML file and `_FILE` secrets work; a
database that cannot be reached is named with its cause, never its password. No test
here needs the default port (8000) free: `./scripts/serve` may hold it meanwhile."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import pytest
from tests.conftest import chainkeys_cli, free_port, pg_available

from chainkeys.api.serve import claim_port
from chainkeys.config import Settings
from chainkeys.errors import StartupError


@contextmanager
def default_port_in_use() -> Iterator[None]:
    """The default host and port held as a running `chainkeys serve` holds them (its
    lock), or already held (by the README's `./scripts/serve`, or another program)."""
    host, port = Settings.model_fields["host"].default, Settings.model_fields["port"].default
    lock: socket.socket | None = None
    with suppress(StartupError):  # in use already: the same for the test
        lock = claim_port(host, port)
    try:
        yield
    finally:
        if lock is not None:
            lock.close()


def one_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    return lines[0]


@pytest.mark.parametrize(
    ("env", "line"),
    [
        (
            {"CHAINKEYS_PORT": "abc"},
            "chainkeys: CHAINKEYS_PORT='abc': input should be a valid integer, unable to parse string "
            "as an integer",
        ),
        (
            {"CHAINKEYS_SQLITE_SYNCHRONOUS": "OFF"},
            "chainkeys: CHAINKEYS_SQLITE_SYNCHRONOUS='OFF': input should be 'NORMAL', 'FULL' or 'EXTRA'",
        ),
        (
            {"CHAINKEYS_MAX_BODY_BYTES": "10"},
            "chainkeys: CHAINKEYS_MAX_BODY_BYTES='10': out of range: from 1024 to 67108864",
        ),
        (
            {"CHAINKEYS_PORT": "99999"},
            "chainkeys: CHAINKEYS_PORT='99999': out of range: from 1 to 65535",
        ),
        ({"CHAINKEYS_PORT": "-5"}, "chainkeys: CHAINKEYS_PORT='-5': out of range: from 1 to 65535"),
        (
            {"CHAINKEYS_HEAD_TIMEOUT_SECONDS": "0"},
            "chainkeys: CHAINKEYS_HEAD_TIMEOUT_SECONDS='0': out of range: above 0, at most 3600",
        ),
        (
            {"CHAINKEYS_DATABASE_URL": "mysql://root:hunter2@db/chainkeys"},
            "chainkeys: CHAINKEYS_DATABASE_URL=(hidden): the scheme 'mysql' is not supported: use "
            "postgresql://user@host/db (or sqlite:////absolute/path.db; unset: SQLite in the data "
            "directory)",
        ),
    ],
)
def test_a_bad_setting_is_one_line_and_exit_2(
    tmp_path: Path, env: dict[str, str], line: str
) -> None:
    for command in (("serve",), ("token", "list")):
        done = chainkeys_cli(*command, env={"CHAINKEYS_DATA_DIR": str(tmp_path), **env})
        assert done.returncode == 2
        assert one_line(done.stderr) == line
        assert "hunter2" not in done.stderr


def test_a_port_flag_out_of_range_is_one_line(tmp_path: Path) -> None:
    for port in ("99999", "-5", "0"):
        done = chainkeys_cli("serve", f"--port={port}", env={"CHAINKEYS_DATA_DIR": str(tmp_path)})
        assert done.returncode != 0
        assert one_line(done.stderr) == f"chainkeys: --port {port}: out of range: from 1 to 65535"
    assert not tmp_path.joinpath("chainkeys.db").exists()


def test_misspelled_variables_are_an_error_with_a_suggestion(tmp_path: Path) -> None:
    env = {"CHAINKEYS_DATA_DIR": str(tmp_path), "CHAINKEYS_PROT": "9000", "CHAINKEYS_XYZZY": "1"}
    assert chainkeys_cli("init", env={"CHAINKEYS_DATA_DIR": str(tmp_path)}).returncode == 0
    done = chainkeys_cli("token", "list", env=env)
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "chainkeys: CHAINKEYS_PROT is not a chainkeys setting (did you mean CHAINKEYS_PORT?) "
        "(and 1 more); fix it, or set CHAINKEYS_ALLOW_UNKNOWN_SETTINGS=1 to start with it "
        "ignored",
    ]
    allowed = chainkeys_cli("token", "list", env={**env, "CHAINKEYS_ALLOW_UNKNOWN_SETTINGS": "1"})
    assert allowed.returncode == 0, allowed.stderr
    assert allowed.stderr.splitlines() == [
        "chainkeys: warning: CHAINKEYS_PROT is not a chainkeys setting (did you mean "
        "CHAINKEYS_PORT?); ignored (CHAINKEYS_ALLOW_UNKNOWN_SETTINGS=1)",
        "chainkeys: warning: CHAINKEYS_XYZZY is not a chainkeys setting; ignored "
        "(CHAINKEYS_ALLOW_UNKNOWN_SETTINGS=1)",
    ]


def test_a_toml_file_and_secret_files(tmp_path: Path) -> None:
    data = tmp_path / "from-toml"
    config = tmp_path / "chainkeys.toml"
    config.write_text(f'data_dir = "{data}"\nport = 8123\nlog_levl = "DEBUG"\n')
    typo = chainkeys_cli("init", env={"CHAINKEYS_CONFIG": str(config)})
    assert typo.returncode == 2
    assert f"{config}: log_levl is not a chainkeys setting (did you mean log_level?)" in typo.stderr
    config.write_text(f'data_dir = "{data}"\nport = 8123\nlog_level = "DEBUG"\n')
    assert chainkeys_cli("init", env={"CHAINKEYS_CONFIG": str(config)}).returncode == 0
    made = chainkeys_cli("token", "create", "--tenant", "t", env={"CHAINKEYS_CONFIG": str(config)})
    assert made.returncode == 0, made.stderr
    assert (data / "chainkeys.db").exists()  # the file's data_dir was used
    bad = tmp_path / "bad.toml"
    bad.write_text("port = 'x'\n")
    done = chainkeys_cli("token", "list", env={"CHAINKEYS_CONFIG": str(bad)})
    assert done.returncode == 2 and one_line(done.stderr).startswith(
        "chainkeys: CHAINKEYS_PORT='x'"
    )
    secret = tmp_path / "db-url"
    secret.write_text("mysql://root:hunter2@db/x\n")
    done = chainkeys_cli(
        "token",
        "list",
        env={"CHAINKEYS_DATABASE_URL_FILE": str(secret), "CHAINKEYS_DATA_DIR": str(tmp_path)},
    )
    assert done.returncode == 2 and "CHAINKEYS_DATABASE_URL=(hidden)" in done.stderr
    missing = chainkeys_cli("token", "list", env={"CHAINKEYS_REDIS_URL_FILE": str(tmp_path / "no")})
    assert missing.returncode == 2
    assert one_line(missing.stderr).endswith("/no: No such file or directory")


def test_an_unreachable_database_names_host_and_cause_not_password(tmp_path: Path) -> None:
    env = {
        "CHAINKEYS_DATA_DIR": str(tmp_path),
        "CHAINKEYS_DATABASE_URL": "postgresql://app:hunter2@127.0.0.1:1/chainkeys",
    }
    with default_port_in_use():  # as when `./scripts/serve` runs: this test still passes
        done = chainkeys_cli("serve", f"--port={free_port()}", env=env)
    assert done.returncode == 1
    assert one_line(done.stderr) == (
        "chainkeys: cannot open the database postgresql://app:***@127.0.0.1:1/chainkeys: "
        "ConnectionRefusedError: [Errno 111] Connect call failed ('127.0.0.1', 1)"
    )
    if pg_available() is None:
        done = chainkeys_cli(
            "token",
            "list",
            env={"CHAINKEYS_DATABASE_URL": "postgresql://postgres@127.0.0.1:5432/no_such_db_here"},
        )
        assert one_line(done.stderr) == (
            "chainkeys: cannot open the database postgresql://postgres@127.0.0.1:5432/"
            'no_such_db_here: InvalidCatalogNameError: database "no_such_db_here" does not exist'
        )
