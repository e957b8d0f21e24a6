"""Which build this is: the version, and the git commit it was built from when known.

The commit comes from CHAINKEYS_COMMIT (set by the Dockerfile's build argument, or a
packager), else from the git checkout the code runs from (read from `.git`, no git
command), else it is unknown. Read once.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path


@functools.cache
def commit() -> str | None:
    given = os.environ.get("CHAINKEYS_COMMIT", "").strip()
    if given:
        return given[:40]
    for parent in Path(__file__).resolve().parents:
        git = parent / ".git"
        if git.is_dir():
            return _head(git)
        if git.is_file():  # a worktree: "gitdir: <its directory in the main .git>"
            text = git.read_text().strip()
            if text.startswith("gitdir: "):
                return _head(Path(text[8:]))
    return None


def _head(git: Path) -> str | None:
    try:
        head = (git / "HEAD").read_text().strip()
        if not head.startswith("ref: "):
            return head[:40] or None
        ref = head[5:]
        # a linked worktree keeps HEAD of its own and the refs in the shared directory
        common = git / "commondir"
        shared = (git / common.read_text().strip()).resolve() if common.is_file() else git
        for where in (git, shared):
            if (where / ref).is_file():
                return (where / ref).read_text().strip()[:40]
        for line in (shared / "packed-refs").read_text().splitlines():
            sha, _, name = line.partition(" ")
            if name == ref:
                return sha[:40]
    except OSError:
        return None
    return None
