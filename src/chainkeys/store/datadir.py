"""The data directory and the SQLite file, made private before the store opens them."""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

from chainkeys.config import Settings

log = logging.getLogger("chainkeys")


def prepare_data_dir(settings: Settings) -> None:
    """The data directory (0700 when made here) and the SQLite file, created 0600
    whatever the umask or the directory's mode: its WAL and SHM files take the
    database file's mode. A directory others can read is worth a warning."""
    data_dir = settings.data_dir
    data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    mode = stat.S_IMODE(data_dir.stat().st_mode)
    if mode & 0o077:
        log.warning(
            "data directory %s is readable by others (mode %o); chmod 700 it",
            data_dir,
            mode,
        )
    for path in (settings.sqlite_path, *_sqlite_companions(settings.sqlite_path)):
        if path == settings.sqlite_path and not path.exists():
            os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
        if path.exists() and stat.S_IMODE(path.stat().st_mode) != 0o600:
            path.chmod(0o600)


def _sqlite_companions(db: Path) -> tuple[Path, Path]:
    return db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm")
