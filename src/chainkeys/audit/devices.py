"""Audit devices: copies of the audit table shipped beside it, as Vault's audit devices.

Three devices, each optional: a JSON Lines file (CHAINKEYS_AUDIT_FILE), RFC 5424
syslog over UDP or TCP (CHAINKEYS_AUDIT_SYSLOG) and HTTP batches
(CHAINKEYS_AUDIT_HTTP_URL). Every event is one row of the audit table as stored:
its id, every column and its chain link (`chain`, NULL until the chaining round of
audit/chain.py reaches the row), plus `time` (the row's `created_ms` in ISO 8601)
for people. `verify_file` (audit/copies.py) checks such a copy against the table.
A round that ships events ends its batch with a checkpoint line when a tenant's
position moved (audit/checkpoints.py: no `id`, `action` "checkpoint"), which the start
reads back from the file to refuse a database put back from an older copy.

The outbox is the table itself. Audit rows are written by many paths (a refusal on
its own, a sign in its transaction, an account and its event in one statement), so
rather than a second write per event, each device tails the table by id
(audit/shipping.py): a cursor per device in `meta`, moved only after a delivery
succeeded, so a restart, a receiver that is down or a crash loses nothing.

- Only committed rows are read, so an event of a rolled-back transaction is never
  shipped.
- PostgreSQL can commit a lower id after a higher one was read (ids come from a
  sequence, outside transactions). The cursor remembers every id it skipped (a gap)
  for `SETTLE_MS` after it first saw a higher id and re-reads those ids every round:
  a gap that fills is shipped late (out of id order), one still empty after
  `SETTLE_MS` was a rolled-back insert (no transaction the service holds stays open
  that long; the chain makes the same bet). SQLite commits in id order and leaves no
  gaps.
- Delivery is at least once: a process that crashes after delivering and before
  moving its cursor delivers the batch again (the file device drops what the end of
  its file already holds; a receiver dedupes by `id`).
- One process ships each device at a time: the cursor record carries a lease (30 s,
  renewed by the process that ships), taken by compare-and-set, so replicas and
  workers take over from each other without doubling events. The file device is one
  per host (each host writes its own file, the cursor key names the host).

Health, for CHAINKEYS_AUDIT_REQUIRED: a device is healthy when its last attempt
(a delivery, or a probe every `PROBE_MS` while idle: the file opened, the TCP
connection up, an empty HTTP batch answered 2xx) succeeded within `HEALTHY_MS`,
as the cursor record says (every process reads it each round). UDP syslog never
learns of a loss and never counts.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import logging.handlers
import os
import select
import socket
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Protocol
from urllib.parse import urlsplit

import msgspec

from chainkeys.audit.repository import AUDIT_COLUMNS
from chainkeys.clock import iso

if TYPE_CHECKING:
    import httpx

log = logging.getLogger("chainkeys.audit.devices")
TIMEOUT_SECONDS: Final = 10.0
UDP_MAX: Final = 60_000  # bytes in one datagram (IPv4's limit is 65,507)
TAIL_BYTES: Final = 256 * 1024  # what the file device reads back at open (see FileDevice)
APP_NAME: Final = "chainkeys"
# A checkpoint line (audit/checkpoints.py), written after a batch's events; None: none.
CheckpointLine = Mapping[str, Any] | None


class DeliveryFailed(Exception):
    """A device could not take a batch (the message names why, never a secret)."""


class Device(Protocol):
    """Where a copy goes. `send` delivers a batch of rows in full, then the round's
    checkpoint line if any (audit/checkpoints.py), or raises DeliveryFailed; `probe`
    raises DeliveryFailed when the device could not take an event now; `confirms`: a
    delivery that returns was received (UDP: never known)."""

    kind: str
    target: str  # what the cursor key is derived from (never logged: may hold a secret)
    confirms: bool

    async def send(
        self, rows: Sequence[Mapping[str, Any]], checkpoint: CheckpointLine = None
    ) -> None: ...

    async def probe(self) -> None: ...

    async def close(self) -> None: ...


def event_of(row: Mapping[str, Any]) -> dict[str, Any]:
    """A row as its devices carry it: id, time, the columns as stored, chain."""
    event: dict[str, Any] = {"id": row["id"], "time": iso(row["created_ms"])}
    for column in AUDIT_COLUMNS:
        event[column] = row[column]
    event["chain"] = row.get("chain")
    return event


def line_of(row: Mapping[str, Any]) -> bytes:
    return msgspec.json.encode(event_of(row)) + b"\n"


def lines_of(rows: Sequence[Mapping[str, Any]], checkpoint: CheckpointLine) -> bytes:
    """A batch as JSON Lines: its events, then its checkpoint."""
    tail = msgspec.json.encode(checkpoint) + b"\n" if checkpoint is not None else b""
    return b"".join(line_of(r) for r in rows) + tail


class _Id(msgspec.Struct):
    id: int


_id_decoder = msgspec.json.Decoder(_Id)


def _tail(fd: int) -> tuple[set[int], bool]:
    """The ids of the whole lines at the end of an open file, and whether its last line
    is torn (a write cut short by a crash: it does not end in a newline)."""
    size = os.fstat(fd).st_size
    if size == 0:
        return set(), False
    start = max(0, size - TAIL_BYTES)
    data = os.pread(fd, size - start, start)
    lines = data.split(b"\n")
    torn = lines.pop() != b""
    if start > 0 and lines:
        lines.pop(0)  # cut by the window
    ids = set()
    for line in lines:
        with contextlib.suppress(msgspec.DecodeError, msgspec.ValidationError):
            ids.add(_id_decoder.decode(line).id)
    return ids, torn


class FileDevice:
    """JSON Lines, appended; each batch is written whole and fsync'ed before the cursor
    moves (an event in the cursor's past is on disk). Reopened when the process gets
    SIGHUP and whenever the path no longer names the open file (logrotate moved or
    deleted it; `copytruncate` needs nothing: writes append). At each open the end of
    the file is read back: events it already holds (a batch written just before a
    crash) are not written again, and a torn last line is ended first."""

    kind = "file"
    confirms = True

    def __init__(self, path: Path) -> None:
        self.path = path
        self.target = f"{socket.gethostname()}:{path}"
        self._fd: int | None = None
        self._held: set[int] = set()  # ids the file ends with, at its last open
        self._reopen = False
        self._lock = threading.Lock()  # one thread at a time on the descriptor

    def hup(self) -> None:
        """SIGHUP: reopen before the next write (logrotate's postrotate)."""
        self._reopen = True

    def _moved(self, fd: int) -> bool:
        try:
            named = os.stat(self.path)
        except FileNotFoundError:
            return True
        held = os.fstat(fd)
        return (named.st_dev, named.st_ino) != (held.st_dev, held.st_ino)

    def _open(self) -> int:
        fd = self._fd
        if fd is not None and (self._reopen or self._moved(fd)):
            self._fd = None
            os.close(fd)
            fd = None
        self._reopen = False
        if fd is None:
            # read too: the end of the file is read back (_tail)
            fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                self._held, torn = _tail(fd)
                if torn:
                    _write_all(fd, b"\n")
            except OSError:
                os.close(fd)
                raise
            self._fd = fd
        return fd

    def _write(self, rows: Sequence[Mapping[str, Any]], checkpoint: CheckpointLine) -> None:
        with self._lock:
            try:
                fd = self._open()
                data = lines_of([r for r in rows if r["id"] not in self._held], checkpoint)
                self._held = set()
                if data:
                    _write_all(fd, data)
                    os.fsync(fd)
            except OSError as exc:
                self._close()  # a write cut short: the next open ends its line
                raise DeliveryFailed(f"{self.path}: {exc.strerror or type(exc).__name__}") from None

    def _probe(self) -> None:
        with self._lock:
            try:
                self._open()
            except OSError as exc:
                self._close()
                raise DeliveryFailed(f"{self.path}: {exc.strerror or type(exc).__name__}") from None

    def _close(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)

    def _close_locked(self) -> None:
        with self._lock:
            self._close()

    async def send(
        self, rows: Sequence[Mapping[str, Any]], checkpoint: CheckpointLine = None
    ) -> None:
        await asyncio.to_thread(self._write, rows, checkpoint)

    async def probe(self) -> None:
        await asyncio.to_thread(self._probe)

    async def close(self) -> None:
        await asyncio.to_thread(self._close_locked)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _printable(text: str, limit: int) -> str:
    """An RFC 5424 header field: printable US-ASCII, at most `limit`, else "-"."""
    kept = "".join(c for c in text if 33 <= ord(c) <= 126)[:limit]
    return kept or "-"


class Rfc5424Formatter(logging.Formatter):
    """An audit event as an RFC 5424 message without its PRI (SysLogHandler puts it
    first): `1 TIMESTAMP HOSTNAME chainkeys PROCID MSGID - BOM{event JSON}`. The
    timestamp is the event's own, MSGID its action, the MSG the JSON line the file
    device writes (UTF-8, so it starts with a BOM as section 6.4 asks)."""

    def __init__(self) -> None:
        super().__init__()
        self.hostname = _printable(socket.gethostname(), 255)

    def format(self, record: logging.LogRecord) -> str:
        event: dict[str, Any] = record.audit_event  # type: ignore[attr-defined]
        text = msgspec.json.encode(event).decode()
        return (
            f"1 {event['time']} {self.hostname} {APP_NAME} {os.getpid()} "
            f"{_printable(event['action'], 32)} - \ufeff{text}"
        )


class Rfc5424Handler(logging.handlers.SysLogHandler):
    """The standard library's syslog handler with the RFC 5424 formatter; over TCP
    each message is framed by octet counting (RFC 6587 3.4.1: `LEN SP MSG`), not by a
    trailing newline or NUL, so an event may hold any character. A failed send raises
    (the device must know) instead of printing to stderr. The socket is made when
    the first batch is sent (never in the constructor), with a connect timeout."""

    append_nul = False

    def __init__(self, host: str, port: int, tcp: bool, facility: int) -> None:
        self._tcp = tcp
        self._connect_to = (host, port)
        self._deferred = True  # SysLogHandler.__init__ connects: later, in a worker thread
        super().__init__((host, port), facility, socket.SOCK_STREAM if tcp else socket.SOCK_DGRAM)
        self._deferred = False
        self.setFormatter(Rfc5424Formatter())

    def createSocket(self) -> None:
        if self._deferred:
            return
        self.unixsocket = False
        if self._tcp:
            self.socket = socket.create_connection(self._connect_to, timeout=TIMEOUT_SECONDS)
        else:
            family = socket.getaddrinfo(*self._connect_to, 0, socket.SOCK_DGRAM)[0][0]
            self.socket = socket.socket(family, socket.SOCK_DGRAM)

    def emit(self, record: logging.LogRecord) -> None:
        if not self._tcp:
            super().emit(record)
            return
        try:
            severity = self.mapPriority(record.levelname)
            frame = f"<{self.encodePriority(self.facility, severity)}>{self.format(record)}"
            data = frame.encode()
            if not self.socket:
                self.createSocket()
            self.socket.sendall(str(len(data)).encode() + b" " + data)
        except Exception:
            self.handleError(record)

    def handleError(self, record: logging.LogRecord) -> None:
        raise

    def peer_closed(self) -> bool:
        """Whether a TCP collector has closed the connection (a send into it would be
        accepted by the kernel and lost)."""
        sock = self.socket
        if not self._tcp or sock is None:
            return False
        try:
            # select, not MSG_DONTWAIT: a socket with a timeout waits before any recv
            readable, _, _ = select.select([sock], [], [], 0)
            return bool(readable) and sock.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True


FACILITIES: Final = logging.handlers.SysLogHandler.facility_names


class SyslogDevice:
    """RFC 5424 over UDP or TCP (Rfc5424Handler). A refused event (outcome other
    than ok) has severity warning, the rest informational. Over UDP an
    event longer than a datagram carries is sent without its details (`"cut": true`;
    the file and HTTP devices carry it whole)."""

    kind = "syslog"

    def __init__(self, address: str, facility: str) -> None:
        parsed = urlsplit(address)
        self.target = address
        self.tcp = parsed.scheme == "tcp"
        self.confirms = self.tcp
        self.host, self.port = parsed.hostname or "localhost", parsed.port or 514
        self.facility = FACILITIES[facility]
        self._handler: Rfc5424Handler | None = None
        self._lock = threading.Lock()

    def _connected(self) -> Rfc5424Handler:
        handler = self._handler
        if handler is not None and handler.peer_closed():
            handler.close()
            handler = None
        if handler is None:
            handler = Rfc5424Handler(self.host, self.port, self.tcp, self.facility)
            handler.createSocket()
            self._handler = handler
        return handler

    def _send(self, rows: Sequence[Mapping[str, Any]], checkpoint: CheckpointLine) -> None:
        with self._lock:
            try:
                handler = self._connected()
                events = [event_of(row) for row in rows]
                if checkpoint is not None and (
                    self.tcp or len(msgspec.json.encode(checkpoint)) <= UDP_MAX
                ):  # (one too long for a datagram is left out: UDP is never read back)
                    events.append(dict(checkpoint))
                for event in events:
                    if not self.tcp and len(msgspec.json.encode(event)) > UDP_MAX:
                        event = {**event, "details": None, "cut": True}
                    level = logging.INFO if event.get("outcome", "ok") == "ok" else logging.WARNING
                    record = logging.LogRecord(
                        "chainkeys.audit", level, __file__, 0, "", None, None
                    )
                    record.audit_event = event
                    handler.emit(record)
            except OSError as exc:
                self._drop()
                raise DeliveryFailed(f"syslog: {exc.strerror or type(exc).__name__}") from None

    def _probe(self) -> None:
        with self._lock:
            try:
                self._connected()
            except OSError as exc:
                self._drop()
                raise DeliveryFailed(f"syslog: {exc.strerror or type(exc).__name__}") from None

    def _drop(self) -> None:
        handler, self._handler = self._handler, None
        if handler is not None:
            handler.close()

    def _close(self) -> None:
        with self._lock:
            self._drop()

    async def send(
        self, rows: Sequence[Mapping[str, Any]], checkpoint: CheckpointLine = None
    ) -> None:
        await asyncio.to_thread(self._send, rows, checkpoint)

    async def probe(self) -> None:
        await asyncio.to_thread(self._probe)

    async def close(self) -> None:
        await asyncio.to_thread(self._close)


class HttpDevice:
    """POSTs a batch as JSON Lines (`application/x-ndjson`, the file's lines) with
    httpx; delivered on a 2xx. A redirect is a failure (it would move the events
    somewhere else, or drop the body), as is a timeout or anything not HTTP. The probe
    is an empty batch (no lines): a receiver answers it 2xx too."""

    kind = "http"
    confirms = True

    def __init__(self, url: str, authorization: str | None) -> None:
        self.url = url
        self.target = url
        self._headers = {"Content-Type": "application/x-ndjson", "User-Agent": f"{APP_NAME}-audit"}
        if authorization:
            self._headers["Authorization"] = authorization
        self._client: httpx.AsyncClient | None = None  # made at the first send

    async def _post(self, body: bytes) -> None:
        import httpx  # here: every process start (each CLI call too) would pay its import

        if self._client is None:
            self._client = httpx.AsyncClient(timeout=TIMEOUT_SECONDS, follow_redirects=False)
        try:
            answer = await self._client.post(self.url, content=body, headers=self._headers)
        except httpx.HTTPError as exc:
            raise DeliveryFailed(f"HTTP: {type(exc).__name__}") from None
        if not 200 <= answer.status_code < 300:
            raise DeliveryFailed(f"HTTP {answer.status_code}")

    async def send(
        self, rows: Sequence[Mapping[str, Any]], checkpoint: CheckpointLine = None
    ) -> None:
        await self._post(lines_of(rows, checkpoint))

    async def probe(self) -> None:
        await self._post(b"")

    async def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()
