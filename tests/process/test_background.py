"""Background work never dies quietly: every round's error is logged and counted and the
task goes on (api/background.py), and shutdown waits for a round cancelled in the
middle of a database call before the store closes; the webhook counts a redirect and
an answer that is not HTTP as failed deliveries and keeps sending, and signs with the
clock seam's time."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import secrets
import socket
import sqlite3
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import REGISTRY
from sqlalchemy import func, select
from tests.conftest import BACKENDS, backend_settings, drop_pg_database

from chainkeys import clock
from chainkeys.api import background
from chainkeys.api.background import Task, supervise
from chainkeys.callbacks import HEADER
from chainkeys.clock import now_ms
from chainkeys.config import Settings
from chainkeys.store import migrate
from chainkeys.store.backend import open_backend
from chainkeys.store.tables import webhook_outbox
from chainkeys.vault.gate import Gate
from chainkeys.webhooks.delivery import Webhook
from chainkeys.webhooks.outbox import Outbox


def errors(task: str) -> float:
    value = REGISTRY.get_sample_value("chainkeys_background_errors_total", {"task": task})
    return value or 0.0


def test_a_round_that_raises_anything_is_logged_counted_and_the_task_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    rounds: list[str] = []
    secret = "-".join(["a", "secret", "in", "the", "message"])  # not in any source line

    async def round_() -> None:
        rounds.append("x")
        if len(rounds) in (1, 2):
            raise KeyError(secret)  # not a ChainkeysError: what used to end the loop for good
        if len(rounds) == 4:
            raise asyncio.CancelledError  # shutdown ends it

    before = errors("flaky")

    async def main() -> None:
        with pytest.raises(asyncio.CancelledError):
            await supervise(Task("flaky", round_, 0.001))

    caplog.set_level(logging.ERROR, "chainkeys.background")
    asyncio.run(main())
    assert len(rounds) == 4  # it went on after two failures
    assert errors("flaky") == before + 2
    logged = [r for r in caplog.records if "background task flaky failed" in r.getMessage()]
    assert len(logged) == 2 and "KeyError" in logged[0].getMessage()
    assert secret not in caplog.text  # the frames, never the message


class Misbehaving:
    """A local receiver that answers a redirect, then a line that is not HTTP, then 200."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.port = self.sock.getsockname()[1]
        self.answers = [
            b"HTTP/1.1 302 Found\r\nLocation: http://127.0.0.1:1/elsewhere\r\n"
            b"Content-Length: 0\r\n\r\n",
            b"SMTP ready, this is not HTTP\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
        ]
        self.methods: list[str] = []
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self) -> None:
        for answer in self.answers:
            conn, _ = self.sock.accept()
            with conn:
                head = conn.recv(65536)
                self.methods.append(head.split(b" ", 1)[0].decode())
                conn.sendall(answer)
        self.sock.close()


def test_the_webhook_counts_a_redirect_and_a_non_http_answer_as_failures(tmp_path: Path) -> None:
    receiver = Misbehaving()

    async def main() -> list[tuple[int, str | None, int | None]]:
        db = open_backend(f"sqlite:///{tmp_path / 'w.db'}", Settings(data_dir=tmp_path))
        db.signer = Gate(secrets.token_bytes(32))  # what the barrier gives a server's store
        try:
            await migrate.upgrade(db)
            async with db.write() as tx:
                await Outbox.add(tx, "evt_1", '{"id":"evt_1"}', now_ms())
            hook = Webhook(db, f"http://127.0.0.1:{receiver.port}/hook", b"secret")
            seen = []
            for _ in range(3):
                await hook.send_due()
                async with db.read() as tx:
                    from sqlalchemy import select

                    from chainkeys.store.tables import webhook_outbox as o

                    row = (
                        await tx.execute(select(o.c.attempts, o.c.last_error, o.c.delivered_ms))
                    ).first()
                    seen.append((row.attempts, row.last_error, row.delivered_ms))
                async with db.write() as tx:  # due again at once (no backoff wait here)
                    from sqlalchemy import update

                    await tx.execute(update(o).values(next_ms=0))
            return seen
        finally:
            await db.close()

    try:
        seen = asyncio.run(main())
    finally:
        receiver.sock.close()
    assert seen[0][:2] == (1, "HTTP 302") and seen[0][2] is None  # not followed, not delivered
    assert seen[1][0] == 2 and seen[1][1] and seen[1][2] is None  # not HTTP: a failure
    assert seen[2][2] is not None  # the third answer, a 200, delivered it
    assert receiver.methods == ["POST", "POST", "POST"]  # never re-sent as a GET


def test_an_event_a_database_writer_inserted_is_never_sent(tmp_path: Path) -> None:
    """A row copied from a real event under another id and body, and one with no MAC:
    neither reaches the receiver signed; the real one does; both are parked, named."""
    receiver = Recording()

    async def main() -> list[Any]:
        from sqlalchemy import insert, select

        db = open_backend(f"sqlite:///{tmp_path / 'w.db'}", Settings(data_dir=tmp_path))
        db.signer = Gate(secrets.token_bytes(32))
        try:
            await migrate.upgrade(db)
            async with db.write() as tx:
                await Outbox.add(tx, "evt_real", '{"id":"evt_real"}', now_ms())
                [real] = (await tx.execute(select(webhook_outbox))).all()
                copy = {**real._mapping, "event_id": "evt_forged", "body": '{"pay":"me"}'}
                del copy["id"]
                await tx.execute(insert(webhook_outbox).values(**copy))
                bare = {**copy, "event_id": "evt_bare", "mac": None}
                await tx.execute(insert(webhook_outbox).values(**bare))
            hook = Webhook(db, f"http://127.0.0.1:{receiver.port}/hook", b"secret")
            assert await hook.send_due() == 1
            assert await hook.send_due() == 0  # parked: never due again
            async with db.read() as tx:
                stmt = select(webhook_outbox.c.event_id, webhook_outbox.c.last_error)
                return list((await tx.execute(stmt.order_by(webhook_outbox.c.id))).all())
        finally:
            await db.close()

    try:
        rows = asyncio.run(main())
    finally:
        receiver.close()
    assert [body for _, body in receiver.received] == [b'{"id":"evt_real"}']
    assert [r[0] for r in rows if r[1] and "integrity" in r[1]] == ["evt_forged", "evt_bare"]


class Recording:
    """A local receiver that answers 200 and keeps each delivery's signature and body."""

    def __init__(self) -> None:
        received: list[tuple[str, bytes]] = []
        self.received = received

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                received.append((self.headers.get(HEADER, ""), body))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def signed_at(secret: bytes, header: str, body: bytes) -> int:
    """What a receiver does: check the HMAC over "<t>.<body>"; the `t` it was made at."""
    parts = dict(p.split("=", 1) for p in header.split(","))
    expected = hmac.new(secret, parts["t"].encode() + b"." + body, hashlib.sha256).hexdigest()
    assert hmac.compare_digest(expected, parts["v1"]), header
    return int(parts["t"])


def test_the_webhook_signs_with_the_clock_seam(tmp_path: Path) -> None:
    receiver = Recording()
    later = 3 * 3600  # seconds: far past any receiver's tolerance for an old or early `t`

    async def main() -> None:
        db = open_backend(f"sqlite:///{tmp_path / 'w.db'}", Settings(data_dir=tmp_path))
        db.signer = Gate(secrets.token_bytes(32))  # what the barrier gives a server's store
        try:
            await migrate.upgrade(db)
            hook = Webhook(db, f"http://127.0.0.1:{receiver.port}/hook", b"secret")
            async with db.write() as tx:
                await Outbox.add(tx, "evt_now", '{"id":"evt_now"}', now_ms())
            assert await hook.send_due() == 1
            with clock.shift(later * 1000):
                async with db.write() as tx:
                    await Outbox.add(tx, "evt_later", '{"id":"evt_later"}', now_ms())
                assert await hook.send_due() == 1
        finally:
            await db.close()

    before = int(time.time())
    try:
        asyncio.run(main())
    finally:
        receiver.close()
    after = int(time.time())
    [(header, body), (shifted, shifted_body)] = receiver.received
    assert shifted_body == b'{"id":"evt_later"}'
    assert before <= signed_at(b"secret", header, body) <= after
    assert before + later <= signed_at(b"secret", shifted, shifted_body) <= after + later


@pytest.mark.parametrize("backend", BACKENDS)
def test_shutdown_waits_for_a_round_cancelled_in_the_middle_of_a_database_call(
    backend: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The round's write waits for another connection's lock when shutdown comes
    (SQLite: in the writer thread, which a cancelled write still waits for; PostgreSQL:
    on the server): `stop` returns once the round has ended, and the store closes after."""
    settings, pg_url = backend_settings(backend, tmp_path)
    url = settings.db_url
    caplog.set_level(logging.WARNING)
    order: list[str] = []

    async def main() -> set[asyncio.Task[Any]]:
        db = open_backend(url, settings)
        await migrate.upgrade(db)
        inside = asyncio.Event()

        async def round_() -> None:
            inside.set()
            try:
                async with db.write() as tx:
                    await Outbox.add(tx, "evt_blocked", "{}", now_ms())
                order.append("written")  # never: shutdown comes first
            finally:
                order.append("round ended")

        async with OutboxLock(url) as lock:
            tasks = [asyncio.create_task(supervise(Task("blocked", round_, 60.0)))]
            await inside.wait()
            await lock.waited_for()
            lock.release_soon()  # the round's call goes on after it is cancelled
            await background.stop(tasks)
            order.append("stopped")
            assert all(t.cancelled() for t in tasks)
        async with db.read() as tx:
            rows = (await tx.execute(select(func.count()).select_from(webhook_outbox))).first()[0]
        assert rows == 0  # the cancelled write was rolled back
        await db.close()
        order.append("closed")
        return asyncio.all_tasks() - {asyncio.current_task()}

    try:
        left = asyncio.run(main())
    finally:
        if pg_url:
            drop_pg_database(pg_url)
    assert order == ["round ended", "stopped", "closed"]
    assert left == set()  # nothing left pending
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []


class OutboxLock:
    """Another connection holding the write lock (SQLite: given up by a thread of its own
    0.2 s after `release_soon`) or a lock on the outbox table (PostgreSQL, where a
    cancelled statement ends at once: given up at the end)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.sqlite: sqlite3.Connection | None = None
        self.pg: Any = None
        self.timer: threading.Timer | None = None

    async def __aenter__(self) -> OutboxLock:
        if self.url.startswith("sqlite"):
            self.sqlite = sqlite3.connect(
                self.url.removeprefix("sqlite:///"), isolation_level=None, check_same_thread=False
            )
            self.sqlite.execute("BEGIN IMMEDIATE")
        else:
            import asyncpg  # type: ignore[import-untyped]

            self.pg = await asyncpg.connect(self.url)
            await self.pg.execute("BEGIN; LOCK TABLE webhook_outbox IN ACCESS EXCLUSIVE MODE")
        return self

    async def waited_for(self) -> None:
        """Until a write waits for the lock. (SQLite: at once, since a write's first
        suspension is its wait for the writer thread, which retries BEGIN IMMEDIATE.)"""
        while self.pg is not None and not await self.pg.fetchval(
            "SELECT count(*) FROM pg_locks WHERE NOT granted "
            "AND relation = 'webhook_outbox'::regclass"
        ):
            await asyncio.sleep(0.01)

    def release_soon(self) -> None:
        if self.sqlite is not None:
            self.timer = threading.Timer(0.2, self.sqlite.rollback)
            self.timer.start()

    async def __aexit__(self, *exc: object) -> None:
        if self.timer is not None:
            self.timer.join()
        if self.sqlite is not None:
            self.sqlite.close()
        if self.pg is not None:
            await self.pg.close()
