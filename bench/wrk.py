"""wrk: find or install it, run one load, parse the JSON line its Lua `done` prints."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

LUA_DIR = Path(__file__).parent / "lua"
INSTALL_HINT = "install it with: apt-get install -y wrk  (Debian/Ubuntu package 'wrk')"


def ensure_wrk() -> str:
    """Path to wrk. Never installs anything: .ci/run installs it in CI, people do it
    themselves (the error says how)."""
    found = shutil.which("wrk")
    if found:
        return found
    raise RuntimeError(f"wrk is not installed; {INSTALL_HINT}")


def script(name: str, into: Path) -> Path:
    """common.lua followed by the scenario's script, as one file for `wrk -s`."""
    path = into / f"{name}.lua"
    if not path.exists():
        path.write_text(
            (LUA_DIR / "common.lua").read_text() + "\n" + (LUA_DIR / f"{name}.lua").read_text()
        )
    return path


@dataclass(frozen=True)
class Load:
    requests: int
    seconds: float
    errors: dict[str, int]
    p50_ms: float
    p90_ms: float
    p99_ms: float
    max_ms: float
    mean_ms: float

    @property
    def rps(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0

    @property
    def error_count(self) -> int:
        return sum(self.errors.values())


def run(
    wrk: str,
    url: str,
    lua: Path,
    env: dict[str, str],
    *,
    seconds: float,
    connections: int,
    threads: int = 1,
) -> Load:
    """One wrk run; raises if wrk fails or prints no summary."""
    cmd = [
        wrk,
        f"-t{threads}",
        f"-c{connections}",
        f"-d{max(1, round(seconds))}s",
        "--timeout",
        "10s",
        "-s",
        str(lua),
        url,
    ]
    done = subprocess.run(
        cmd,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=seconds + 60,
        check=False,
    )
    line = next((ln for ln in done.stdout.splitlines() if ln.startswith("BENCHJSON ")), None)
    if done.returncode != 0 or line is None:
        raise RuntimeError(
            f"wrk failed ({done.returncode}): {done.stderr.strip()[:500]} {done.stdout[-500:]}"
        )
    raw: dict[str, Any] = json.loads(line.removeprefix("BENCHJSON "))
    lat = raw["latency_us"]
    # a scenario's own check of an answer wrk counts as a success (a batch's refused item)
    bad = sum(ln == "BENCHBAD" for ln in done.stdout.splitlines())
    return Load(
        requests=raw["requests"],
        seconds=raw["duration_us"] / 1e6,
        errors={**raw["errors"], **({"answer": bad} if bad else {})},
        p50_ms=lat["p50"] / 1000,
        p90_ms=lat["p90"] / 1000,
        p99_ms=lat["p99"] / 1000,
        max_ms=lat["max"] / 1000,
        mean_ms=lat["mean"] / 1000,
    )
