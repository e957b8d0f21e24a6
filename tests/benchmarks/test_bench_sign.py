"""The signing benchmark stays runnable: `python -m bench.sign --quick` end to end (every
scenario signs, with and without a policy). Needs wrk; skips with the install command
without it. Apart from test_bench_quick.py so the two run on different workers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from bench import wrk

pytestmark = pytest.mark.long(35)  # seconds (busy run): scheduled first

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_quick_sign_benchmark_runs(tmp_path: Path) -> None:
    try:
        wrk.ensure_wrk()
    except RuntimeError as exc:
        pytest.skip(str(exc))
    done = subprocess.run(
        [sys.executable, "-m", "bench.sign", "--quick", "--out", str(tmp_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    doc = json.loads((tmp_path / "sign.json").read_text())
    names = [row[0] for row in doc["rows"]]
    assert names == [
        "sign derived vs stored key",
        "derive next index vs create",
        "cosmos-transfer policy vs none",
        "10 rules with conditions vs without",
    ]
    assert all(row[1] > 0 and row[2] > 0 for row in doc["rows"])  # every scenario signed
