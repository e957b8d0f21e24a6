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


def configure(level: str = "INFO", json_lines: bool = False) -> None:
    handler = BufferedStderrHandler()
    if json_lines:
        handler.setFormatter(JSONFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
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
