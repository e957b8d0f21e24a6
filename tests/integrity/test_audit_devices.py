"""Audit devices (audit/devices.py) from outside: a syslog listener (UDP and TCP) and an
HTTP receiver started here get every event of a real server's mixed run, with the
table's ids and content; a receiver down for a while loses and doubles nothing; a
rotated file goes on after SIGHUP; CHAINKEYS_AUDIT_REQUIRED refuses while no device
can take an event; `audit verify --file` passes an honest copy and names a changed
one. Every test runs on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import socket
import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import update
from tests.conftest import (
    BACKENDS,
    TLS,
    Server,
    backend_settings,
    chainkeys_cli,
    drop_pg_database,
    free_port,
    own_server,
    wait_for,
)
from tests.process.test_process import first_token, start

from chainkeys.audit.copies import verify_file
from chainkeys.audit.devices import event_of
from chainkeys.audit.repository import Audit, AuditEvent, Stored
from chainkeys.clock import now_ms
from chainkeys.store.tables import audit

pytestmark = pytest.mark.long(85)  # seconds, measured: scheduled first
RFC5424 = re.compile(
    rb"^<(\d{1,3})>1 (\S+) (\S+) chainkeys (\d+) (\S+) - \xef\xbb\xbf(\{.*\})$", re.DOTALL
)


class Syslog:
    """A syslog collector on 127.0.0.1: UDP datagrams, or TCP frames by octet counting
    (RFC 6587), each checked as RFC 5424 with the event JSON as its MSG."""

    def __init__(self, tcp: bool) -> None:
        self.tcp = tcp
        self.events: list[dict[str, Any]] = []
        self.checkpoints: list[dict[str, Any]] = []  # (audit/checkpoints.py)
        self.headers: list[tuple[int, str]] = []  # (PRI, MSGID)
        self.raw: list[bytes] = []  # each message as received
        self.connections = 0
        self._open: list[socket.socket] = []
        self._lock = threading.Lock()
        self.port = 0
        self.start()
        self.url = f"{'tcp' if tcp else 'udp'}://127.0.0.1:{self.port}"

    def start(self) -> None:
        """Listen (again, on the same port)."""
        self.sock = socket.socket(
            socket.AF_INET, socket.SOCK_STREAM if self.tcp else socket.SOCK_DGRAM
        )
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", self.port))
        self.port = self.sock.getsockname()[1]
        if self.tcp:
            self.sock.listen()
        threading.Thread(target=self._serve, daemon=True).start()

    def _take(self, message: bytes) -> None:
        found = RFC5424.match(message)
        assert found is not None, message[:200]
        event = json.loads(found.group(6))
        with self._lock:
            self.raw.append(message)
            if "id" not in event:
                self.checkpoints.append(event)
                return
            self.headers.append((int(found.group(1)), found.group(5).decode()))
            self.events.append(event)

    def _serve(self) -> None:
        while True:
            try:
                if not self.tcp:
                    data, _ = self.sock.recvfrom(65_535)
                    self._take(data)
                    continue
                conn, _ = self.sock.accept()
                self.connections += 1
                self._open.append(conn)
            except OSError:
                return
            threading.Thread(target=self._frames, args=(conn,), daemon=True).start()

    def _frames(self, conn: socket.socket) -> None:
        buffer = b""
        with conn:
            while True:
                chunk = conn.recv(65_536)
                if not chunk:
                    return
                buffer += chunk
                while b" " in buffer:
                    length, _, rest = buffer.partition(b" ")
                    if len(rest) < int(length):
                        break
                    self._take(rest[: int(length)])
                    buffer = rest[int(length) :]

    def close(self) -> None:
        """Stop listening and drop every connection (the collector went away)."""
        if self.tcp:  # wakes the blocked accept() (a close alone leaves it listening)
            with contextlib.suppress(OSError):
                self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
        for conn in self._open:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        self._open.clear()


class Receiver:
    """An HTTP receiver of JSON Lines batches, stopped and started on one port."""

    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/audit"
        self.events: list[dict[str, Any]] = []
        self.checkpoints: list[dict[str, Any]] = []  # (audit/checkpoints.py)
        self.probes = 0
        self.authorization: set[str] = set()
        self._server: ThreadingHTTPServer | None = None
        self._lock = threading.Lock()

    def start(self) -> None:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"] or 0))
                assert self.headers["Content-Type"] == "application/x-ndjson"
                with outer._lock:
                    outer.authorization.add(self.headers.get("Authorization", ""))
                    if not body:
                        outer.probes += 1
                    lines = [json.loads(line) for line in body.splitlines()]
                    outer.events += [e for e in lines if "id" in e]
                    outer.checkpoints += [e for e in lines if "id" not in e]
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        ThreadingHTTPServer.allow_reuse_address = True
        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    r.start()
    yield r
    r.stop()


def table(server: Server) -> dict[int, dict[str, Any]]:
    """Every audit row as its devices carry it, by id."""
    assert server.services is not None
    db = server.services.db

    async def read() -> list[dict[str, Any]]:
        async with db.read() as tx:
            return [event_of(r) for r in await Stored.after(tx, 0, 100_000)]

    return {e["id"]: e for e in server.call(read())}


def mixed_run(server: Server) -> None:
    """Create, sign, a refusal (a read-only token signing), a token create."""
    assert server.services is not None
    tenant = f"t-{uuid.uuid4().hex[:8]}"
    token = server.new_token(tenant)
    with server.client(token) as c:
        address = c.post("/dogecoin", json={}).json()["address"]
        signed = c.post(f"/dogecoin/{address}/sign-message", json={"message": "hello"})
        assert signed.status_code == 200, signed.text
    _, reader = server.call(
        server.services.tokens.create(tenant, "reader", scopes=frozenset({"read"}))
    )
    with server.client(reader) as c:
        refused = c.post(f"/dogecoin/{address}/sign-message", json={"message": "hello"})
        assert refused.status_code == 403


def events_in(path: Path) -> list[dict[str, Any]]:
    """A file's events (its checkpoint lines left out: audit/checkpoints.py)."""
    lines = path.read_text().splitlines() if path.exists() else []
    return [e for e in map(json.loads, lines) if "id" in e]


def same(copy: list[dict[str, Any]], rows: dict[int, dict[str, Any]]) -> bool:
    """The copy holds every row once, each equal to its row (a chain linked since the
    event left is not a difference)."""
    ids = [e["id"] for e in copy]
    if sorted(ids) != sorted(rows) or len(set(ids)) != len(ids):
        return False
    return all({**e, "chain": None} == {**rows[e["id"]], "chain": None} for e in copy)


@pytest.mark.parametrize("backend", BACKENDS, indirect=True)
@pytest.mark.parametrize("scheme", ["udp", "tcp"])
def test_every_event_of_a_mixed_run_reaches_every_device(
    backend: str, scheme: str, tmp_path: Path, receiver: Receiver
) -> None:
    syslog = Syslog(tcp=scheme == "tcp")
    audit_file = tmp_path / "audit.jsonl"
    with own_server(
        backend,
        tmp_path / "data",
        audit_file=audit_file,
        audit_syslog=syslog.url,
        audit_http_url=receiver.url,
        audit_http_authorization="Splunk s3cret",
    ) as server:
        mixed_run(server)
        rows = table(server)
        assert {"create", "sign", "denied", "token.create"} <= {e["action"] for e in rows.values()}

        def file_events() -> list[dict[str, Any]]:
            return events_in(audit_file)

        wait_for(lambda: same(receiver.events, rows), "every event at the HTTP receiver")
        wait_for(lambda: same(syslog.events, rows), f"every event at the {scheme} collector")
        wait_for(lambda: same(file_events(), rows), "every event in the file")
        # each device had a checkpoint of every tenant's position (audit/checkpoints.py)
        wait_for(lambda: bool(receiver.checkpoints and syslog.checkpoints), "checkpoints")
        assert {c["action"] for c in receiver.checkpoints + syslog.checkpoints} == {"checkpoint"}
        assert receiver.authorization == {"Splunk s3cret"}
        facility_auth = 4
        pris = {e["id"]: h for e, h in zip(syslog.events, syslog.headers, strict=True)}
        for event_id, (pri, msgid) in pris.items():
            assert pri >> 3 == facility_auth and msgid == rows[event_id]["action"]
            assert pri & 7 == (6 if rows[event_id]["outcome"] == "ok" else 4)
        assert oct(audit_file.stat().st_mode & 0o777) == "0o600"
        assert syslog.connections == (1 if syslog.tcp else 0)  # one connection, kept
        # a collector's file of these messages is a copy `audit verify --file` reads
        collected = tmp_path / "syslog.log"
        collected.write_bytes(b"".join(m + b"\n" for m in syslog.raw))
        assert server.services is not None
        check = server.call(verify_file(server.services.db, [collected]))
        assert check.ok and check.matched == len(rows), check
    syslog.close()


@pytest.mark.parametrize("backend", BACKENDS, indirect=True)
def test_a_tcp_collector_restarted_loses_nothing(backend: str, tmp_path: Path) -> None:
    """The collector closes its connection and goes away for a while: the device sees
    the connection closed before it sends into it, fails, backs off, reconnects once
    the collector is back and delivers everything."""
    syslog = Syslog(tcp=True)
    with own_server(backend, tmp_path / "data", audit_syslog=syslog.url) as server:
        mixed_run(server)
        wait_for(lambda: same(syslog.events, table(server)), "the first run delivered")
        syslog.close()
        mixed_run(server)
        shipper = server.services.audit.devices.shippers[0]  # type: ignore[union-attr]
        wait_for(
            lambda: shipper.seen is not None and shipper.seen[0].fail_ms > shipper.seen[0].ok_ms,
            "a failed delivery",
        )
        syslog.start()
        rows = table(server)
        wait_for(lambda: same(syslog.events, rows), "every event after the restart")
        assert syslog.connections == 2
    syslog.close()


@pytest.mark.parametrize("backend", BACKENDS, indirect=True)
def test_a_receiver_down_for_a_while_loses_and_doubles_nothing(
    backend: str, tmp_path: Path, receiver: Receiver
) -> None:
    with own_server(backend, tmp_path / "data", audit_http_url=receiver.url) as server:
        mixed_run(server)
        wait_for(lambda: same(receiver.events, table(server)), "the first run delivered")
        receiver.stop()
        mixed_run(server)
        shipper = server.services.audit.devices.shippers[0]  # type: ignore[union-attr]
        wait_for(
            lambda: shipper.seen is not None and shipper.seen[0].fail_ms > shipper.seen[0].ok_ms,
            "a failed delivery",
        )
        mixed_run(server)
        receiver.start()
        rows = table(server)
        wait_for(lambda: same(receiver.events, rows), "every event, once, after the outage")


def test_a_lower_id_committing_late_is_shipped_and_a_rolled_back_one_never(
    tmp_path: Path, receiver: Receiver
) -> None:
    """PostgreSQL draws ids outside transactions: two transactions take ids, hold them
    open while later rows commit and ship, then one commits and one rolls back. The
    late row arrives (after higher ids); the rolled-back one never does. (SQLite has
    one writer at a time: its ids commit in order.)"""
    with own_server("postgresql", tmp_path / "data", audit_http_url=receiver.url) as server:
        assert server.services is not None and server.loop is not None
        db = server.services.db
        inserted, release = threading.Barrier(3), threading.Event()

        async def held(outcome: str) -> None:
            async with db.write() as tx:
                await Audit.insert(tx, AuditEvent(None, "test.held", outcome, now_ms()))
                await asyncio.to_thread(inserted.wait, 30)
                await asyncio.to_thread(release.wait, 30)
                if outcome != "ok":
                    raise RuntimeError("rolled back")

        late = asyncio.run_coroutine_threadsafe(held("ok"), server.loop)
        doomed = asyncio.run_coroutine_threadsafe(held("rolled_back"), server.loop)
        inserted.wait(30)
        mixed_run(server)
        wait_for(lambda: same(receiver.events, table(server)), "the later rows shipped")
        release.set()
        late.result(30)
        with pytest.raises(RuntimeError):
            doomed.result(30)
        rows = table(server)
        assert [e["outcome"] for e in rows.values() if e["action"] == "test.held"] == ["ok"]
        wait_for(lambda: same(receiver.events, rows), "the late row shipped")
        held_id = next(e["id"] for e in rows.values() if e["action"] == "test.held")
        assert [e["id"] for e in receiver.events][-1] == held_id  # after higher ids
        assert held_id < max(rows)


@pytest.mark.parametrize("backend", BACKENDS, indirect=True)
def test_audit_required_with_every_device_down_refuses_before_signing(
    backend: str, tmp_path: Path
) -> None:
    receiver = Receiver()  # not started: connection refused
    dead_syslog = f"tcp://127.0.0.1:{free_port()}"
    with own_server(
        backend,
        tmp_path / "data",
        audit_required=True,
        audit_file=tmp_path / "no-such-dir" / "audit.jsonl",
        audit_syslog=dead_syslog,
        audit_http_url=receiver.url,
    ) as server:
        token = server.new_token()
        with server.client(token) as c:
            refused = c.post("/dogecoin", json={})
            assert refused.status_code == 503 and refused.json()["code"] == "audit_unavailable"
            assert c.get("/dogecoin").status_code == 200  # reads write no event: they go on
            receiver.start()  # one device back: changes go on
            try:
                created: list[httpx.Response] = []

                def creates() -> bool:
                    created.append(c.post("/dogecoin", json={}))
                    return created[-1].status_code == 200

                wait_for(creates, "a create once the receiver is back")
                address = created[-1].json()["address"]
                receiver.stop()  # every device down again
                wait_for(
                    lambda: c.post("/dogecoin", json={}).status_code == 503,
                    "refusals once the receiver is gone",
                )
                r = c.post(f"/dogecoin/{address}/sign-message", json={"message": "hello"})
            finally:
                receiver.stop()
        assert r.status_code == 503 and r.json()["code"] == "audit_unavailable", r.text
        assert "signature" not in r.text
        events = list(table(server).values())
        assert not [e for e in events if e["action"] == "sign"]  # nothing signed
        denied = [e for e in events if e["outcome"] == "audit_unavailable"]
        assert denied and all(e["action"] == "denied" for e in denied)
        sign_refusal = json.loads(denied[-1]["details"])
        assert sign_refusal["path"].endswith("/sign-message")


@pytest.mark.parametrize("backend", BACKENDS, indirect=True)
def test_a_cursor_moved_past_the_end_fails_audit_required_closed(
    backend: str, tmp_path: Path
) -> None:
    """A database writer moves the HTTP device's cursor past the last row (so nothing
    more would be shipped): the cursor fails its MAC, the device is unhealthy, and with
    CHAINKEYS_AUDIT_REQUIRED every change is refused until the record is dealt with."""
    from sqlalchemy import select, update

    from chainkeys.store.tables import meta

    receiver = Receiver()
    receiver.start()
    try:
        with (
            own_server(
                backend, tmp_path / "data", audit_required=True, audit_http_url=receiver.url
            ) as server,
            server.client(server.new_token()) as c,
        ):
            wait_for(lambda: c.post("/dogecoin", json={}).status_code == 200, "a create")
            assert server.services is not None
            db = server.services.db

            async def move() -> None:
                async with db.write() as tx:
                    key = meta.c.key
                    [(name, raw)] = (
                        await tx.execute(
                            select(key, meta.c.value).where(key.like("audit.device.http.%"))
                        )
                    ).all()
                    state = json.loads(bytes(raw))
                    state["through"] += 1_000_000
                    moved = json.dumps(state).encode()
                    await tx.execute(update(meta).where(key == name).values(value=moved))

            server.call(move())
            wait_for(
                lambda: c.post("/dogecoin", json={}).status_code == 503,
                "changes refused once the cursor was moved",
            )
            r = c.post("/dogecoin", json={})
            assert r.json()["code"] == "audit_unavailable", r.text
    finally:
        receiver.stop()


def test_audit_required_needs_a_device_that_confirms_delivery(tmp_path: Path) -> None:
    env = {
        "CHAINKEYS_DATA_DIR": str(tmp_path),
        "CHAINKEYS_AUDIT_REQUIRED": "true",
        "CHAINKEYS_AUDIT_SYSLOG": "udp://127.0.0.1:514",
    }
    result = chainkeys_cli("audit", env=env)
    assert result.returncode != 0
    assert "CHAINKEYS_AUDIT_REQUIRED needs an audit device that confirms delivery" in result.stderr


@pytest.mark.parametrize("backend", BACKENDS, indirect=True)
def test_a_rotated_file_goes_on_after_sighup(backend: str, tmp_path: Path) -> None:
    """The real `chainkeys serve`: logrotate renames the file and sends SIGHUP; the
    next events go to a new file, and the two together are the whole table."""
    _, pg_url = backend_settings(backend, tmp_path / "data")
    audit_file = tmp_path / "audit.jsonl"
    env = {"CHAINKEYS_DATA_DIR": str(tmp_path / "data"), "CHAINKEYS_AUDIT_FILE": str(audit_file)}
    os.environ.pop("CHAINKEYS_MASTER_KEY", None)
    if pg_url:
        env["CHAINKEYS_DATABASE_URL"] = pg_url
    proc = start(env, tmp_path / "server.log")
    try:
        token = first_token(proc)
        with httpx.Client(
            base_url=proc.base_url, verify=TLS, headers={"Authorization": token}, timeout=30
        ) as c:

            def lines(path: Path) -> list[dict[str, Any]]:
                return events_in(path)

            names = [c.post("/dogecoin", json={}).json()["address"] for _ in range(3)]
            wait_for(
                lambda: sum(e["action"] == "create" for e in lines(audit_file)) == 3,
                "the first creates in the file",
            )
            rotated = audit_file.with_suffix(".jsonl.1")
            audit_file.rename(rotated)
            proc.popen.send_signal(signal.SIGHUP)
            names += [c.post("/dogecoin", json={}).json()["address"] for _ in range(3)]
            wait_for(
                lambda: [e["account_name"] for e in lines(audit_file) if e["action"] == "create"]
                == names[3:],
                "the later creates in the new file",
            )
            before = [e["account_name"] for e in lines(rotated) if e["action"] == "create"]
            assert before == names[:3]
        check = chainkeys_cli(
            "audit", "verify", "--file", str(rotated), "--file", str(audit_file), env=env
        )
        assert check.returncode == 0, check.stdout + check.stderr
    finally:
        proc.stop()
        if pg_url:
            drop_pg_database(pg_url)


@pytest.mark.parametrize("backend", BACKENDS, indirect=True)
def test_verify_file_passes_an_honest_copy_and_names_a_changed_one(
    backend: str, tmp_path: Path
) -> None:
    audit_file = tmp_path / "audit.jsonl"
    with own_server(backend, tmp_path / "data", audit_file=audit_file) as server:
        for _ in range(2):
            mixed_run(server)
        rows = table(server)
        wait_for(lambda: len(events_in(audit_file)) == len(rows), "every event in the file")
        assert server.services is not None
        db = server.services.db

        def verify(*paths: Path) -> Any:
            return server.call(verify_file(db, list(paths)))

        honest = verify(audit_file)
        assert honest.ok and honest.matched == len(rows), honest
        events = [json.dumps(e) for e in events_in(audit_file)]
        ids = [json.loads(line)["id"] for line in events]

        edited = tmp_path / "edited.jsonl"
        changed = json.loads(events[2])
        changed["outcome"] = "ok" if changed["outcome"] != "ok" else "policy_denied"
        edited.write_text("\n".join([*events[:2], json.dumps(changed), *events[3:]]) + "\n")
        found = verify(edited)
        assert not found.ok
        assert [p for p in found.problems if f"event {ids[2]} " in p and "outcome" in p]

        missing = tmp_path / "missing.jsonl"
        missing.write_text("\n".join([*events[:3], *events[4:]]) + "\n")
        found = verify(missing)
        assert found.problems == [
            f"row {ids[3]} is missing from the copy (between its events {ids[0]} and {ids[-1]})"
        ]

        # the table edited under an honest copy: the copy names the row
        async def edit_row() -> None:
            async with db.write() as tx:
                await tx.execute(update(audit).where(audit.c.id == ids[1]).values(outcome="ok2"))

        server.call(edit_row())
        found = verify(audit_file)
        assert [p for p in found.problems if f"event {ids[1]} " in p and "outcome" in p]

        # the CLI names them too, and exits 1
        master_key = server.settings.master_key
        assert master_key is not None
        env = {
            "CHAINKEYS_DATA_DIR": str(server.settings.data_dir),
            "CHAINKEYS_MASTER_KEY": master_key.get_secret_value(),
        }
        if server.settings.database_url is not None:
            env["CHAINKEYS_DATABASE_URL"] = server.settings.database_url.get_secret_value()
        result = chainkeys_cli("audit", "verify", "--file", str(missing), env=env)
        assert result.returncode == 1
        assert f"row {ids[3]} is missing from the copy" in result.stdout + result.stderr
