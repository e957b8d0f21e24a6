"""schemathesis' own runner (`st run`) against a live server, every phase.

Run against a server with export enabled and a token of every scope: the examples,
coverage, fuzzing and stateful phases, with a fresh seed each run (printed), the checks
not_a_server_error, positive_data_acceptance, status_code_conformance,
content_type_conformance and response_schema_conformance. Valid addresses and cursors
for the formats the document names (addresses, keys, public keys, xpubs, mnemonics,
cursors) come from tests/fuzz/fuzz_formats.py (the hooks, tests/fuzz/fuzz_hooks.py).
positive_data_acceptance (a schema-valid request is never a 400) holds whole for every
operation but those tests/fuzz/fuzz_rules.py's BEYOND_SCHEMA lists, each with the rule no
request schema can state (a transaction parsed whole, fields that must fit each other or
the account) and the codes such a refusal carries: a 400 with any other code fails the
run. Every other check, and every other status of that one, holds everywhere.

One test file per engine (tests/fuzz/test_fuzz_run_sqlite.py, …_postgresql.py): each run
takes minutes, and the suite hands whole files to its workers, so the two run side by
side. The per-operation tests and the checks of our own are tests/fuzz/test_fuzz.py.
"""

from __future__ import annotations

import logging
import os
import re
import secrets
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from tests.conftest import ROOT, Server, own_server
from tests.fuzz.fuzz_rules import rule_for

from chainkeys.api.app import openapi_document
from chainkeys.config import Settings
from chainkeys.tokens.service import SCOPES

RUN_EXAMPLES = 5  # per operation and phase in `st run`
CHECKS = (
    "not_a_server_error,positive_data_acceptance,status_code_conformance,"
    "content_type_conformance,response_schema_conformance"
)


def beyond_schema(operation: str) -> bool:
    return rule_for(operation) is not None


def run_config() -> str:
    """schemathesis' configuration: the checks, and 400 tolerated as an answer to valid
    data only where BEYOND_SCHEMA says, with a code its rule names (the hooks' check)."""
    lines = ["[checks]", "enabled = false"]
    lines += [f"{check}.enabled = true" for check in [*CHECKS.split(","), "beyond_schema_codes"]]
    # a body over the server's cap is a 413 (documented on every operation with a body):
    # no field's schema can say how large a whole body may grow; a 423 once the run's own
    # token froze its tenant (POST /freezes, an approve scope among its scopes)
    valid = '"2xx", "3xx", "401", "403", "404", "409", "413", "423", "429"'
    lines.append(f"positive_data_acceptance.expected-statuses = [{valid}]")
    if os.environ.get("STRICT400"):
        return "\n".join(lines) + "\n"
    for path, item in openapi_document(Settings())["paths"].items():
        for method in item:
            if beyond_schema(f"{method.upper()} {path}"):
                lines += [
                    "",
                    "[[operations]]",
                    f'include-name = "{method.upper()} {path}"',
                    f'checks.positive_data_acceptance.expected-statuses = [{valid}, "400"]',
                ]
    return "\n".join(lines) + "\n"


def every_phase(export_server: Server, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """`st run` with every phase against `export_server`; fails with the seed and the
    failures, or if the server logged an error meanwhile (a refusal whose audit row
    could not be written answers its 400 all the same: only the log tells)."""
    assert export_server.services is not None
    _, token = export_server.call(
        export_server.services.tokens.create(
            f"fuzz-{uuid.uuid4().hex[:8]}", "fuzzer", frozenset(SCOPES), group="ops"
        )
    )
    config = tmp_path / "schemathesis.toml"
    config.write_text(run_config())
    seed = secrets.randbelow(2**31)
    caplog.set_level(logging.WARNING, logger="chainkeys")
    st = Path(sys.executable).parent / "st"
    done = subprocess.run(
        [
            str(st),
            "--config-file",
            str(config),
            "run",
            f"{export_server.base_url}/openapi.json",
            "-H",
            f"Authorization: {token}",
            "--phases",
            "examples,coverage,fuzzing,stateful",
            "-n",
            str(RUN_EXAMPLES),
            "--seed",
            str(seed),
            "--no-color",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env={**os.environ, "SCHEMATHESIS_HOOKS": "tests.fuzz.fuzz_hooks", "PYTHONPATH": str(ROOT)},
    )
    report = done.stdout.replace(token, "[token]")
    failures = report[report.find("FAILURES") : report.find("WARNINGS")][:8000]
    assert done.returncode == 0, f"seed {seed}:\n{failures}\n{done.stderr[-2000:]}"
    selected = re.search(r"Selected: (\d+)/(\d+)", report)
    tested = re.search(r"Tested: (\d+)", report)
    assert selected and tested and selected[1] == selected[2] == tested[1], report[-3000:]
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert not errors, f"seed {seed}: the server logged {errors[:5]}"


def server_on(backend: str) -> Callable[[pytest.TempPathFactory], Iterator[Server]]:
    """The module's `export_server` fixture: a server of its own on `backend`, export on."""

    @pytest.fixture(scope="module")
    def export_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
        with own_server(backend, tmp_path_factory.mktemp("export"), export_enabled=True) as srv:
            yield srv

    return export_server  # type: ignore[no-any-return]
