"""How chainkeys is served: Granian's public API, with every bound of the HTTP layer.

Granian (hyper underneath) bounds what the application never sees: the request
head's size (`MAX_HEAD_BYTES`, 431 above it, pipelined heads included) and
header count (100), and a deadline for the head (`head_timeout_seconds`; an
idle kept-alive connection is closed after it too). The body's size and
deadline are enforced in `api/transport.py`. What belongs to the TLS
terminator in front is listed in docs/deploy.md.
"""

from __future__ import annotations

from typing import Any

from granian.constants import HTTPModes, Interfaces, Loops
from granian.http import HTTP1Settings

from chainkeys.config import Settings

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


def serve(settings: Settings, workers: int) -> None:
    """Run the API in `workers` processes until SIGINT/SIGTERM."""
    from granian import Granian

    Granian(
        "chainkeys.api.app:app_factory",
        factory=True,
        address=settings.host,
        port=settings.port,
        workers=workers,
        loop=Loops.auto,
        log_dictconfig={"version": 1, "disable_existing_loggers": False},
        **options(settings),
    ).serve()
