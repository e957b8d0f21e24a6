"""How chainkeys is served: Granian's public API, with every bound of the HTTP layer.

Granian (hyper underneath) bounds what the application never sees: the request
head's size (`MAX_HEAD_BYTES`, 431 above it, pipelined heads included) and
header count (100), and a deadline for the head (`head_timeout_seconds`; an
idle kept-alive connection is closed after it too). The body's size and
deadline are enforced in `api/transport.py`. What belongs to the TLS
terminator in front is listed in docs/deploy.md.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
import sys
import tempfile
from typing import Any

from granian.constants import HTTPModes, Interfaces, Loops
from granian.http import HTTP1Settings

from chainkeys import logs
from chainkeys.config import Settings

PR_SET_PDEATHSIG = 1  # linux/prctl.h
MAX_HEAD_BYTES = 16 * 1024  # request line + headers, as Node and uvicorn's h11 default


def http1(settings: Settings) -> HTTP1Settings:
    return HTTP1Settings(
        header_read_timeout=int(settings.head_timeout_seconds * 1000),
        keep_alive=True,
        max_buffer_size=MAX_HEAD_BYTES,
    )


def options(settings: Settings) -> dict[str, Any]:
    """Granian settings shared by `chainkeys serve` and the test suite's server."""
    return {
        "interface": Interfaces.ASGI,
        "http": HTTPModes.http1,
        "http1_settings": http1(settings),
        "websockets": False,  # an upgrade request is an ordinary request (and refused)
        "log_access": False,  # chainkeys writes its own access line
    }


def die_with_parent() -> None:
    """In a worker: end when the supervising process ends, however it ends.

    Granian runs the app in worker processes; if the supervisor is killed
    (SIGKILL, OOM) a worker would otherwise go on serving on its own.
    """
    if not sys.platform.startswith("linux"):
        return
    parent = os.getppid()
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # the parent died before prctl took effect
        os.kill(os.getpid(), signal.SIGKILL)


def serve(settings: Settings, workers: int) -> None:
    """Run the API in `workers` processes until SIGINT/SIGTERM.

    With several workers, each writes its metrics to a fresh shared directory and
    `/metrics` merges them. The workers are spawned, not forked, so each imports
    prometheus_client afresh with that directory set (it picks its value store
    at import).
    """
    from granian import Granian

    if workers > 1:
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="chainkeys-metrics-")
        multiprocessing.set_start_method("spawn", force=True)

    Granian(
        "chainkeys.api.app:app_factory",
        factory=True,
        address=settings.host,
        port=settings.port,
        workers=workers,
        loop=Loops.auto,
        log_dictconfig=logs.dict_config(settings.log_level, settings.log_json),
        workers_kill_timeout=max(1, round(settings.shutdown_timeout)),
        **options(settings),
    ).serve()
