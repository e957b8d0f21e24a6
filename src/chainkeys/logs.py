"""Logging setup: plain or JSON lines. Nothing logged carries a secret:
handlers log method, path, status and request id, never headers or bodies."""

from __future__ import annotations

import logging
import logging.config
import os
import re
import sys
import threading
import time
from contextvars import ContextVar
from typing import Any, TextIO
from urllib.parse import quote

import msgspec

# Set by the API for each request; read by the audit log and log lines. The
# request id is always the server's own; a client's X-Request-ID is kept apart.
request_id: ContextVar[str | None] = ContextVar("request_id", default=None)
client_request_id: ContextVar[str | None] = ContextVar("client_request_id", default=None)


class JSONFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        fields = getattr(record, "fields", None)
        if fields is not None:
            entry["message"] = "request"
            entry.update(fields)
        else:
            rid = request_id.get()
            if rid:
                entry["request_id"] = rid
        return msgspec.json.encode(entry).decode()


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
        self._own = stream is not sys.stderr  # the copy is this handler's to close
        self._stopped = threading.Event()
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
        while not self._stopped.wait(self.FLUSH_SECONDS):
            with self.lock:  # type: ignore[union-attr]
                if not self._stopped.is_set():
                    self.flush()

    def close(self) -> None:
        """Flushed, its flushing thread ended and its copy of stderr closed: a handler
        replaced (a new logging set-up, a command run inside another program) leaves
        no thread and no open descriptor behind."""
        with self.lock:  # type: ignore[union-attr]
            self._stopped.set()
            self.flush()
            if self._own and not self.stream.closed:
                self.stream.close()
        super().close()


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


_LOG_SAFE = "/:@!$&'()*+,;=-._~?[]"
_ALL_SAFE = re.compile(r"[A-Za-z0-9" + re.escape(_LOG_SAFE) + r"]*")


def _field(text: str, limit: int = 200) -> str:
    """A logged value made harmless: no control characters, spaces or non-ASCII
    (percent-encoded), so no request can forge or split a log line. Text that is
    already all safe characters (nearly every path) is returned as it is."""
    text = text[:limit]
    if _ALL_SAFE.fullmatch(text) is not None:
        return text
    return quote(text, safe=_LOG_SAFE)


def access(
    scope: Any,
    status: int,
    ms: float,
    rid: str,
    client_rid: str | None = None,
    token_id: str | None = None,
) -> None:
    """One access line: request id, method, path, status, time, token id (never the
    token), client address and the client's own request id. Never headers or bodies."""
    if not access_log.isEnabledFor(logging.INFO):
        return
    client = scope.get("client")
    fields = {
        "request_id": rid,
        "method": _field(scope["method"], 20),
        "path": _field(scope["path"]),
        "status": status,
        "duration_ms": round(ms, 1),
        "token_id": token_id,
        "client": f"{_field(str(client[0]), 64)}:{client[1]}" if client else None,
        "client_request_id": client_rid,
    }
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
        access_log.info(_plain_access(fields), extra={"fields": fields})
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
    if _Direct.json_lines:
        entry = {
            "time": f"{_Direct._stamp}.{msecs:03d}Z",
            "level": "info",
            "logger": "chainkeys.access",
            "message": "request",
            **fields,
        }
        line = msgspec.json.encode(entry).decode()
    else:
        line = f"{_Direct._stamp},{msecs:03d} INFO chainkeys.access {_plain_access(fields)}"
    with handler.lock:  # type: ignore[union-attr]
        handler.stream.write(line + "\n")


def _plain_access(f: dict[str, Any]) -> str:
    line = f"{f['method']} {f['path']} {f['status']} {f['duration_ms']:.1f}ms rid={f['request_id']}"
    for name in ("token_id", "client", "client_request_id"):
        if f[name]:
            line += f" {name}={f[name]}"
    return line


def make_handler(json_lines: bool = False) -> BufferedStderrHandler:
    """The one handler every chainkeys process logs through (also named in
    `dict_config`, which the HTTP server applies in its own processes)."""
    handler = BufferedStderrHandler()
    handler.setFormatter(JSONFormatter() if json_lines else logging.Formatter(PLAIN_FORMAT))
    _Direct.handler, _Direct.json_lines, _Direct._second = handler, json_lines, -1
    return handler


def dict_config(level: str = "INFO", json_lines: bool = False) -> dict[str, Any]:
    """logging.config.dictConfig form of `configure`: the server's own loggers
    (Granian's) go to the same stderr handler and format as ours."""
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {},
        "handlers": {"chainkeys": {"()": make_handler, "json_lines": json_lines}},
        "root": {"handlers": ["chainkeys"], "level": level.upper()},
        "loggers": {
            "_granian": {"handlers": [], "level": "INFO", "propagate": True},
            # Alembic's plugin set-up and each migration are details (DEBUG shows them);
            # chainkeys.store logs one summary line at INFO.
            "alembic": {
                "handlers": [],
                "propagate": True,
                "level": "DEBUG" if level.upper() == "DEBUG" else "WARNING",
            },
            # The server's own access log would repeat ours.
            "granian.access": {"handlers": [], "level": "CRITICAL", "propagate": False},
        },
    }


def configure(level: str = "INFO", json_lines: bool = False) -> None:
    logging.config.dictConfig(dict_config(level, json_lines))


def flush() -> None:
    """Write out buffered lines (at shutdown: the server may end on the signal
    itself, so atexit's logging.shutdown() may never run)."""
    for handler in logging.getLogger().handlers:
        handler.flush()


# A forked child (Granian's worker) would inherit lines still in the buffer and write
# them again: flush before every fork.
os.register_at_fork(before=flush)
