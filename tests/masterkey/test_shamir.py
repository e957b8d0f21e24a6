"""The shamir provider through the real commands and servers: `init --shares` prints
the shares, `serve` starts sealed (503 `sealed` to all but the unseal), shares over
HTTP or `operator unseal` (no echo) open it, `POST /sys/seal` and a restart seal it
again, `operator rekey` makes new shares for the same master key, replicas unseal
on their own; a forged share is refused before it is counted, a store of the first
share format still unseals and a rekey moves it to the second; on SQLite and
PostgreSQL."""

from __future__ import annotations

import asyncio
import base64
import gc
import hashlib
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
import hypothesis
import pytest
from Crypto.Protocol.SecretSharing import Shamir
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from hypothesis import assume, given
from hypothesis import strategies as st
from tests.api.test_sign_cosmos import PRIVATE, TRANSFER
from tests.conftest import (
    BACKENDS,
    TLS,
    chainkeys_cli,
    drop_pg_database,
    free_port,
    make_pg_database,
)
from tests.process.test_process import Proc, start

from chainkeys.api.router import AppState
from chainkeys.api.sealing import SealGate
from chainkeys.bootstrap import open_store
from chainkeys.config import Settings
from chainkeys.unsealing import init_shamir, open_sealed
from chainkeys.vault.providers import MasterKey
from chainkeys.vault.repository import MetaBlobs
from chainkeys.vault.shamir import SHAMIR_WRAPPED, UNSEALER, unwrap
from chainkeys.vault.shares import InvalidShare, Share, combine, parse_share

pytestmark = [pytest.mark.slow, pytest.mark.long(120)]

OPERATOR = "op-" + secrets.token_hex(16)
SHARE_LINE = re.compile(r"share (\d+): (\S+)")
A_SHARE = re.compile(r"cks[0-9]-")


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
    lines = [ln for ln in done.stdout.splitlines() if A_SHARE.search(ln)]
    found = [SHARE_LINE.fullmatch(ln) for ln in lines]
    assert all(found) and len(found) == shares, done.stdout
    assert [int(m[1]) for m in found if m] == list(range(1, shares + 1))
    texts = [m[2] for m in found if m]
    assert len(set(texts)) == shares
    for text in texts:  # each is a share (its check passes), printed once, nowhere else
        assert text.startswith("cks2-") and parse_share(text).version == 2
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
    for r in (
        c.get("/readyz"),
        c.get("/cosmos", headers={"Authorization": token}),
        c.get("/no/such/path"),
        c.get("/metrics"),
        c.get("/openapi.json"),
    ):
        assert r.status_code == 503, r.text
        assert r.json() == {"success": False, "message": r.json()["message"], "code": "sealed"}
    assert c.get("/livez").status_code == 200
    assert c.get("/healthz").json() == {"success": True, "message": "alive"}


def sign(c: httpx.Client, token: str) -> str:
    """The cosmos account (imported once) signs the vector transfer: its signature."""
    headers = {"Authorization": token}
    made = c.post("/cosmos", json={"private_key": PRIVATE}, headers=headers)
    assert made.status_code in (200, 409), made.text
    signed = c.post(
        f"/cosmos/{TRANSFER['fromAddress']}/sign-transfer", json=TRANSFER, headers=headers
    )
    assert signed.status_code == 200, signed.text
    return str(signed.json()["data"])


def forged(real: str, value: bytes | None = None) -> str:
    """A share of the right set, index and format, its value wrong and its (unkeyed)
    check digits recomputed: what anyone who saw a set id could send."""
    share = parse_share(real)
    wrong = value if value is not None else secrets.token_bytes(32)
    return Share(share.set_id, share.index, wrong, share.version).text()


def assert_refused_unsaid(r: httpx.Response, share: str) -> None:
    """400 `invalid_share`, the answer naming neither the share, its set nor any count."""
    assert (r.status_code, r.json()["code"]) == (400, "invalid_share"), r.text
    message = r.json()["message"]
    assert share not in r.text and parse_share(share).set_id not in r.text
    assert not any(ch.isdigit() for ch in message), message


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
                    True,
                    n,
                    3,
                )
            assert_sealed(c, token)
            # a share given twice, a mistyped one: refused, nothing counted
            r = unseal(c, shares[0])
            assert (r.status_code, r.json()["code"]) == (400, "invalid_share")
            typo = shares[2][:20] + ("0" if shares[2][20] != "0" else "1") + shares[2][21:]
            r = unseal(c, typo)
            assert (r.status_code, r.json()["code"]) == (400, "invalid_share"), r.text
            assert typo not in r.text
            assert c.get("/sys/seal-status").json()["progress"] == 2
            # forged shares (an index not given yet, one given, the one that would be the
            # threshold-th): refused before they are counted, the progress untouched
            for real in (shares[3], shares[0], shares[2]):
                bad = forged(real)
                assert_refused_unsaid(unseal(c, bad), bad)
                assert c.get("/sys/seal-status").json()["progress"] == 2
            assert_sealed(c, token)
            # the threshold-th genuine share: ready, signs
            r = unseal(c, shares[2])
            assert r.json() == {
                "success": True,
                "message": "unsealed",
                "sealed": False,
                "progress": 0,
                "threshold": 3,
            }
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
    assert outcomes[:2] == ["progress", "progress"] and outcomes.count("refused") == 5, outcomes
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


def cli_with_input(
    args: list[str], given: str, env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    """A command with `given` as its standard input (a pipe, never the test's terminal)."""
    return subprocess.run(
        [sys.executable, "-m", "chainkeys.cli", *args],
        input=given,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


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
    proc = subprocess.Popen(
        [sys.executable, "-m", "chainkeys.cli", "operator", "unseal", "--url", url],
        stdin=child,
        stdout=child,
        stderr=child,
        env={**os.environ, **env},
        start_new_session=True,
    )
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
            piped = cli_with_input(
                ["operator", "unseal", "--url", proc.base_url], shares[1] + "\n", store.env
            )
            assert piped.returncode == 0 and "sealed: 2 of 3" in piped.stdout, piped.stderr
            assert shares[1] not in piped.stdout + piped.stderr
            empty = cli_with_input(["operator", "unseal", "--url", proc.base_url], "", store.env)
            assert empty.returncode == 1 and "no share was given" in empty.stderr
            # a typo is caught by the operator's own command: nothing is sent
            typo = shares[2][:30] + ("0" if shares[2][30] != "0" else "1") + shares[2][31:]
            mistyped = cli_with_input(
                ["operator", "unseal", "--url", proc.base_url], typo + "\n", store.env
            )
            assert mistyped.returncode == 1 and "check digits" in mistyped.stderr
            assert typo not in mistyped.stdout + mistyped.stderr
            assert c.get("/sys/seal-status").json()["progress"] == 2
            shown = operator_unseal_on_a_terminal(proc.base_url, shares[2], store.env)
            assert "unsealed" in shown
            signature = sign(c, token)

            # a command that needs the master key asks for a quorum of shares
            made = cli_with_input(
                ["token", "create", "--tenant", "ops2"], "\n".join(shares[2:]) + "\n", store.env
            )
            assert made.returncode == 0, made.stderr
            second = made.stdout.strip().splitlines()[-1]
            assert c.get("/tokens/self", headers={"Authorization": second}).status_code == 200

            # a forged share among a rekey's quorum ends it, nothing made or written
            bad = forged(shares[1])
            refused = cli_with_input(
                ["operator", "rekey", "--shares", "3", "--threshold", "2"],
                f"{shares[0]}\n{bad}\n{shares[2]}\n",
                store.env,
            )
            assert refused.returncode == 1 and "not one of this store" in refused.stderr
            assert not A_SHARE.search(refused.stdout + refused.stderr)
            # rekey from a quorum of the old shares (the server keeps running)
            rekey = cli_with_input(
                ["operator", "rekey", "--shares", "3", "--threshold", "2"],
                "\n".join(shares[:3]) + "\n",
                store.env,
            )
            assert rekey.returncode == 0, rekey.stderr
            new = [m[2] for m in map(SHARE_LINE.fullmatch, rekey.stdout.splitlines()) if m]
            assert len(new) == 3 and not set(new) & set(shares)
            assert all(text.startswith("cks2-") for text in new)
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
    env = {
        "CHAINKEYS_DATA_DIR": str(tmp_path / "data"),
        "CHAINKEYS_DATABASE_URL": url,
        "CHAINKEYS_MASTER_KEY_PROVIDER": "shamir",
    }
    try:
        shares, _ = init(env, 3, 2)
        token = first_token_of(env)
        one = start({**env, "CHAINKEYS_DATA_DIR": str(tmp_path / "one")}, tmp_path / "one.log")
        two = start({**env, "CHAINKEYS_DATA_DIR": str(tmp_path / "two")}, tmp_path / "two.log")
        try:
            with (
                httpx.Client(verify=TLS, base_url=one.base_url, timeout=30) as a,
                httpx.Client(verify=TLS, base_url=two.base_url, timeout=30) as b,
            ):
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
    assert not A_SHARE.search(again.stdout)
    file_key = chainkeys_cli("token", "list", env={**env, "CHAINKEYS_MASTER_KEY_PROVIDER": "file"})
    assert file_key.returncode == 0  # listing needs no key
    as_file = {**env, "CHAINKEYS_MASTER_KEY_PROVIDER": "file"}
    for args, settings, says in (
        (["--shares", "3", "--threshold", "2"], env, "`chainkeys operator rekey`"),
        (["--shares", "3"], as_file, "give --shares N --threshold K"),
    ):  # no new shares are printed for a move refused before it starts
        moved = chainkeys_cli("key", "move", "--to", "shamir", *args, env=settings)
        assert moved.returncode == 1 and says in moved.stderr, moved.stderr
        assert not A_SHARE.search(moved.stdout)
    moved = chainkeys_cli(
        "key", "move", "--to", "shamir", "--shares", "3", "--threshold", "2", env=as_file
    )
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


def settings_of(store: Store) -> Settings:
    url = store.env.get("CHAINKEYS_DATABASE_URL")
    return Settings(
        data_dir=Path(store.env["CHAINKEYS_DATA_DIR"]),
        master_key_provider="shamir",
        database_url=url,
    )


def format_1(master: MasterKey, shares: int, threshold: int) -> tuple[bytes, list[str]]:
    """A share set and its wrapped master key as the release before share format 2
    wrote them: that release's code, inlined (the format is frozen, whatever the
    vault's code becomes)."""
    unseal_key, set_id = secrets.token_bytes(32), secrets.token_hex(4)
    low = Shamir.split(threshold, shares, unseal_key[:16], ssss=False)
    high = Shamir.split(threshold, shares, unseal_key[16:], ssss=False)
    texts = []
    for (i, a), (_, b) in zip(low, high, strict=True):
        value = bytes(a) + bytes(b)
        check = hashlib.sha256(b"chainkeys share v1\x00" + set_id.encode() + bytes([i]) + value)
        texts.append(f"cks1-{set_id}-{i}-{value.hex()}-{check.hexdigest()[:8]}")
    nonce = secrets.token_bytes(12)
    facts = f"{set_id}\x00{shares}\x00{threshold}\x00{master.id}".encode()
    sealed = AESGCM(unseal_key).encrypt(
        nonce, master.material, b"chainkeys shamir master key v1\x00" + facts
    )
    where = f"the unseal key of Shamir share set {set_id} ({threshold} of {shares} shares)"
    blob = {
        "provider": "shamir",
        "where": where,
        "v": 1,
        "set_id": set_id,
        "shares": shares,
        "threshold": threshold,
        "master_key_id": master.id,
        "nonce": base64.b64encode(nonce).decode(),
        "wrapped": base64.b64encode(sealed).decode(),
    }
    return json.dumps(blob).encode(), texts


def to_format_1(store: Store) -> list[str]:
    """The store's master key re-wrapped as the previous release would have it (its
    shares' set in format 1, written where the wrapped key is kept): the new shares."""

    async def main() -> list[str]:
        db, _ = await open_store(settings_of(store), unseal=False)
        try:
            blobs = MetaBlobs(db)
            blob = await blobs.get(SHAMIR_WRAPPED)
            assert blob is not None
            master = unwrap(blob, combine(parse_share(t) for t in store.shares[:3]))
            old, texts = format_1(master, 4, 2)
            await blobs.put(SHAMIR_WRAPPED, old)
            return texts
        finally:
            await db.close()

    return asyncio.run(main())


def test_an_old_format_store_unseals_and_rekey_moves_it_to_commitments(store: Store) -> None:
    """A store whose shares are format 1 (no commitments) still unseals with them, a
    forged share there is caught only once combined (as before); `operator rekey` from
    them prints format 2 shares, after which a forged one is refused at once."""
    old = to_format_1(store)
    assert all(text.startswith("cks1-") for text in old)
    proc = store.serve("old")
    try:
        with httpx.Client(verify=TLS, base_url=proc.base_url, timeout=30) as c:
            assert unseal(c, old[0]).json()["progress"] == 1
            # a format 2 share of the old set is no share of it: refused, not counted
            other = Share(parse_share(old[0]).set_id, 2, secrets.token_bytes(32), 2).text()
            assert_refused_unsaid(unseal(c, other), other)
            # format 1 cannot tell a forged share until it is combined: reset, said so
            r = unseal(c, forged(old[1]))
            assert (r.status_code, r.json()["code"]) == (400, "wrong_shares"), r.text
            assert c.get("/sys/seal-status").json()["progress"] == 0
            assert unseal(c, old[3]).json()["progress"] == 1
            assert unseal(c, old[1]).json()["sealed"] is False
            signature = sign(c, store.token)
    finally:
        proc.stop()
    rekey = cli_with_input(
        ["operator", "rekey", "--shares", "3", "--threshold", "2"],
        "\n".join(old[2:]) + "\n",
        store.env,
    )
    assert rekey.returncode == 0, rekey.stderr
    new = [m[2] for m in map(SHARE_LINE.fullmatch, rekey.stdout.splitlines()) if m]
    assert len(new) == 3 and all(text.startswith("cks2-") for text in new), rekey.stdout
    proc = store.serve("new")
    try:
        with httpx.Client(verify=TLS, base_url=proc.base_url, timeout=30) as c:
            r = unseal(c, old[0])
            assert (r.status_code, r.json()["code"]) == (400, "invalid_share"), r.text
            assert unseal(c, new[1]).json()["progress"] == 1
            bad = forged(new[0])
            assert_refused_unsaid(unseal(c, bad), bad)
            assert c.get("/sys/seal-status").json()["progress"] == 1
            assert unseal(c, new[0]).json()["sealed"] is False
            assert sign(c, store.token) == signature  # the same master key
    finally:
        log = proc.stop()
    assert not any(text in log for text in [*old, *new])


def test_no_forged_share_is_ever_counted(store: Store) -> None:
    """Whatever value, index and format a forger picks for the store's set (the check
    digits always recomputed), the gate the route calls refuses it as `invalid_share`,
    audits it and counts nothing; the genuine shares then open the store."""
    real = parse_share(store.shares[0])

    @st.composite
    def forgeries(draw: st.DrawFn) -> str:
        index = draw(st.integers(1, 255))
        value = draw(st.binary(min_size=32, max_size=32))
        version = draw(st.sampled_from([1, 2]))
        return Share(real.set_id, index, value, version).text()

    async def open_gate() -> SealGate:
        return SealGate(AppState(), await open_sealed(settings_of(store)))

    tried: list[str] = []
    with asyncio.Runner() as runner:
        gate = runner.run(open_gate())
        try:
            assert runner.run(gate.unseal(store.shares[4])).progress == 1

            @hypothesis.settings(max_examples=40, deadline=None, derandomize=True)
            @given(forgeries())
            def refused(text: str) -> None:
                assume(text not in store.shares)
                tried.append(text)
                with pytest.raises(InvalidShare) as refusal:
                    runner.run(gate.unseal(text))
                assert real.set_id not in refusal.value.message
                assert gate.status().progress == 1 and gate.sealed

            refused()
            assert runner.run(gate.unseal(store.shares[2])).progress == 2
            assert runner.run(gate.unseal(store.shares[1])).sealed is False
        finally:
            runner.run(gate.close())
    audit = chainkeys_cli("audit", "--action", "sys.seal", "--json", env=store.env)
    outcomes = [json.loads(line)["outcome"] for line in audit.stdout.splitlines()]
    assert outcomes.count("refused") == len(tried) > 0 and outcomes.count("unsealed") == 1
    assert not any(text in audit.stdout for text in tried)
