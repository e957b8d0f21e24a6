"""Another release of chainkeys in the same run: `python -m bench --against REF`.

A yardstick that moves with the code hides a regression (the lean baseline is
rewritten as the code grows), so a benchmark run can also start a git ref of
chainkeys, installed in a venv of its own from a clean export of that commit
(its own pinned dependencies, nothing of the work tree), and take turns with it
under the same load. Its store is its own (an older schema cannot open a newer
one): it gets the same tenant size through its own API, so every figure is
measured against a store of the same shape.

Venvs are kept under `bench/results/refs/<sha>/` (ignored by git) and reused.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import random
import shutil
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench import procs


@dataclass(frozen=True)
class Ref:
    """An installed ref: its short sha and its interpreter."""

    sha: str
    python: str

    @property
    def label(self) -> str:
        return f"ref-{self.sha}"


def install(ref: str, cache: Path, log: Callable[[str], None]) -> Ref:
    """Export `ref` and install it into its own venv (once; reused afterwards)."""
    sha = subprocess.run(
        ["git", "-C", str(procs.REPO), "rev-parse", "--short", ref],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    home = cache / sha
    python = home / "venv" / "bin" / "python"
    stamp = home / "installed"
    if stamp.exists():
        return Ref(sha, str(python))
    shutil.rmtree(home, ignore_errors=True)
    tree = home / "tree"
    tree.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "-C", str(procs.REPO), "archive", "--format=tar", sha],
        capture_output=True,
        check=True,
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    log(f"installing {ref} ({sha}) into its own venv")
    subprocess.run([sys.executable, "-m", "venv", str(home / "venv")], check=True)
    pip = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    lock = tree / "requirements.lock"
    if lock.exists():
        subprocess.run([*pip, "-r", str(lock)], check=True, cwd=tree)
        subprocess.run([*pip, "--no-deps", str(tree)], check=True, cwd=tree)
    else:
        subprocess.run([*pip, str(tree)], check=True, cwd=tree)
    stamp.write_text(sha + "\n")
    return Ref(sha, str(python))


def _cli(
    ref: Ref, data_dir: Path, *args: str, database_url: str | None = None
) -> subprocess.CompletedProcess[str]:
    clean = {
        k: v for k, v in os.environ.items() if not k.startswith(("CHAINKEYS_", "BENCH_", "PYTHON"))
    }
    if database_url is not None:
        clean["CHAINKEYS_DATABASE_URL"] = database_url
    return subprocess.run(
        [ref.python, "-m", "chainkeys.cli", *args, "--data-dir", str(data_dir)],
        capture_output=True,
        text=True,
        env=clean,
        check=False,
        cwd=data_dir,
    )


def token(ref: Ref, data_dir: Path, database_url: str | None = None) -> str:
    """A token of tenant `bench` (a ref that has `chainkeys init` needs it first)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    # older refs have no init: their token command makes the store
    _cli(ref, data_dir, "init", database_url=database_url)
    made = _cli(ref, data_dir, "token", "create", "--tenant", "bench", database_url=database_url)
    if made.returncode != 0:
        raise RuntimeError(f"{ref.label}: token create failed: {made.stderr[-500:]}")
    return made.stdout.strip().splitlines()[-1].strip()


def fill(url: str, token: str, count: int, names_file: Path, sample: int = 20_000) -> None:
    """`count` Cosmos accounts through the ref's own API; a shuffled sample of names."""

    def create(_: int) -> str:
        req = urllib.request.Request(
            f"{url}/cosmos",
            data=b"{}",
            method="POST",
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=30) as resp:
            answer = json.loads(resp.read())
        data = answer["data"]
        return str((data.get("data") or {}).get("address") or data["address"])

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        names = list(pool.map(create, range(count)))
    random.shuffle(names)
    names_file.write_text("\n".join(names[:sample]) + "\n")


def supports(url: str, token: str, method: str, path: str, body: bytes | None) -> bool:
    """Whether the ref has this endpoint (an older release may not sign yet)."""
    req = urllib.request.Request(
        url + path,
        data=body,
        method=method,
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return bool(200 <= resp.status < 300)
    except urllib.error.HTTPError:
        return False
