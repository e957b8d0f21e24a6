"""What an operator meets first, through the real command: ports, stores, the first token."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from tests.conftest import TLS, chainkeys_cli
from tests.process.test_process import announced, first_token, start

pytestmark = [pytest.mark.slow, pytest.mark.long(45)]


def chainkeys(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The command as an operator runs it: in `cwd`, with no CHAINKEYS_* variable but `env`."""
    unset: dict[str, str | None] = {k: None for k in os.environ if k.startswith("CHAINKEYS_")}
    return chainkeys_cli(*args, env={**unset, **(env or {})}, cwd=cwd)


def test_a_second_server_on_a_port_in_use_is_refused_in_one_line(tmp_path: Path) -> None:
    proc = start({"CHAINKEYS_DATA_DIR": str(tmp_path / "one")}, tmp_path / "one.log")
    try:
        port = proc.base_url.rsplit(":", 1)[1]
        other = chainkeys(
            "serve", "--port", port, "--data-dir", str(tmp_path / "two"), cwd=tmp_path
        )
        assert other.returncode == 2
        assert other.stderr.strip().splitlines() == [
            f"chainkeys: port {port} on 127.0.0.1 is in use by another chainkeys server; "
            "choose another with --port or CHAINKEYS_PORT"
        ]
        assert not (tmp_path / "two").exists()  # refused before anything was made
    finally:
        proc.stop()


def test_a_port_another_program_holds_is_refused_in_one_line(tmp_path: Path) -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = str(held.getsockname()[1])
        done = chainkeys("serve", "--port", port, "--data-dir", str(tmp_path / "d"), cwd=tmp_path)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert lines == [
        f"chainkeys: port {port} on 127.0.0.1 is in use by another program; "
        "choose another with --port/--host or CHAINKEYS_PORT/CHAINKEYS_HOST"
    ]


def test_commands_other_than_serve_and_init_never_make_a_store(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for args in (
        ("token", "list"),
        ("token", "create", "--tenant", "t"),
        ("audit",),
        ("policy", "show", "t"),
        ("key", "rotate"),
        ("db", "upgrade"),
        ("account", "deleted"),
    ):
        done = chainkeys(*args, cwd=elsewhere)
        assert done.returncode == 2, (args, done.stderr)
        [line] = done.stderr.strip().splitlines()
        assert f"no chainkeys store in {elsewhere / 'chainkeys-data'}" in line, line
        assert "--data-dir" in line and "CHAINKEYS_DATA_DIR" in line
    assert list(elsewhere.iterdir()) == []  # nothing made where the command stood
    made = chainkeys("init", cwd=elsewhere)
    assert made.returncode == 0, made.stderr
    assert chainkeys("token", "list", cwd=elsewhere).returncode == 0


def test_the_first_token_goes_to_a_0600_file_not_to_the_log(tmp_path: Path) -> None:
    data = tmp_path / "data"
    proc = start({"CHAINKEYS_DATA_DIR": str(data)}, tmp_path / "s.log")
    try:
        output = announced(proc)
        path = data / "first-token"
        assert oct(path.stat().st_mode & 0o777) == "0o600"
        token = first_token(output)
        assert token.startswith("ck_") and token not in output
        # a quiet start: one schema line, no library set-up; the token block comes last
        log = proc.log_path.read_text()
        assert "alembic" not in log and "Running upgrade" not in log
        assert "chainkeys.store schema created at revision" in log
        assert output.strip().splitlines()[-1].startswith("chainkeys: first start:")
        assert token not in proc.log_path.read_text()
        assert not path.exists()  # read once and deleted, as the message asks
    finally:
        proc.stop()


def test_version_names_the_commit_and_lists_have_json(tmp_path: Path) -> None:
    proc = start({"CHAINKEYS_DATA_DIR": str(tmp_path / "d")}, tmp_path / "v.log")
    try:
        import httpx

        data = httpx.get(f"{proc.base_url}/version", verify=TLS).json()["data"]
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=Path(__file__).parent,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        assert data["commit"] == head
    finally:
        proc.stop()
    env = {"CHAINKEYS_DATA_DIR": str(tmp_path / "d")}
    assert (
        chainkeys(
            "token",
            "create",
            "--tenant",
            "acme",
            "--label",
            "ci",
            "--scope",
            "read",
            cwd=tmp_path,
            env=env,
        ).returncode
        == 0
    )
    listed = chainkeys("token", "list", "--json", cwd=tmp_path, env=env)
    rows = [json.loads(line) for line in listed.stdout.splitlines()]
    assert {"tenant": "acme", "label": "ci", "scopes": ["read"]}.items() <= rows[-1].items()
    shown = chainkeys("policy", "show", "acme", "--json", cwd=tmp_path, env=env)
    assert json.loads(shown.stdout) == {
        "tenant": "acme",
        "version": None,
        "set": None,
        "policy": None,
    }
    audit = chainkeys("audit", "--json", "--action", "token.create", cwd=tmp_path, env=env)
    events = [json.loads(line) for line in audit.stdout.splitlines()]
    assert events and all(e["action"] == "token.create" for e in events)


def test_metrics_can_need_a_token_or_move_to_their_own_listener(tmp_path: Path) -> None:
    import httpx
    from tests.conftest import TLS, free_port

    env = {"CHAINKEYS_DATA_DIR": str(tmp_path / "d"), "CHAINKEYS_METRICS_TOKEN": "m-secret"}
    proc = start(env, tmp_path / "m.log")
    try:
        assert httpx.get(f"{proc.base_url}/metrics", verify=TLS).status_code == 401
        wrong = httpx.get(
            f"{proc.base_url}/metrics", verify=TLS, headers={"Authorization": "Bearer nope"}
        )
        assert wrong.status_code == 401
        ok = httpx.get(
            f"{proc.base_url}/metrics", verify=TLS, headers={"Authorization": "Bearer m-secret"}
        )
        assert ok.status_code == 200 and "chainkeys_requests" in ok.text
    finally:
        proc.stop()
    port = free_port()
    env = {"CHAINKEYS_DATA_DIR": str(tmp_path / "d"), "CHAINKEYS_METRICS_PORT": str(port)}
    proc = start(env, tmp_path / "m2.log", "--workers", "2")
    try:
        assert httpx.get(f"{proc.base_url}/metrics", verify=TLS).status_code == 404
        for _ in range(3):
            httpx.get(f"{proc.base_url}/livez", verify=TLS)
        text = httpx.get(f"http://127.0.0.1:{port}/metrics", verify=TLS).text
        assert 'chainkeys_requests_total{method="GET",route="/livez",status="200"}' in text
    finally:
        proc.stop()


def test_the_wallet_cli_lists_derives_and_exports_nothing(tmp_path: Path) -> None:
    env = {"CHAINKEYS_DATA_DIR": str(tmp_path / "d")}
    assert chainkeys("init", cwd=tmp_path, env=env).returncode == 0
    made = chainkeys("token", "create", "--tenant", "acme", cwd=tmp_path, env=env)
    token = made.stdout.strip().splitlines()[-1]
    proc = start(env, tmp_path / "w.log")
    try:
        import httpx

        phrase = "abandon " * 11 + "about"
        r = httpx.post(
            f"{proc.base_url}/wallets",
            verify=TLS,
            json={"mnemonic": phrase, "name": "main"},
            headers={"Authorization": token},
        )
        assert r.status_code == 200, r.text
    finally:
        proc.stop()
    listed = chainkeys("wallet", "list", "acme", "--json", cwd=tmp_path, env=env)
    [row] = [json.loads(line) for line in listed.stdout.splitlines()]
    assert row["name"] == "main" and row["fingerprint"] == "73c5da0a"
    derived = chainkeys(
        "wallet",
        "derive",
        "acme",
        "main",
        "--family",
        "litecoin",
        "--count",
        "2",
        cwd=tmp_path,
        env=env,
    )
    assert derived.returncode == 0, derived.stderr
    lines = derived.stdout.splitlines()
    assert "ltc1qjmxnz78nmc8nq77wuxh25n2es7rzm5c2rkk4wh" in lines[0]  # BIP84-style, coin 2
    xpub = chainkeys(
        "wallet", "xpub", "acme", "main", "--family", "litecoin", cwd=tmp_path, env=env
    )
    assert (
        xpub.stdout.startswith("xpub  m/84'/2'/0'  xpub")
        and "wpkh([73c5da0a/84'/2'/0']" in xpub.stdout
    )
    assert phrase not in listed.stdout + derived.stdout + xpub.stdout
    commands = chainkeys("wallet", "export", "acme", "main", cwd=tmp_path, env=env)
    assert commands.returncode == 2 and "No such command" in commands.stderr


CRASH = """
import sys
from chainkeys.cli.main import app
from chainkeys.tokens import service

async def crash(self, *args, **kwargs):
    issued = "ck_secret_kept_in_a_local_variable"
    raise RuntimeError("an unexpected failure")

service.TokenService.create = crash
sys.argv = ["chainkeys", "token", "create", "--tenant", "acme", "--data-dir", sys.argv[1]]
app()
"""


def test_a_crash_shows_no_local_variables(tmp_path: Path) -> None:
    """An unexpected error's traceback names it, but never prints the frames' locals (a
    token being issued, a key file's bytes, a database URL with its password)."""
    assert chainkeys("init", "--data-dir", str(tmp_path / "d"), cwd=tmp_path).returncode == 0
    clean = {k: v for k, v in os.environ.items() if not k.startswith("CHAINKEYS_")}
    done = subprocess.run(
        [sys.executable, "-c", CRASH, str(tmp_path / "d")],
        cwd=tmp_path,
        env={**clean, "COLUMNS": "200"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode != 0
    assert "an unexpected failure" in done.stderr
    assert "ck_secret_kept_in_a_local_variable" not in done.stderr + done.stdout
