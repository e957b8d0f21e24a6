"""Logging setup: plain or JSON lines. Nothing logged carries a secret:
handlers log method, path, status and request id, never headers or bodies."""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
import time
from contextvars import ContextVar
from typing import TextIO

# Set by the API middleware for each request; read by the audit log and log lines.
request_id: ContextVar[str | None] = ContextVar("request_id", default=None)


class JSONFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        rid = getattr(record, "request_id", None) or request_id.get()
        if rid:
            entry["request_id"] = rid
        return json.dumps(entry)


class BufferedStderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """stderr without a flush per record: access lines are many and small.

    Warnings and errors are flushed at once; the rest at most FLUSH_SECONDS
    later (a daemon thread), and at exit through logging.shutdown().
    """

    FLUSH_SECONDS = 0.5

    def __init__(self) -> None:
        # sys.stderr is line-buffered (a write per line): keep a block-buffered copy.
        stream: TextIO
        try:
            stream = open(os.dup(sys.stderr.fileno()), "w", buffering=1 << 16, encoding="utf-8")  # noqa: SIM115
        except (OSError, ValueError, AttributeError):  # no real fd (e.g. captured)
            stream = sys.stderr
        super().__init__(stream)
        self._flusher = threading.Thread(target=self._flush_often, daemon=True)
        self._flusher.start()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.stream.write(self.format(record) + self.terminator)
            if record.levelno >= logging.WARNING:
                self.flush()
        except Exception:
            self.handleError(record)

    def _flush_often(self) -> None:
        while True:
            time.sleep(self.FLUSH_SECONDS)
            self.flush()


PLAIN_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"
access_log = logging.getLogger("chainkeys.access")


class _Direct:
    """The handler `configure` installed: access lines go straight to its stream.

    A LogRecord, its caller lookup and the formatter cost ~20 µs, as much as the
    rest of a lookup request; an access line written here costs ~2 µs and reads
    the same as the formatter's. Any other logging set-up (an embedding app's,
    pytest's) takes the ordinary `logging` path instead.
    """

    handler: BufferedStderrHandler | None = None
    json_lines = False
    _second = -1
    _stamp = ""


def access(method: str, path: str, status: int, ms: float, rid: str) -> None:
    """One access line: method, path, status and time (never headers or bodies)."""
    if not access_log.isEnabledFor(logging.INFO):
        return
    handler = _Direct.handler
    root = logging.root
    if (
        handler is None
        or access_log.handlers
        or access_log.filters
        or not access_log.propagate
        or len(root.handlers) != 1
        or root.handlers[0] is not handler
    ):
        access_log.info("%s %s %d %.1fms", method, path, status, ms, extra={"request_id": rid})
        return
    now = time.time()
    second = int(now)
    if second != _Direct._second:
        _Direct._second = second
        fmt = "%Y-%m-%dT%H:%M:%S" if _Direct.json_lines else "%Y-%m-%d %H:%M:%S"
        _Direct._stamp = time.strftime(
            fmt, (time.gmtime if _Direct.json_lines else time.localtime)(now)
        )
    msecs = int((now - second) * 1000)
    message = f"{method} {path} {status} {ms:.1f}ms"
    if _Direct.json_lines:
        entry = {"time": f"{_Direct._stamp}.{msecs:03d}Z", "level": "info",
                 "logger": "chainkeys.access", "message": message, "request_id": rid}  # fmt: skip
        line = json.dumps(entry)
    else:
        line = f"{_Direct._stamp},{msecs:03d} INFO chainkeys.access {message}"
    with handler.lock:  # type: ignore[union-attr]
        handler.stream.write(line + "\n")


def configure(level: str = "INFO", json_lines: bool = False) -> None:
    handler = BufferedStderrHandler()
    if json_lines:
        handler.setFormatter(JSONFormatter())
    else:
        handler.setFormatter(logging.Formatter(PLAIN_FORMAT))
    _Direct.handler, _Direct.json_lines, _Direct._second = handler, json_lines, -1
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # uvicorn's access log repeats ours; its error log stays.
    logging.getLogger("uvicorn.access").disabled = True


def flush() -> None:
    """Write out buffered lines (at shutdown: uvicorn ends on the signal itself,
    so atexit's logging.shutdown() may never run)."""
    for handler in logging.getLogger().handlers:
        handler.flush()
