"""Approvals across processes: `serve --workers 2` on both backends, where racing
votes and racing retries meet in the database; and the webhook against a real local
receiver that fails, goes away, and comes back after the service restarted."""

from __future__ import annotations

import concurrent.futures
import hashlib
import hmac
import json
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import text
from tests.api.test_sign_cosmos import ADDRESS, PRIVATE, TRANSFER
from tests.conftest import TLS, chainkeys_cli, free_port, wait_for
from tests.process.test_process import Proc, env, start  # noqa: F401 - env is a fixture
from tests.store.test_migrations import on_connection

pytestmark = [pytest.mark.slow, pytest.mark.long(90)]
SEND = f"/cosmos/{ADDRESS}/sign-transfer"
SECRET = "whsec-test-0123456789"
AMOUNT = 5000
COUNT = 12


def policy(tmp_path: Path, environ: dict[str, str], tenant: str, cap: int) -> None:
    rule = {
        "family": "cosmos",
        "network": "cosmoshub",
        "max_per_day": {"uatom": str(cap)},
        "approval": {"quorum": 2, "group": "treasury"},
        "above": {"uatom": "1000"},
    }
    path = tmp_path / "policy.json"
    path.write_text(json.dumps({"rules": [rule]}))
    done = chainkeys_cli("policy", "set", tenant, str(path), env=environ)
    assert done.returncode == 0, done.stderr


def token(environ: dict[str, str], tenant: str, label: str, scope: str, group: str = "") -> str:
    args = ["token", "create", "--tenant", tenant, "--label", label, "--scope", scope]
    made = chainkeys_cli(*args, *(["--group", group] if group else []), env=environ)
    assert made.returncode == 0, made.stderr
    return made.stdout.strip().splitlines()[-1]


def send(sequence: int) -> dict[str, Any]:
    return {**TRANSFER, "amount": str(AMOUNT), "sequence": sequence, "feeAmount": "0"}


def setup(environ: dict[str, str], tmp_path: Path, proc: Proc, cap: int) -> dict[str, httpx.Client]:
    """A tenant with the key, the policy, a requester and three approvers."""
    clients = {
        "requester": token(environ, "acme", "bot", "read,create,sign"),
        **{
            who: token(environ, "acme", who, "approve", "treasury")
            for who in ("alice", "bob", "carol")
        },
    }
    policy(tmp_path, environ, "acme", cap)
    out = {
        k: httpx.Client(
            verify=TLS, base_url=proc.base_url, headers={"Authorization": v}, timeout=60
        )
        for k, v in clients.items()
    }
    assert out["requester"].post("/cosmos", json={"private_key": PRIVATE}).status_code == 200
    return out


def vote(c: httpx.Client, approval: dict[str, Any], how: str = "approve") -> httpx.Response:
    body = {"digest": approval["digest"]} if how == "approve" else {"reason": "no"}
    return c.post(f"/approvals/{approval['id']}/{how}", json=body)


def test_racing_votes_and_retries_over_two_workers_sign_once(
    env: dict[str, str],  # noqa: F811
    tmp_path: Path,
) -> None:
    proc = start(env, tmp_path / "s.log", "--workers", "2")
    cap = COUNT * AMOUNT  # every approved spend fits once; counting one twice would not
    c = setup(env, tmp_path, proc, cap)
    try:
        # ten copies of one request at once, over two processes: one approval request
        with concurrent.futures.ThreadPoolExecutor(10) as pool:
            copies = list(pool.map(lambda _: c["requester"].post(SEND, json=send(1)), range(10)))
        assert {r.status_code for r in copies} == {202}, [r.text for r in copies]
        assert len({r.json()["data"]["id"] for r in copies}) == 1
        waiting = [copies[0].json()["data"]]
        waiting += [
            c["requester"].post(SEND, json=send(i)).json()["data"] for i in range(2, COUNT + 1)
        ]
        for approval in waiting:
            assert vote(c["alice"], approval).json()["data"]["state"] == "pending"

        # bob and carol race for the last vote of each request
        def last(pair: tuple[str, dict[str, Any]]) -> httpx.Response:
            return vote(c[pair[0]], pair[1])

        races = [(who, a) for a in waiting for who in ("bob", "carol")]
        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            answers = list(pool.map(last, races))
        assert all(r.status_code in (200, 409) for r in answers), [r.text for r in answers]
        for approval in waiting:
            final = c["requester"].get(f"/approvals/{approval['id']}").json()["data"]
            assert final["state"] == "signed", final
            assert "signedTx" in final["result"]
        signs = c["requester"].get("/audit", params={"action": "sign", "limit": 100})
        events = signs.json()["data"]["events"]
        assert [e["outcome"] for e in events] == ["ok"] * COUNT  # each signed exactly once
        assert {e["details"]["approval"] for e in events} == {a["id"] for a in waiting}
        # the cap counted each spend once: it is full now
        over = c["requester"].post(SEND, json={**send(99), "amount": "1"})
        assert over.status_code == 403 and "cap" in over.json()["message"]
        assert " 500 " not in proc.stop()
    finally:
        for client in c.values():
            client.close()
        proc.stop()


def test_first_votes_and_votes_against_a_cancel_race_over_two_workers(
    env: dict[str, str],  # noqa: F811
    tmp_path: Path,
) -> None:
    """Two approvers vote at the same moment on a quorum of two (each first vote sees no
    other: both must count, and the request be signed); a vote racing a cancel or a
    rejection finds the request closed or closes it, never both. Every contender of a
    race is released at once by a barrier, over two processes."""
    proc = start(env, tmp_path / "s.log", "--workers", "2")
    c = setup(env, tmp_path, proc, 10**9)
    try:
        first = [c["requester"].post(SEND, json=send(i)).json()["data"] for i in range(1, 13)]
        gate = threading.Barrier(2 * len(first))

        def at_once(who: str, approval: dict[str, Any], how: str = "approve") -> httpx.Response:
            gate.wait()
            if how == "cancel":
                return c["requester"].post(f"/approvals/{approval['id']}/cancel")
            return vote(c[who], approval, how)

        with concurrent.futures.ThreadPoolExecutor(2 * len(first)) as pool:
            jobs = [pool.submit(at_once, who, a) for a in first for who in ("alice", "bob")]
            answers = [j.result() for j in jobs]
        assert {r.status_code for r in answers} == {200}, [r.text for r in answers]
        for approval in first:  # both first votes counted: the quorum was met, and signed
            final = c["requester"].get(f"/approvals/{approval['id']}").json()["data"]
            assert final["state"] == "signed", final
            assert sorted(v["label"] for v in final["votes"]) == ["alice", "bob"]

        closing = [c["requester"].post(SEND, json=send(i)).json()["data"] for i in range(20, 32)]
        for approval in closing:
            assert vote(c["alice"], approval).status_code == 200  # one vote to go
        gate = threading.Barrier(2 * len(closing))
        with concurrent.futures.ThreadPoolExecutor(2 * len(closing)) as pool:
            jobs = [
                pool.submit(at_once, "bob", a, how)
                for i, a in enumerate(closing)
                for how in (("approve", "cancel") if i % 2 else ("approve", "reject"))
            ]
            answers = [j.result() for j in jobs]
        assert all(r.status_code in (200, 409) for r in answers), [r.text for r in answers]
        for i, approval in enumerate(closing):
            final = c["requester"].get(f"/approvals/{approval['id']}").json()["data"]
            # bob's approval and the cancel (or carol's... bob's own reject) race: one wins
            assert final["state"] in ("signed", "cancelled" if i % 2 else "rejected"), final
            decided = [v for v in final["votes"] if v["label"] == "bob"]
            if final["state"] == "cancelled":
                assert decided == []  # no vote recorded on a request cancelled first
        events = c["requester"].get("/audit", params={"action": "sign", "limit": 100})
        outcomes = [e["outcome"] for e in events.json()["data"]["events"]]
        assert outcomes.count("ok") == len(first) + sum(
            c["requester"].get(f"/approvals/{a['id']}").json()["data"]["state"] == "signed"
            for a in closing
        )
        assert " 500 " not in proc.stop()
    finally:
        for client in c.values():
            client.close()
        proc.stop()


def test_one_person_two_labels_and_a_revoked_requester(
    env: dict[str, str],  # noqa: F811
    tmp_path: Path,
) -> None:
    """`frank` and `Frank` are one person (one vote); an approver limited to EOS sees and
    votes on no Cosmos request; a requester whose token is revoked gets no signature:
    its pending requests are cancelled."""
    proc = start(env, tmp_path / "s.log")
    c = setup(env, tmp_path, proc, 10**9)
    extra = {
        "frank": token(env, "acme", "frank", "approve", "treasury"),
        "Frank": token(env, "acme", "\uff26rank", "approve", "treasury"),  # fullwidth F
        "eos": token(env, "acme", "erin", "approve", "treasury"),
    }
    clients = {
        k: httpx.Client(verify=TLS, base_url=proc.base_url, headers={"Authorization": v})
        for k, v in extra.items()
    }
    limited = chainkeys_cli(
        "token",
        "create",
        "--tenant",
        "acme",
        "--label",
        "eve",
        "--scope",
        "approve",
        "--group",
        "treasury",
        "--family",
        "eos",
        env=env,
    )
    assert limited.returncode == 0, limited.stderr
    clients["eos"].headers["Authorization"] = limited.stdout.strip().splitlines()[-1]
    try:
        approval = c["requester"].post(SEND, json=send(1)).json()["data"]
        assert vote(clients["frank"], approval).json()["data"]["state"] == "pending"
        again = vote(clients["Frank"], approval)
        assert again.status_code == 409 and again.json()["code"] == "already_voted"
        assert vote(clients["eos"], approval).status_code == 404  # not its family: unseen
        assert clients["eos"].get("/approvals").json()["data"]["approvals"] == []

        listed = chainkeys_cli("token", "list", "--tenant", "acme", env=env).stdout
        assert "treasury" in listed  # an approver's group is shown
        waiting = c["requester"].post(SEND, json=send(2)).json()["data"]
        me = c["requester"].get("/tokens/self").json()["data"]["id"]
        assert chainkeys_cli("token", "revoke", me, env=env).returncode == 0
        # Both pending requests are cancelled by the sweeper, each in its own transaction:
        # a round that began before the revocation committed may find the older one's
        # token still live and cancel only the newer, leaving the older to its next round
        # (every 2 s). Until then a vote reaching the quorum signs nothing (the requester
        # is looked up again before signing: signing/service.py `complete`).
        deadline = time.monotonic() + 60
        while True:
            seen = [
                c["alice"].get(f"/approvals/{a['id']}").json()["data"] for a in (waiting, approval)
            ]
            if all(s["state"] != "pending" for s in seen) or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        for s in seen:
            assert s["state"] == "cancelled" and "revoked" in s["reason"], s
        # frank's request was cancelled too: a vote now finds it closed, and nothing is signed
        closed = vote(c["bob"], approval)
        assert closed.status_code == 409 and closed.json()["code"] == "approval_closed"
        final = c["alice"].get(f"/approvals/{approval['id']}").json()["data"]
        assert final["state"] == "cancelled" and "result" not in final, final
    finally:
        for client in [*c.values(), *clients.values()]:
            client.close()
        proc.stop()


class Receiver:
    """A webhook receiver on a fixed port: it verifies every signature, answers 500
    to the first `failures` deliveries, and can go away and come back."""

    def __init__(self, port: int, failures: int) -> None:
        self.port = port
        self.failures = failures
        self.attempts = 0
        self.events: dict[str, dict[str, Any]] = {}
        self.bad: list[str] = []
        self.lock = threading.Lock()
        self.httpd: ThreadingHTTPServer | None = None

    def up(self) -> None:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                header = self.headers.get("Chainkeys-Signature", "")
                code = receiver.receive(header, body)
                self.send_response(code)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def down(self) -> None:
        if self.httpd is not None:
            self.httpd.shutdown()
            self.httpd.server_close()
            self.httpd = None

    def receive(self, header: str, body: bytes) -> int:
        """What a receiver should do: check the HMAC over "<t>.<body>" and the age of t."""
        parts = dict(p.split("=", 1) for p in header.split(",") if "=" in p)
        expected = hmac.new(
            SECRET.encode(), parts.get("t", "").encode() + b"." + body, hashlib.sha256
        ).hexdigest()
        with self.lock:
            self.attempts += 1
            if not hmac.compare_digest(expected, parts.get("v1", "")):
                self.bad.append(header)
                return 400
            if abs(time.time() - int(parts["t"])) > 300:
                self.bad.append(header)
                return 400
            if self.attempts <= self.failures:
                return 500
            event = json.loads(body)
            self.events[event["id"]] = event
            return 200

    def wait_for(self, check: Callable[[list[dict[str, Any]]], bool]) -> list[dict[str, Any]]:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with self.lock:
                events = list(self.events.values())
            if check(events):
                return events
            time.sleep(0.2)
        raise AssertionError(f"webhook events never arrived: {events}")


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver(free_port(), failures=3)
    r.up()
    yield r
    r.down()


def failed_deliveries(settings: dict[str, str]) -> int:
    """Tries of events not delivered yet, read from the store (as an operator would)."""
    url = settings.get("CHAINKEYS_DATABASE_URL") or (
        f"sqlite:///{settings['CHAINKEYS_DATA_DIR']}/chainkeys.db"
    )
    query = text("SELECT COALESCE(SUM(attempts), 0) FROM webhook_outbox WHERE delivered_ms IS NULL")
    return int(on_connection(url, lambda c: c.execute(query).scalar_one()))


def kinds(events: list[dict[str, Any]], approval_id: str) -> set[str]:
    return {e["type"] for e in events if e["approval"]["id"] == approval_id}


def test_the_webhook_is_signed_retried_and_survives_a_restart(
    env: dict[str, str],  # noqa: F811
    tmp_path: Path,
    receiver: Receiver,
) -> None:
    env = {
        **env,
        "CHAINKEYS_WEBHOOK_URL": f"http://127.0.0.1:{receiver.port}/hook",
        "CHAINKEYS_WEBHOOK_SECRET": SECRET,
    }
    proc = start(env, tmp_path / "s.log")
    c = setup(env, tmp_path, proc, 10 * AMOUNT)
    try:
        first = c["requester"].post(SEND, json=send(1)).json()["data"]
        vote(c["alice"], first)
        vote(c["bob"], first)
        everything = {"approval.pending", "approval.approved", "approval.signed"}
        got = receiver.wait_for(lambda ev: kinds(ev, first["id"]) >= everything)
        assert receiver.attempts > 3  # the first three deliveries failed and were retried
        assert receiver.bad == []
        signed = next(e for e in got if e["type"] == "approval.signed")
        assert signed["approval"]["state"] == "signed" and signed["approval"]["result"]
        assert sorted(v["label"] for v in signed["approval"]["votes"]) == ["alice", "bob"]

        # the receiver goes away; events wait in the outbox through a restart
        receiver.down()
        second = c["requester"].post(SEND, json=send(2)).json()["data"]
        assert vote(c["carol"], second, "reject").json()["data"]["state"] == "rejected"
        # at least one delivery of the second request's events fails while it is down
        wait_for(lambda: failed_deliveries(env) > 0, "a delivery failing while it is down")
        proc.stop()
        for client in c.values():
            client.close()
        receiver.up()
        proc = start(env, tmp_path / "s.log")
        got = receiver.wait_for(
            lambda ev: kinds(ev, second["id"]) >= {"approval.pending", "approval.rejected"}
        )
        assert receiver.bad == []
        assert len(got) == len({e["id"] for e in got}) == 5
        assert " 500 " not in proc.stop()
    finally:
        for client in c.values():
            client.close()
        proc.stop()
