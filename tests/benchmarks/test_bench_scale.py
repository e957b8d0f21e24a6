"""The growth benchmark stays runnable: `python -m bench.scale` end to end at a tiny size
(2,000 accounts over 4 tenants, 5,000 audit rows, SQLite): every metric measured, each
positive, each ratio there. Its figures mean nothing at this size."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.long(30)  # seconds (measured: 14 s beside a CI run, 30 s at load 8)

REPO = Path(__file__).resolve().parents[2]
METRICS = [
    "get (µs, median)",
    "sign (µs, median)",
    "list-first (µs, median)",
    "list-deep (µs, median)",
    "create (µs, median)",
    "start (ms, median)",
    "audit verify (rows/s)",
    "db copy (rows/s)",
    "db copy (s)",
    "disk (bytes/account)",
    "disk (bytes/audit row)",
]


def test_scale_benchmark_runs(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.scale",
            "--accounts",
            "2000",
            "--tenants",
            "4",
            "--audit-rows",
            "5000",
            "--engine",
            "sqlite",
            "-n",
            "20",
            "--rounds",
            "2",
            "--out",
            str(tmp_path),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    doc = json.loads((tmp_path / "scale.json").read_text())
    result = doc["engines"]["sqlite"]
    assert result["sizes"]["filled"] == {"accounts": 2000, "tenants": 4, "audit_rows": 5000}
    rows = {row[0]: row[1:] for row in result["rows"]}
    assert list(rows) == METRICS
    for metric, (empty, filled, ratio) in rows.items():
        assert empty > 0 and filled > 0, metric
        if metric != "db copy (s)":  # a time, not a cost per item: no ratio
            assert ratio is not None and ratio > 0, metric
    assert isinstance(result["grows_too_fast"], list)
    assert "grows too fast:" in done.stdout
