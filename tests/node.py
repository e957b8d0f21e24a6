"""Run the pinned Node reference implementations (tests/verifiers) from the tests.

Each verifier is a script that reads one JSON object on stdin and prints one
JSON object. They are independent implementations (cosmjs, bitcoinjs-lib,
@wharfkit/antelope, eosjs): a signature chainkeys makes is only trusted once
one of them accepts it. Without Node or the installed packages the tests that
need them skip, naming the install command; CI sets
CHAINKEYS_TEST_REQUIRE_NODE=1 so they fail instead.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

VERIFIERS = Path(__file__).resolve().parent / "verifiers"
REQUIRE_NODE = bool(os.environ.get("CHAINKEYS_TEST_REQUIRE_NODE"))
INSTALL = "npm ci --prefix tests/verifiers"


def node_missing() -> str | None:
    """None when the verifiers can run, else why not."""
    if shutil.which("node") is None:
        return "node is not installed (Node 20+: apt-get install nodejs npm)"
    if not (VERIFIERS / "node_modules").is_dir():
        return f"the Node verifiers are not installed: run `{INSTALL}`"
    return None


def require_node() -> None:
    why = node_missing()
    if why is not None:
        if REQUIRE_NODE:
            pytest.fail(why)
        pytest.skip(why)


def run_node(script: str, payload: Any, timeout: float = 60) -> Any:
    """Run `tests/verifiers/<script>` with `payload` as JSON on stdin; its JSON answer."""
    require_node()
    proc = subprocess.run(
        ["node", str(VERIFIERS / script)],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        cwd=VERIFIERS,
    )
    if proc.returncode != 0:
        raise AssertionError(f"{script} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return json.loads(proc.stdout)


REQUIRE_BROWSER = bool(os.environ.get("CHAINKEYS_TEST_REQUIRE_BROWSER"))


def chromium() -> str:
    """The Chromium the page tests drive (Debian's `chromium`; CHAINKEYS_TEST_CHROMIUM
    names another). Missing: skip, or fail where CI requires the browser."""
    require_node()
    found = os.environ.get("CHAINKEYS_TEST_CHROMIUM") or shutil.which("chromium")
    if found is None:
        why = "chromium is not installed (apt-get install chromium)"
        if REQUIRE_BROWSER:
            pytest.fail(why)
        pytest.skip(why)
    return found
