"""Shipping the audit table to its devices: a cursor per device, a lease, health.

Each device's state is one `meta` record (`audit.device.<kind>.<digest of its
target>`), changed only by compare-and-set so that processes never overwrite each
other: the cursor (`through`: the highest id shipped; `gaps`: lower ids not seen
yet, with when they were first skipped), the lease (`owner`, `until`), the last
attempt (`ok_ms`, `fail_ms`, `error`) and the backoff (`failures`, `next_ms`).
Why the table is the outbox, how PostgreSQL's out-of-order commits are handled and
what health means: audit/devices.py.

A round (every second, supervised by api/background.py): read the record; if
another live process holds the lease, only note the device's health; else read
what is due (rows past the cursor, and the gaps), take or renew the lease, deliver,
then move the cursor, or note the failure and back off (1 s, 2 s, 4 s, … 30 s).

A delivery ends with a checkpoint line (audit/checkpoints.py) when a tenant's position
moved since the last one this process delivered: read in each round that ships
events, and in the rounds after until the audit chain has linked what was shipped
(its positions move a few seconds after the events left), and once at a process's
first round (an honest restart leaves its own checkpoint at the end of the file).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import signal
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import msgspec

from chainkeys.audit.checkpoints import Position, positions, record
from chainkeys.audit.devices import DeliveryFailed, Device, FileDevice, HttpDevice, SyslogDevice
from chainkeys.audit.repository import Stored
from chainkeys.clock import now_ms
from chainkeys.config import Settings
from chainkeys.store.backend import Backend
from chainkeys.store.integrity import DEVICE_CURSORS
from chainkeys.vault.integrity import failed

log = logging.getLogger("chainkeys.audit.devices")
BATCH: Final = 500  # rows per delivery
ROUND_BATCHES: Final = 20  # batches one round may ship while catching up
SETTLE_MS: Final = 60_000  # how long a skipped id may still commit (audit/chain.py's bet)
MAX_GAPS: Final = 2_000  # skipped ids followed at once (a larger jump: the nearest ones)
LEASE_MS: Final = 30_000
PROBE_MS: Final = 5_000  # an idle device is probed this often (CHAINKEYS_AUDIT_REQUIRED)
HEALTHY_MS: Final = 15_000  # a success older than this no longer makes a device healthy
MAX_BACKOFF_MS: Final = 30_000
EVERY_SECONDS: Final = 1.0
RELEASE_SECONDS: Final = 2.0  # what a stopping process waits to give its leases up


class State(msgspec.Struct, kw_only=True):
    through: int = 0
    gaps: list[tuple[int, int]] = []  # (id, first skipped at ms)
    owner: str = ""
    until: int = 0
    ok_ms: int = 0
    fail_ms: int = 0
    error: str = ""
    failures: int = 0
    next_ms: int = 0
    shipped: int = 0
    mac: str = ""  # over the record's key and its cursor (store/integrity.py DEVICE_CURSORS)


_decoder = msgspec.json.Decoder(State)


class ForgedCursor(Exception):
    """A device's cursor that fails its MAC: moved by someone without the master key."""


def cursor_of(key: str, state: State) -> dict[str, Any]:
    return {"key": key, "through": state.through, "gaps": [list(g) for g in state.gaps]}


def backoff_ms(failures: int) -> int:
    return int(min(MAX_BACKOFF_MS, 1000 * 2 ** min(max(failures - 1, 0), 20)))


@dataclass(frozen=True, slots=True)
class Due:
    rows: Sequence[Mapping[str, Any]]
    through: int
    gaps: list[tuple[int, int]]


class Shipper:
    """One device's cursor, lease and health, in this process."""

    def __init__(self, db: Backend, device: Device, owner: str, probe: bool) -> None:
        self.db = db
        self.device = device
        self.owner = owner
        self.probe = probe  # probe while idle (only health needs it)
        digest = hashlib.sha256(f"{device.kind}\0{device.target}".encode()).hexdigest()[:16]
        self.key = f"audit.device.{device.kind}.{digest}"
        self.name = f"audit-{device.kind}"
        self.seen: tuple[State, int] | None = None  # the record as last read, and when
        self.marked: dict[str, Position] | None = None  # positions last checkpointed
        self.linked = 0  # the id the audit chain had linked through, as last read

    def healthy(self, now: int) -> bool:
        """The last attempt succeeded, recently, as read within HEALTHY_MS."""
        if self.seen is None:
            return False
        state, read_at = self.seen
        return (
            now - read_at <= HEALTHY_MS
            and state.ok_ms > 0
            and state.ok_ms >= state.fail_ms
            and now - state.ok_ms <= HEALTHY_MS
        )

    async def serve(self) -> None:
        """Rounds until cancelled; the device is closed however this ends (an error
        goes up to the supervisor, which logs it, backs off and calls again)."""
        hup = self._on_hup()
        try:
            while True:
                await self.round()
                await asyncio.sleep(EVERY_SECONDS)
        finally:
            if hup:
                with contextlib.suppress(Exception):
                    asyncio.get_running_loop().remove_signal_handler(signal.SIGHUP)
            await self.device.close()
            with contextlib.suppress(Exception):  # best effort: else the lease runs out
                await asyncio.wait_for(self._release(), RELEASE_SECONDS)

    async def _release(self) -> None:
        """Give the lease up (a stop, a restart, a SIGHUP's new workers): another process
        ships at its next round instead of after LEASE_MS."""
        raw, state = await self._read()
        if raw is not None and state.owner == self.owner:
            await self._swap(raw, msgspec.structs.replace(state, owner="", until=0))

    def _on_hup(self) -> bool:
        """SIGHUP reopens the file (where this loop can take signals: a process's main
        thread; `chainkeys serve`'s supervisor answers SIGHUP by starting its workers
        anew, which opens the file anew as well)."""
        if not isinstance(self.device, FileDevice):
            return False
        try:
            asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, self.device.hup)
        except (RuntimeError, ValueError, NotImplementedError):
            return False
        return True

    async def _read(self) -> tuple[bytes | None, State]:
        """The record, its cursor authenticated: one a database writer moved (past the
        end: nothing would be shipped again) makes the device unhealthy, so
        CHAINKEYS_AUDIT_REQUIRED refuses changes, and nothing is shipped from it."""
        async with self.db.read() as tx:
            raw = await Stored.state(tx, self.key)
        state = State() if raw is None else _decoder.decode(raw)
        signer = self.db.signer
        if raw is not None and (
            signer is None
            or not signer.valid(DEVICE_CURSORS, {**cursor_of(self.key, state), "mac": state.mac})
        ):
            failed(DEVICE_CURSORS, f"the cursor of the {self.device.kind} audit device")
            self.seen = (State(fail_ms=now_ms(), error="its cursor fails its MAC"), now_ms())
            raise ForgedCursor(f"the cursor of the {self.device.kind} audit device fails its MAC")
        self.seen = (state, now_ms())
        return raw, state

    async def _swap(self, old: bytes | None, new: State) -> bytes | None:
        """`new` in place of `old`; its bytes, or None when another process was first."""
        signer = self.db.signer
        if signer is not None:
            new = msgspec.structs.replace(
                new, mac=signer.mac(DEVICE_CURSORS, cursor_of(self.key, new))
            )
        raw = msgspec.json.encode(new)
        async with self.db.write() as tx:
            done = await Stored.swap(tx, self.key, old, raw)
        if done:
            self.seen = (new, now_ms())
        return raw if done else None

    async def round(self) -> int:
        """Ship what is due (a few batches at most); how many events were delivered."""
        shipped = 0
        for _ in range(ROUND_BATCHES):
            delivered = await self._batch()
            shipped += delivered
            if delivered < BATCH:
                break
        return shipped

    async def _batch(self) -> int:
        raw, state = await self._read()
        now = now_ms()
        mine = state.owner == self.owner
        if (not mine and state.until > now) or now < state.next_ms:
            return 0  # another process ships it, or it is backing off
        due = await self._due(state, now)
        mark = await self._mark(due, state)
        probe = (
            self.probe
            and not due.rows
            and mark is None
            and now - max(state.ok_ms, state.fail_ms) >= PROBE_MS
        )
        unchanged = due.gaps == state.gaps and due.through == state.through
        quiet = not due.rows and not probe and unchanged and mark is None
        if quiet and mine and state.until - now > LEASE_MS // 2:
            return 0  # nothing to deliver, nothing to write
        claimed = msgspec.structs.replace(state, owner=self.owner, until=now + LEASE_MS)
        held = await self._swap(raw, claimed)
        if held is None:
            return 0  # another process took it first
        if quiet:
            return 0
        error = None
        try:
            if due.rows or mark is not None:
                await self.device.send(due.rows, mark[0] if mark is not None else None)
            elif probe:
                await self.device.probe()
        except DeliveryFailed as exc:
            error = str(exc)
        at = now_ms()
        if error is None and mark is not None:
            self.marked = mark[1]
        if error is None:
            done = msgspec.structs.replace(
                claimed,
                through=due.through,
                gaps=due.gaps,
                failures=0,
                next_ms=0,
                error="",
                ok_ms=at if (due.rows or probe or mark is not None) else claimed.ok_ms,
                shipped=claimed.shipped + len(due.rows),
                until=at + LEASE_MS,
            )
        else:
            failures = claimed.failures + 1
            done = msgspec.structs.replace(
                claimed,
                fail_ms=at,
                error=error,
                failures=failures,
                next_ms=at + backoff_ms(failures),
            )
            log.warning(
                "audit device %s: delivery failed (%s, %d in a row); next try in %d ms",
                self.device.kind,
                error,
                failures,
                backoff_ms(failures),
            )
        if await self._swap(held, done) is None:
            log.warning(
                "audit device %s: another process took the lease during a delivery; "
                "its %d events may arrive twice",
                self.device.kind,
                len(due.rows),
            )
            return 0
        return len(due.rows) if error is None else 0

    async def _mark(
        self, due: Due, state: State
    ) -> tuple[dict[str, Any], dict[str, Position]] | None:
        """The checkpoint to deliver with this batch (and the positions it holds), when
        a position moved since the last one delivered; None without the integrity key,
        or when nothing can have moved (no events, and the chain linked what left)."""
        signer = self.db.signer
        if signer is None:
            return None
        if not due.rows and self.marked is not None and self.linked >= state.through:
            return None
        held, self.linked = await positions(self.db, signer)
        if held == self.marked:
            return None
        return record(signer, held), held

    async def _due(self, state: State, now: int) -> Due:
        """The rows past the cursor, and those of its gaps that have committed since;
        the cursor and gaps once they are delivered."""
        gaps = {gap: seen for gap, seen in state.gaps if now - seen < SETTLE_MS}
        async with self.db.read() as tx:
            late = await Stored.of(tx, sorted(gaps)[:BATCH]) if gaps else []
            fresh = await Stored.after(tx, state.through, BATCH - len(late))
        for row in late:
            del gaps[row["id"]]
        expected = state.through + 1
        for row in fresh:
            for skipped in range(max(expected, row["id"] - MAX_GAPS), row["id"]):
                gaps[skipped] = now
            expected = row["id"] + 1
        if len(gaps) > MAX_GAPS:  # the oldest go: at most MAX_GAPS followed
            gaps = dict(sorted(gaps.items())[-MAX_GAPS:])
        rows = sorted([*late, *fresh], key=lambda r: int(r["id"]))
        through = int(fresh[-1]["id"]) if fresh else state.through
        return Due(rows, through, sorted(gaps.items()))


class AuditDevices:
    """The devices the settings name, their shippers and the AUDIT_REQUIRED check."""

    def __init__(self, db: Backend, settings: Settings) -> None:
        self.required = settings.audit_required
        owner = uuid.uuid4().hex
        devices: list[Device] = []
        if settings.audit_file is not None:
            devices.append(FileDevice(settings.audit_file))
        if settings.audit_syslog is not None:
            devices.append(SyslogDevice(settings.audit_syslog, settings.audit_syslog_facility))
        if settings.audit_http_url is not None:
            auth = settings.audit_http_authorization
            devices.append(
                HttpDevice(settings.audit_http_url, auth.get_secret_value() if auth else None)
            )
        self.shippers = [Shipper(db, d, owner, probe=self.required) for d in devices]

    def available(self) -> bool:
        """Whether a request may go on: AUDIT_REQUIRED is off, or a device that confirms
        delivery is healthy (as this process last read its record: at most a second
        old while the shippers run)."""
        if not self.required:
            return True
        now = now_ms()
        return any(s.healthy(now) for s in self.shippers if s.device.confirms)
