"""The benchmark stays runnable: its --quick mode end to end, and a fair baseline.

The full benchmark (`python -m bench`, ~30 min) stays out of CI; this runs the
quick one (~40 s) once (the signing benchmark: test_bench_sign.py). They need wrk,
which nothing here installs: without it they skip naming the install command
(`.ci/run` installs it, so in CI they run).
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
from bench import lean, wrk
from bench.baseline import account_of
from tests.conftest import REQUIRE_PG

from chainkeys.chains.registry import FAMILIES
from chainkeys.chains.secp256k1 import key_from_secret

pytestmark = pytest.mark.long(125)  # seconds (busy run): scheduled first

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_baseline_computes_what_chainkeys_computes(family: str) -> None:
    """Same key in, same name, public key, extra and exported key out: the same work."""
    fam = FAMILIES[family]
    network = fam.network(None)
    for _ in range(20):
        secret = secrets.token_bytes(31).rjust(32, b"\0")  # below the curve order
        key = key_from_secret(secret)
        options = fam.options({}, key)
        account = fam.account(key, network, options)
        name, public_key, extra, private = account_of(family, secret)
        assert (name, public_key, extra) == (account.name, account.public_key, dict(account.extra))
        assert private == fam.export_private_key(key, network)
    assert lean.b58encode(b"\0\0\1") == "112"


@pytest.mark.slow
def test_quick_benchmark_runs(tmp_path: Path) -> None:
    try:
        wrk.ensure_wrk()
    except RuntimeError as exc:
        pytest.skip(str(exc))
    out = tmp_path / "results"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench",
            "--quick",
            "--out",
            str(out),
            "--postgres",
            "require" if REQUIRE_PG else "auto",
        ],
        cwd=REPO,
        env={**os.environ, "BENCH_TMPDIR": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    doc = json.loads((out / "results.json").read_text())
    results = doc["results"]
    assert {"chainkeys", "baseline"} <= {r["impl"] for r in results}
    ran = {r["scenario"] for r in results if r["impl"] == "chainkeys"}
    assert {
        "get",
        "list-first",
        "list-deep",
        "mixed",
        "import",
        "create-cosmos",
        "create-dogecoin",
        "create-eos",
        "create-litecoin",
        "sign-cosmos-transfer",
        "sign-cosmos-message",
        "sign-dogecoin-message",
        "sign-eos-message",
        "sign-litecoin-message",
    } <= ran
    for r in results:
        where = f"{r['impl']} {r['config']} {r['scenario']}"
        assert r["requests"] > 0, where
        assert sum(r["errors"].values()) == 0, f"{where}: {r['errors']}"
        assert r["rss_peak_mb"] > 0, where
        if r["impl"] == "chainkeys" and r["backend"] == "sqlite":
            assert r["ratio"]["rps"] > 0, where
    # The baseline answers exactly as chainkeys does (signatures included), or its ratios
    # mean nothing.
    assert doc["parity"], "no parity check ran"
    assert "sign-cosmos-transfer" in doc["parity"]["sqlite-200-w1-FULL"]
    for config, checks in doc["parity"].items():
        assert all(checks.values()), f"baseline and chainkeys differ in {config}: {checks}"
    names = {t["name"] for t in doc["targets"]}
    assert any(n.startswith("get >= 0.9") for n in names) and any("RSS" in n for n in names)
    assert any(n.startswith("sign >= 0.7") for n in names)
    table = (out / "results.md").read_text()
    assert "| sqlite-200-w1-FULL | get |" in table
