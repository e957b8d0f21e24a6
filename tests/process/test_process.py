"""The real `chainkeys serve` process: first start, restart, master key, secrets at rest."""

from __future__ import annotations

import base64
import concurrent.futures
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.conftest import (
    BACKENDS,
    TLS,
    chainkeys_cli,
    drop_pg_database,
    free_port,
    make_pg_database,
    wait_for,
)

VECTORS = json.loads(
    (Path(__file__).parent.parent / "chains" / "vectors" / "vectors.json").read_text()
)
MNEMONICS = json.loads(
    (Path(__file__).parent.parent / "chains" / "vectors" / "mnemonic_vectors.json").read_text()
)
pytestmark = [pytest.mark.slow, pytest.mark.long(245)]


@dataclass
class Proc:
    """A server process; stdout (the one-time token) and stderr (logs) kept apart."""

    popen: subprocess.Popen[str]
    base_url: str
    log_path: Path

    @property
    def stdout(self) -> str:
        return self.log_path.with_suffix(".out").read_text()

    def stop(self, sig: int = signal.SIGTERM) -> str:
        if self.popen.poll() is None:
            self.popen.send_signal(sig)
            try:
                self.popen.wait(20)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(10)
        return self.log_path.read_text()


def start(
    env: dict[str, str], log_path: Path, *args: str, wait: bool = True, port: int | None = None
) -> Proc:
    port = port or free_port()
    with log_path.with_suffix(".out").open("a") as out, log_path.open("a") as err:
        popen = subprocess.Popen(
            [sys.executable, "-m", "chainkeys.cli", "serve", "--port", str(port), *args],
            env={**os.environ, **env},
            stdout=out,
            stderr=err,
            text=True,
        )
    proc = Proc(popen, f"http://127.0.0.1:{port}", log_path)
    if wait:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if popen.poll() is not None:
                raise AssertionError(f"server exited: {log_path.read_text()}")
            try:
                if httpx.get(f"{proc.base_url}/healthz", verify=TLS, timeout=1).status_code == 200:
                    return proc
            except httpx.HTTPError:
                time.sleep(0.1)
        proc.stop()
        raise AssertionError("server did not start")
    return proc


@pytest.fixture(params=BACKENDS)
def env(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[dict[str, str]]:
    """A fresh data dir (and database); the master key comes from the key file."""
    out = {"CHAINKEYS_DATA_DIR": str(tmp_path / "data")}
    for var in ("CHAINKEYS_MASTER_KEY", "CHAINKEYS_DATABASE_URL"):
        os.environ.pop(var, None)
    pg_url = None
    if request.param == "postgresql":
        pg_url = make_pg_database()
        out["CHAINKEYS_DATABASE_URL"] = pg_url
    yield out
    if pg_url:
        drop_pg_database(pg_url)


def announced(proc: Proc) -> str:
    """The server's stdout once the first-token block is out: it is printed when the
    server first answers, just after `start` saw it answer (waits for the state)."""
    deadline = time.monotonic() + 60
    while "first start" not in proc.stdout and time.monotonic() < deadline:
        if proc.popen.poll() is not None:
            break
        time.sleep(0.05)
    return proc.stdout


def first_token(source: Proc | str) -> str:
    """The token of a first start: written to a 0600 file when stdout is no terminal
    (as here), the file named on the line that says so."""
    log = announced(source) if isinstance(source, Proc) else source
    lines = log.splitlines()
    line = next(line for line in lines if "first start" in line)
    found = re.search(r"It is in (\S+) \(mode 0600\)", line)
    assert found is not None, line
    path = Path(found.group(1))
    assert path.stat().st_mode & 0o777 == 0o600
    token = path.read_text().strip()
    path.unlink()  # as the message says: read it once, then delete the file
    return token


def test_first_start_restart_and_persistence(env: dict[str, str], tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    proc = start(env, log)
    output = announced(proc)
    token = first_token(output)
    assert token.startswith("ck_")

    key = next(k for k in VECTORS["keys"] if k["id"] == "eosio-dev-key")
    created: dict[str, str] = {}
    generated: list[str] = []
    with httpx.Client(verify=TLS, base_url=proc.base_url, headers={"Authorization": token}) as c:
        for family in ("cosmos", "dogecoin", "eos", "litecoin"):
            body = c.post(f"/{family}", json={}).json()
            inner = body["data"]["data"]
            created[family] = inner["address"]
            generated.append(inner["private_key"])
            c.post(f"/{family}", json={"private_key": key["private_key_hex"]}).raise_for_status()
        doge_wif = VECTORS["keys"][1]["dogecoin"]["mainnet"]["wif"]
        c.post("/dogecoin", json={"private_key": doge_wif}).raise_for_status()
        c.post(
            "/cosmos", json={"mnemonic": MNEMONICS["mnemonics"][0]["mnemonic"]}
        ).raise_for_status()
    proc.stop()

    proc = start(env, log)
    assert proc.stdout == output  # the token is issued only once
    with httpx.Client(
        verify=TLS, base_url=proc.base_url, headers={"Authorization": f"Bearer {token}"}
    ) as c:
        for family, name in created.items():
            assert c.get(f"/{family}/{name}").status_code == 200
        assert len(c.get("/cosmos").json()["data"]["data"]["keys"]) == 3
        # still usable: the uniqueness rules still hold and new accounts still work
        assert c.post("/eos", json={"private_key": key["private_key_hex"]}).status_code == 409
        assert c.post("/litecoin", json={}).status_code == 200
    logs = proc.stop()

    secrets = [
        *generated,
        token,
        key["private_key_hex"],
        key["eos"]["private_key_wif"],
        doge_wif,
        MNEMONICS["mnemonics"][0]["mnemonic"],
    ]
    data_dir = Path(env["CHAINKEYS_DATA_DIR"])
    stored = b"".join(
        p.read_bytes() for p in data_dir.rglob("*") if p.is_file() and p.name != "master.key"
    )
    for secret in secrets:
        assert secret not in logs
        assert secret.encode() not in stored
        if len(secret) == 64:
            assert bytes.fromhex(secret) not in stored  # not even as raw bytes
        if secret.startswith("ck_"):
            assert hashlib_sha256(secret).encode() not in logs.encode()


@pytest.mark.one_engine  # the port and the processes are the subject, not the store
@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_restart_right_after_a_stop_with_clients_connected(
    env: dict[str, str], tmp_path: Path, workers: str
) -> None:
    """What every systemd Restart=, docker restart and rolling deploy does: stop with
    keep-alive clients connected (their connections are left in TIME_WAIT on the
    server's side), then start on the same port at once; then the same after kill -9."""
    proc = start(env, tmp_path / "a.log", "--workers", workers)
    port = int(proc.base_url.rsplit(":", 1)[1])
    pids = []
    token = first_token(proc)
    clients = [
        httpx.Client(verify=TLS, base_url=proc.base_url, headers={"Authorization": token})
        for _ in range(4)
    ]
    try:
        for c in clients:
            assert c.get("/cosmos").status_code == 200  # each holds a kept-alive connection
        for n, how in enumerate((signal.SIGTERM, signal.SIGKILL, signal.SIGTERM)):
            pids.append(proc.popen.pid)
            proc.stop(how)
            proc = start(env, tmp_path / f"{n}.log", "--workers", workers, port=port)
            for c in clients:  # the old connections are gone; each client reconnects
                assert c.get("/cosmos").status_code == 200
    finally:
        for c in clients:
            c.close()
        pids.append(proc.popen.pid)
        proc.stop()
    tmp = Path(tempfile.gettempdir())
    assert not list(tmp.glob(f"chainkeys-*-{port}.lock"))
    # metrics directories (--workers 2): removed at a stop, and a killed one's at the next start
    assert [p for pid in pids for p in tmp.glob(f"chainkeys-metrics-{pid}-*")] == []


def _marked(mark: str) -> list[int]:
    """The pids of live processes whose environment holds `mark` (zombies left out)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue  # gone meanwhile, or not ours
        if mark.encode() in environ and state != "Z":
            found.append(int(entry.name))
    return found


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_no_worker_outlives_a_supervisor_killed_while_workers_start(
    env: dict[str, str], tmp_path: Path
) -> None:
    """kill -9 of `chainkeys serve` while its workers are still importing: each worker
    ends on its own (none goes on serving the port beside the next start)."""
    mark = f"CHAINKEYS_TEST_MARK=orphan-{os.getpid()}-{time.monotonic_ns()}"
    key, value = mark.split("=")
    proc = start({**env, key: value}, tmp_path / "a.log", "--workers", "2", wait=False)
    deadline = time.monotonic() + 60
    while len(_marked(mark)) < 3 and time.monotonic() < deadline:  # supervisor + workers
        assert proc.popen.poll() is None, proc.log_path.read_text()
        time.sleep(0.01)
    spawned = _marked(mark)
    proc.stop(signal.SIGKILL)
    deadline = time.monotonic() + 60
    while _marked(mark) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = _marked(mark)
    for pid in left:  # do not leave them running whatever the outcome
        os.kill(pid, signal.SIGKILL)
    assert len(spawned) >= 3
    assert left == []


def hashlib_sha256(text: str) -> str:
    import hashlib

    return hashlib.sha256(text.encode()).hexdigest()


def test_key_file_is_private_and_a_missing_or_wrong_key_stops_the_start(
    env: dict[str, str], tmp_path: Path
) -> None:
    log = tmp_path / "server.log"
    proc = start(env, log)
    token = first_token(proc)
    with httpx.Client(verify=TLS, base_url=proc.base_url, headers={"Authorization": token}) as c:
        c.post("/cosmos", json={}).raise_for_status()
    proc.stop()
    key_file = Path(env["CHAINKEYS_DATA_DIR"]) / "master.key"
    assert key_file.stat().st_mode & 0o777 == 0o600

    original = key_file.read_bytes()
    key_file.unlink()
    missing = start(env, tmp_path / "missing.log", wait=False)
    assert missing.popen.wait(60) != 0
    text = (tmp_path / "missing.log").read_text()
    assert "master key file" in text and "missing" in text
    assert not key_file.exists()  # it never silently makes a new key

    wrong = base64.b64encode(b"\x07" * 32).decode()
    proc = start({**env, "CHAINKEYS_MASTER_KEY": wrong}, tmp_path / "wrong.log", wait=False)
    assert proc.popen.wait(60) != 0
    text = (tmp_path / "wrong.log").read_text()
    assert "does not open this store" in text
    assert wrong not in text

    key_file.write_bytes(original)
    key_file.chmod(0o600)
    proc = start(env, tmp_path / "ok.log")
    with httpx.Client(verify=TLS, base_url=proc.base_url, headers={"Authorization": token}) as c:
        assert len(c.get("/cosmos").json()["data"]["data"]["keys"]) == 1
    proc.stop()


def test_token_cli_create_list_revoke(env: dict[str, str], tmp_path: Path) -> None:
    init = chainkeys_cli("init", env=env)
    assert init.returncode == 0, init.stderr
    made = chainkeys_cli("token", "create", "--tenant", "acme", "--label", "ci", env=env)
    assert made.returncode == 0, made.stderr
    token = made.stdout.strip().splitlines()[-1]
    assert token.startswith("ck_") and len(token) > 40

    listed = chainkeys_cli("token", "list", "--tenant", "acme", env=env)
    assert listed.returncode == 0
    assert "acme" in listed.stdout and "ci" in listed.stdout
    assert token not in listed.stdout and hashlib_sha256(token) not in listed.stdout

    proc = start(env, tmp_path / "server.log")
    try:
        assert "first start" not in proc.stdout  # a token already exists
        with httpx.Client(
            verify=TLS, base_url=proc.base_url, headers={"Authorization": token}
        ) as c:
            assert c.get("/eos").status_code == 200
            token_id = listed.stdout.splitlines()[1].split()[0]
            revoked = chainkeys_cli("token", "revoke", token_id, env=env)
            assert revoked.returncode == 0, revoked.stderr
            assert c.get("/eos").status_code == 401  # at once, no restart
    finally:
        proc.stop()
    again = chainkeys_cli("token", "revoke", "nope", env=env)
    assert again.returncode != 0 and "no live token" in again.stderr


def test_concurrent_creates_are_distinct_and_all_listed(server: Any) -> None:
    token = server.new_token()

    def create(i: int) -> str:
        family = ("cosmos", "dogecoin", "eos", "litecoin")[i % 4]
        with httpx.Client(
            verify=TLS, base_url=server.base_url, headers={"Authorization": token}, timeout=60
        ) as c:
            r = c.post(f"/{family}", json={})
            assert r.status_code == 200, r.text
            return f"{family}:{r.json()['data']['data']['address']}"

    with concurrent.futures.ThreadPoolExecutor(32) as pool:
        names = list(pool.map(create, range(100)))
    assert len(set(names)) == 100
    listed = set()
    with server.client(token) as c:
        for family in ("cosmos", "dogecoin", "eos", "litecoin"):
            body = c.get(f"/{family}", params={"limit": 1000}).json()
            keys = body["data"]["data"]["keys"]
            listed |= {f"{family}:{k['address'] if family == 'cosmos' else k}" for k in keys}
    assert listed == set(names)


def test_json_logs_carry_request_ids_and_no_secrets(env: dict[str, str], tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    proc = start({**env, "CHAINKEYS_LOG_JSON": "true"}, log)
    token = first_token(proc)
    bad_wif = "QNcdLVw8fHkixm6NNyN6nVwxKek4u7qrioRbQmjxac5TVoTtZuoX"  # checksum broken
    mnemonic = MNEMONICS["mnemonics"][2]["mnemonic"]
    with httpx.Client(
        verify=TLS, base_url=proc.base_url, headers={"Authorization": f"Bearer {token}"}
    ) as c:
        response = c.post("/dogecoin", json={}, headers={"X-Request-ID": "trace-42"})
        made = response.json()
        assert c.post("/dogecoin", json={"private_key": bad_wif}).status_code == 400
        assert c.post("/eos", json={"mnemonic": mnemonic}).status_code == 200
        assert (
            c.post(
                "/cosmos",
                content=b'{"private_key": "' + b"ab" * 40,
                headers={"content-type": "application/json"},
            ).status_code
            == 400
        )
    logs = proc.stop()
    entries = [json.loads(line) for line in logs.splitlines() if line.strip()]
    access = [e for e in entries if e["logger"] == "chainkeys.access"]
    mine = [e for e in access if e.get("client_request_id") == "trace-42"]
    assert len(mine) == 1
    assert mine[0]["request_id"] == response.headers["x-request-id"]  # the server's own
    assert (mine[0]["method"], mine[0]["path"], mine[0]["status"]) == ("POST", "/dogecoin", 200)
    assert mine[0]["token_id"] and mine[0]["client"].startswith("127.0.0.1:")
    assert all(e.get("request_id") for e in access)
    for secret in (token, bad_wif, mnemonic, made["data"]["private_key"], "ab" * 40, "Bearer"):
        assert secret not in logs


def test_serve_bounds_the_request_head(env: dict[str, str], tmp_path: Path) -> None:
    """`chainkeys serve` itself (not only the test app) refuses an oversized head with 431."""
    import socket

    proc = start(env, tmp_path / "server.log")
    try:
        port = int(proc.base_url.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(
                b"GET /networks HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 20_000 + b"\r\n\r\n"
            )
            reply = sock.recv(4096)
        assert reply.startswith(b"HTTP/1.1 431")
    finally:
        proc.stop()


def test_sigterm_does_not_wait_past_the_shutdown_deadline(
    env: dict[str, str], tmp_path: Path
) -> None:
    """A client holding half a body does not keep a stopping server alive past
    CHAINKEYS_SHUTDOWN_TIMEOUT (the body deadline is longer here)."""
    import socket

    proc = start(
        {**env, "CHAINKEYS_SHUTDOWN_TIMEOUT": "2", "CHAINKEYS_BODY_TIMEOUT_SECONDS": "600"},
        tmp_path / "server.log",
    )
    token = first_token(proc)
    port = int(proc.base_url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(
            b"POST /cosmos HTTP/1.1\r\nHost: x\r\nAuthorization: "
            + token.encode()
            + b"\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"
        )
        time.sleep(0.5)
        proc.popen.send_signal(signal.SIGTERM)
        # Ended by its 2 s shutdown deadline, not by the client's body deadline (600 s):
        # the bound tells the two apart however busy the machine is.
        proc.popen.wait(300)
    log = proc.log_path.read_text()
    assert "Traceback" not in log
    assert "shutdown completed" in log.splitlines()[-1]  # the last line is not lost in a buffer


@pytest.mark.one_engine  # the event loop is the subject
@pytest.mark.parametrize(("setting", "loop"), [(None, "uvloop"), ("asyncio", "asyncio")])
def test_serve_runs_on_uvloop_unless_told_otherwise(
    env: dict[str, str], tmp_path: Path, setting: str | None, loop: str
) -> None:
    """uvloop is a dependency and `serve`'s default (the loop the benchmarks measure);
    CHAINKEYS_EVENT_LOOP=asyncio runs Python's own. Each worker says which it runs on."""
    log = tmp_path / "server.log"
    proc = start({**env, **({"CHAINKEYS_EVENT_LOOP": setting} if setting else {})}, log)
    try:
        wait_for(lambda: "serving on" in log.read_text(), "a worker serving")
        assert re.findall(r"worker \d+ serving on (\w+)", log.read_text()) == [loop]
    finally:
        proc.stop()


def test_serve_starts_one_worker_per_core(env: dict[str, str], tmp_path: Path) -> None:
    """With no --workers and CHAINKEYS_WORKERS at its default (auto), `chainkeys serve`
    runs one worker per core this process may use (the suite's own servers run one)."""
    cores = len(os.sched_getaffinity(0))
    log = tmp_path / "server.log"
    proc = start({**env, "CHAINKEYS_WORKERS": "auto"}, log)
    try:
        wait_for(
            lambda: len(set(re.findall(r"Started worker-(\d+)", log.read_text()))) >= cores,
            f"{cores} workers started",
        )
        assert proc.popen.poll() is None
    finally:
        proc.stop()
    assert set(re.findall(r"Spawning worker-(\d+)", log.read_text())) == {
        str(n) for n in range(1, cores + 1)
    }
