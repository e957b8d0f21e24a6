"""The shamir provider through the real commands and servers: `init --shares` prints
the shares, `serve` starts sealed (503 `sealed` to all but the unseal), shares over
HTTP or `operator unseal` (no echo) open it, `POST /sys/seal` and a restart seal it
again, `operator rekey` makes new shares for the same master key, replicas unseal
on their own; on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import gc
import json
import os
import pty
import re
import secrets
import select
import subprocess
import sys
import time
import weakref
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from chainkeys.api.router import AppState
from chainkeys.api.sealing import SealGate
from chainkeys.config import Settings
from chainkeys.unsealing import init_shamir, open_sealed
from chainkeys.vault.shamir import UNSEALER
from chainkeys.vault.shares import Share, parse_share
from tests.api.test_sign_cosmos import PRIVATE, TRANSFER
from tests.conftest import (
    BACKENDS,
    TLS,
    chainkeys_cli,
    drop_pg_database,
    free_port,
    make_pg_database,
)
from tests.test_process import Proc, start

pytestmark = [pytest.mark.slow, pytest.mark.long(60)]

OPERATOR = "op-" + secrets.token_hex(16)
SHARE_LINE = re.compile(r"share (\d+): (\S+)")


@dataclass
class Store:
    env: dict[str, str]
    shares: list[str]
    token: str
    tmp: Path

    def serve(self, name: str) -> Proc:
        return start(self.env, self.tmp / f"{name}.log")


def init(env: dict[str, str], shares: int, threshold: int) -> tuple[list[str], str]:
    """`chainkeys init --shares --threshold`: the share lines exactly, and the stdout."""
    done = chainkeys_cli("init", "--shares", str(shares), "--threshold", str(threshold), env=env)
    assert done.returncode == 0, done.stderr
    lines = [ln for ln in done.stdout.splitlines() if "cks1-" in ln]
    found = [SHARE_LINE.fullmatch(ln) for ln in lines]
    assert all(found) and len(found) == shares, done.stdout
    assert [int(m[1]) for m in found if m] == list(range(1, shares + 1))
    texts = [m[2] for m in found if m]
    assert len(set(texts)) == shares
    for text in texts:  # each is a share (its check passes), printed once, nowhere else
        parse_share(text)
        assert done.stdout.count(text) == 1 and text not in done.stderr
    return texts, done.stdout


def first_token_of(env: dict[str, str]) -> str:
    path = Path(env["CHAINKEYS_DATA_DIR"]) / "first-token"
    assert path.stat().st_mode & 0o777 == 0o600
    token = path.read_text().strip()
    path.unlink()
    return token


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    for var in ("CHAINKEYS_MASTER_KEY", "CHAINKEYS_DATABASE_URL"):
        os.environ.pop(var, None)
    env = {
        "CHAINKEYS_DATA_DIR": str(tmp_path / "data"),
        "CHAINKEYS_MASTER_KEY_PROVIDER": "shamir",
        "CHAINKEYS_OPERATOR_TOKEN": OPERATOR,
    }
    url = make_pg_database() if request.param == "postgresql" else None
    if url:
        env["CHAINKEYS_DATABASE_URL"] = url
    shares, _ = init(env, 5, 3)
    yield Store(env, shares, first_token_of(env), tmp_path)
    if url:
        drop_pg_database(url)


def unseal(c: httpx.Client, share: str) -> httpx.Response:
    return c.post("/sys/unseal", json={"share": share})


def assert_sealed(c: httpx.Client, token: str) -> None:
    """Sealed: /readyz, an API call with a valid token and an unknown path all 503
    `sealed` in the envelope; /livez and /healthz alive."""
    for r in (c.get("/readyz"), c.get("/cosmos", headers={"Authorization": token}),
              c.get("/no/such/path"), c.get("/metrics"), c.get("/openapi.json")):  # fmt: skip
        assert r.status_code == 503, r.text
        assert r.json() == {"success": False, "message": r.json()["message"], "code": "sealed"}
    assert c.get("/livez").status_code == 200
    assert c.get("/healthz").json() == {"success": True, "message": "alive"}


def sign(c: httpx.Client, token: str) -> str:
    """The cosmos account (imported once) signs the vector transfer: its signature."""
    headers = {"Authorization": token}
    made = c.post("/cosmos", json={"private_key": PRIVATE}, headers=headers)
    assert made.status_code in (200, 409), made.text
    signed = c.post(f"/cosmos/{TRANSFER['fromAddress']}/sign-transfer", json=TRANSFER,
                    headers=headers)  # fmt: skip
    assert signed.status_code == 200, signed.text
    return str(signed.json()["data"])


def forged(real: str) -> str:
    """A share of the right set and index, its check right, its value wrong."""
    share = parse_share(real)
    return Share(share.set_id, share.index, secrets.token_bytes(32)).text()


def test_sealed_until_the_threshold_then_seal_and_restart(store: Store) -> None:
    proc = store.serve("a")
    shares, token = store.shares, store.token
    try:
        with httpx.Client(verify=TLS, base_url=proc.base_url, timeout=30) as c:
            assert_sealed(c, token)
            assert c.get("/sys/seal-status").json()["progress"] == 0
            # threshold - 1 shares: still sealed, with progress
            for n, share in enumerate(shares[:2], start=1):
                r = unseal(c, share)
                assert r.status_code == 200, r.text
                assert (r.json()["sealed"], r.json()["progress"], r.json()["threshold"]) == (
                    True, n, 3)  # fmt: skip
            assert_sealed(c, token)
            # a share given twice, a mistyped one: refused, nothing counted
            r = unseal(c, shares[0])
            assert (r.status_code, r.json()["code"]) == (400, "invalid_share")
            typo = shares[2][:20] + ("0" if shares[2][20] != "0" else "1") + shares[2][21:]
            r = unseal(c, typo)
            assert (r.status_code, r.json()["code"]) == (400, "invalid_share"), r.text
            assert typo not in r.text
            assert c.get("/sys/seal-status").json()["progress"] == 2
            # a well-formed wrong share completes a set that does not open: reset, said so
            bad = forged(shares[3])
            r = unseal(c, bad)
            assert (r.status_code, r.json()["code"]) == (400, "wrong_shares"), r.text
            assert "reset" in r.json()["message"] and bad not in r.text
            assert c.get("/sys/seal-status").json()["progress"] == 0
            assert_sealed(c, token)
            # the threshold-th share: ready, signs
            assert unseal(c, shares[0]).json()["progress"] == 1
            assert unseal(c, shares[4]).json()["progress"] == 2
            r = unseal(c, shares[2])
            assert r.json() == {"success": True, "message": "unsealed", "sealed": False,
                                "progress": 0, "threshold": 3}  # fmt: skip
            assert c.get("/readyz").status_code == 200
            signature = sign(c, token)
            # POST /sys/seal: only with the operator token; then sealed again
            assert c.post("/sys/seal").status_code == 401
            assert c.post("/sys/seal", headers={"Authorization": token}).status_code == 401
            r = c.post("/sys/seal", headers={"Authorization": f"Bearer {OPERATOR}"})
            assert (r.status_code, r.json()["sealed"]) == (200, True), r.text
            assert_sealed(c, token)
            for share in shares[2:]:
                last = unseal(c, share)
            assert last.json()["sealed"] is False
            assert sign(c, token) == signature
    finally:
        log = proc.stop()
    for share in shares:
        assert share not in log
    # every step of the seal is in the audit log (server-wide: no tenant), no share in it
    audit = chainkeys_cli("audit", "--action", "sys.seal", "--json", env=store.env)
    assert audit.returncode == 0, audit.stderr
    outcomes = [json.loads(line)["outcome"] for line in audit.stdout.splitlines()]
    assert outcomes[:2] == ["progress", "progress"] and "refused" in outcomes, outcomes
    assert outcomes.count("unsealed") == 2 and outcomes.count("sealed") == 1, outcomes
    assert outcomes.count("seal_refused") == 2, outcomes  # the two refused POST /sys/seal
    assert not any(share in audit.stdout for share in shares)
    # a restart is sealed again; the shares open it and the account signs the same
    proc = store.serve("b")
    try:
        with httpx.Client(verify=TLS, base_url=proc.base_url, timeout=30) as c:
            assert_sealed(c, token)
            for share in (shares[1], shares[3], shares[4]):
                unseal(c, share)
            assert c.get("/readyz").status_code == 200
            assert sign(c, token) == signature
            # /sys/unseal is rate-limited per address (20 at once, then 1 every 6 s)
            answers = [unseal(c, "nonsense").status_code for _ in range(25)]
            assert set(answers) <= {200, 429} and 429 in answers, answers  # (unsealed: status)
            limited = unseal(c, "nonsense")
            assert limited.status_code == 429 and int(limited.headers["Retry-After"]) >= 1
            assert limited.json()["code"] == "rate_limited"
    finally:
        proc.stop()


def cli_with_input(args: list[str], given: str, env: dict[str, str]
                   ) -> subprocess.CompletedProcess[str]:  # fmt: skip
    """A command with `given` as its standard input (a pipe, never the test's terminal)."""
    return subprocess.run([sys.executable, "-m", "chainkeys.cli", *args], input=given,
                          env={**os.environ, **env}, capture_output=True, text=True, timeout=60,
                          check=False)  # fmt: skip


def read_until(fd: int, want: bytes, seen: bytearray) -> None:
    deadline = time.monotonic() + 30
    while want not in seen:
        assert time.monotonic() < deadline, seen
        ready, _, _ = select.select([fd], [], [], 1)
        if ready:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                return
            if not chunk:
                return
            seen += chunk


def operator_unseal_on_a_terminal(url: str, share: str, env: dict[str, str]) -> str:
    """`chainkeys operator unseal` on a terminal of its own (a pty, no controlling
    terminal of the test's): everything the terminal showed."""
    main, child = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "chainkeys.cli", "operator", "unseal", "--url",
                             url], stdin=child, stdout=child, stderr=child,
                            env={**os.environ, **env}, start_new_session=True)  # fmt: skip
    os.close(child)
    seen = bytearray()
    try:
        read_until(main, b"share: ", seen)
        os.write(main, share.encode() + b"\n")
        read_until(main, b"given", seen)
        read_until(main, b"\n", seen)
        assert proc.wait(30) == 0, seen
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(main)
    return seen.decode(errors="replace")


def test_operator_unseal_rekey_and_keyed_commands(store: Store) -> None:
    proc = store.serve("a")
    shares, token = store.shares, store.token
    try:
        with httpx.Client(verify=TLS, base_url=proc.base_url, timeout=30) as c:
            shown = operator_unseal_on_a_terminal(proc.base_url, shares[0], store.env)
            assert "sealed: 1 of 3 shares given" in shown
            assert shares[0] not in shown and shares[0][:16] not in shown  # never echoed
            piped = cli_with_input(["operator", "unseal", "--url", proc.base_url],
                                   shares[1] + "\n", store.env)  # fmt: skip
            assert piped.returncode == 0 and "sealed: 2 of 3" in piped.stdout, piped.stderr
            assert shares[1] not in piped.stdout + piped.stderr
            empty = cli_with_input(["operator", "unseal", "--url", proc.base_url], "", store.env)
            assert empty.returncode == 1 and "no share was given" in empty.stderr
            shown = operator_unseal_on_a_terminal(proc.base_url, shares[2], store.env)
            assert "unsealed" in shown
            signature = sign(c, token)

            # a command that needs the master key asks for a quorum of shares
            made = cli_with_input(["token", "create", "--tenant", "ops2"],
                                  "\n".join(shares[2:]) + "\n", store.env)  # fmt: skip
            assert made.returncode == 0, made.stderr
            second = made.stdout.strip().splitlines()[-1]
            assert c.get("/tokens/self", headers={"Authorization": second}).status_code == 200

            # rekey from a quorum of the old shares (the server keeps running)
            rekey = cli_with_input(["operator", "rekey", "--shares", "3", "--threshold", "2"],
                                   "\n".join(shares[:3]) + "\n", store.env)  # fmt: skip
            assert rekey.returncode == 0, rekey.stderr
            new = [m[2] for m in map(SHARE_LINE.fullmatch, rekey.stdout.splitlines()) if m]
            assert len(new) == 3 and not set(new) & set(shares)
            assert sign(c, token) == signature  # running servers go on
    finally:
        proc.stop()
    proc = store.serve("b")
    try:
        with httpx.Client(verify=TLS, base_url=proc.base_url, timeout=30) as c:
            for share in shares[:3]:  # the old shares open nothing
                r = unseal(c, share)
                assert (r.status_code, r.json()["code"]) == (400, "invalid_share"), r.text
            assert unseal(c, new[2]).json()["progress"] == 1
            assert unseal(c, new[0]).json()["sealed"] is False
            assert sign(c, token) == signature  # the same master key
    finally:
        proc.stop()


def test_replicas_unseal_on_their_own(tmp_path: Path) -> None:
    """Two servers on one PostgreSQL database: each sealed until given its own shares."""
    for var in ("CHAINKEYS_MASTER_KEY", "CHAINKEYS_DATABASE_URL"):
        os.environ.pop(var, None)
    url = make_pg_database()
    env = {"CHAINKEYS_DATA_DIR": str(tmp_path / "data"), "CHAINKEYS_DATABASE_URL": url,
           "CHAINKEYS_MASTER_KEY_PROVIDER": "shamir"}  # fmt: skip
    try:
        shares, _ = init(env, 3, 2)
        token = first_token_of(env)
        one = start({**env, "CHAINKEYS_DATA_DIR": str(tmp_path / "one")}, tmp_path / "one.log")
        two = start({**env, "CHAINKEYS_DATA_DIR": str(tmp_path / "two")}, tmp_path / "two.log")
        try:
            with httpx.Client(verify=TLS, base_url=one.base_url, timeout=30) as a, \
                    httpx.Client(verify=TLS, base_url=two.base_url, timeout=30) as b:  # fmt: skip
                for share in shares[:2]:
                    unseal(a, share)
                assert a.get("/readyz").status_code == 200
                signature = sign(a, token)
                assert_sealed(b, token)  # a sealed replica is not ready
                assert b.get("/sys/seal-status").json()["progress"] == 0
                for share in shares[1:]:
                    unseal(b, share)
                assert b.get("/readyz").status_code == 200
                assert sign(b, token) == signature
        finally:
            one.stop()
            two.stop()
    finally:
        drop_pg_database(url)


def test_refusals_at_start_and_init(tmp_path: Path) -> None:
    """A shamir serve on a place without its store, an init without N and K, a second
    init: one line each, nothing made where nothing was asked for."""
    for var in ("CHAINKEYS_MASTER_KEY", "CHAINKEYS_DATABASE_URL"):
        os.environ.pop(var, None)
    env = {"CHAINKEYS_DATA_DIR": str(tmp_path / "data"), "CHAINKEYS_MASTER_KEY_PROVIDER": "shamir"}
    done = chainkeys_cli("serve", "--port", str(free_port()), env=env)
    assert done.returncode == 2 and "no chainkeys store" in done.stderr, done.stderr
    done = chainkeys_cli("init", env=env)
    assert done.returncode == 1 and "--shares N --threshold K" in done.stderr
    done = chainkeys_cli("init", "--shares", "2", "--threshold", "3", env=env)
    assert done.returncode == 1 and "--threshold 3" in done.stderr
    init(env, 2, 2)
    again = chainkeys_cli("init", "--shares", "2", "--threshold", "2", env=env)
    assert again.returncode == 1 and "has its shares already" in again.stderr
    assert "cks1-" not in again.stdout
    file_key = chainkeys_cli("token", "list", env={**env, "CHAINKEYS_MASTER_KEY_PROVIDER": "file"})
    assert file_key.returncode == 0  # listing needs no key
    as_file = {**env, "CHAINKEYS_MASTER_KEY_PROVIDER": "file"}
    for args, settings, says in (
        (["--shares", "3", "--threshold", "2"], env, "`chainkeys operator rekey`"),
        (["--shares", "3"], as_file, "give --shares N --threshold K"),
    ):  # no new shares are printed for a move refused before it starts
        moved = chainkeys_cli("key", "move", "--to", "shamir", *args, env=settings)
        assert moved.returncode == 1 and says in moved.stderr, moved.stderr
        assert "cks1-" not in moved.stdout
    moved = chainkeys_cli("key", "move", "--to", "shamir", "--shares", "3", "--threshold", "2",
                          env=as_file)  # fmt: skip
    assert moved.returncode == 1 and "PROVIDER=shamir" in moved.stderr, moved.stderr
    assert "the shares printed above open nothing" in moved.stderr
    moved = chainkeys_cli("key", "move", "--to", "file", "--shares", "3", env=as_file)
    assert moved.returncode == 1 and "--shares and --threshold are for --to shamir" in moved.stderr


def test_a_seal_lets_the_keys_go(tmp_path: Path) -> None:
    """After `POST /sys/seal`'s step the barrier's vault (every master key and its AES
    contexts) is unreachable: the cycle collector frees it (what the start froze is
    thawed first), and the unseal key given over HTTP is held nowhere either."""
    settings = Settings(data_dir=tmp_path / "data", master_key_provider="shamir")

    async def main() -> None:
        svc, texts = await init_shamir(settings, 3, 2)
        await svc.close()
        state = AppState()
        gate = SealGate(state, await open_sealed(settings))
        try:
            assert (await gate.unseal(texts[2])).progress == 1
            assert (await gate.unseal(texts[0])).sealed is False
            vault = weakref.ref(state.services.barrier.vault)
            assert vault() is not None and UNSEALER.get() is None
            await gate.seal()
            gc.collect()
            assert vault() is None and state.services is None and gate.sealed
            assert (await gate.unseal(texts[1])).progress == 1  # and it unseals again
            assert (await gate.unseal(texts[2])).sealed is False
        finally:
            await gate.close()

    asyncio.run(main())
