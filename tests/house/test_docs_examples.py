"""docs/signing.md's runnable examples, run as a reader runs them: each `runnable` shell
block through bash and curl against a real server (both engines), each answer compared
with the one the page shows (`…` stands for a value that varies), each signature checked
by an independent implementation (bitcoinjs-lib signs the same PSBT with the same key and
must give the same transaction; @wharfkit/antelope verifies the EOS signature). The page's
examples must import public test keys only (tests/chains/vectors/vectors.json)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import ROOT, Server
from tests.node import REQUIRE_NODE, require_node, run_node

DOC = ROOT / "docs/signing.md"
VECTORS = json.loads((ROOT / "tests/chains/vectors/vectors.json").read_text())
FAMILIES = ("dogecoin", "eos", "litecoin")  # every family whose signing had no example
EXAMPLE = re.compile(r"<!-- runnable: (\w+) -->\n```sh\n(.*?)```.*?```json\n(.*?)```", re.DOTALL)
ANY = "…"  # in a shown answer: a value that varies (created_at)


def examples(path: Path = DOC) -> dict[str, tuple[str, list[Any]]]:
    """family -> (its shell block, the answers shown after it, in order)."""
    found: dict[str, tuple[str, list[Any]]] = {}
    for family, script, shown in EXAMPLE.findall(path.read_text()):
        assert family not in found, f"two runnable examples for {family}"
        found[family] = (script, documents(shown))
    return found


def documents(text: str) -> list[Any]:
    """The JSON documents in `text`, one after another (curl's answers, or the page's)."""
    decoder = json.JSONDecoder()
    out: list[Any] = []
    at = 0
    while (at := len(text) - len(text[at:].lstrip())) < len(text):
        value, at = decoder.raw_decode(text, at)
        out.append(value)
    return out


def same(got: Any, shown: Any, where: str = "$") -> None:
    """`got` is the answer `shown`: the same fields and values, `…` matching any text."""
    if shown == ANY:
        assert isinstance(got, str), f"{where}: {got!r}"
    elif isinstance(shown, dict):
        assert isinstance(got, dict) and got.keys() == shown.keys(), f"{where}: {got!r}"
        for key, value in shown.items():
            same(got[key], value, f"{where}.{key}")
    elif isinstance(shown, list):
        assert isinstance(got, list) and len(got) == len(shown), f"{where}: {got!r}"
        for i, (g, s) in enumerate(zip(got, shown, strict=True)):
            same(g, s, f"{where}[{i}]")
    else:
        assert got == shown, f"{where}: {got!r} != {shown!r}"


def test_every_family_without_one_has_a_runnable_example() -> None:
    assert sorted(examples()) == list(FAMILIES)


def test_the_parser_finds_what_the_page_shows(tmp_path: Path) -> None:
    """A page whose answer differs from the run fails: the comparison bites."""
    page = tmp_path / "page.md"
    page.write_text('<!-- runnable: x -->\n```sh\necho\n```\ntext\n```json\n{"a": "…"}\n[1]\n```\n')
    assert examples(page) == {"x": ("echo\n", [{"a": ANY}, [1]])}
    same({"a": "2026"}, {"a": ANY})
    for got in ({"a": 1}, {"a": "x", "b": 1}, {}):
        with pytest.raises(AssertionError):
            same(got, {"a": ANY})


def test_every_key_the_examples_import_is_a_public_test_key() -> None:
    """Never a key that could hold funds: each is one of the vectors' (known to all)."""
    for family, (script, _) in examples().items():
        [key] = re.findall(r'"private_key":"([^"]+)"', script)
        assert vectors_key(key), f"{family}: the example imports a key that is not test data"


def vectors_key(text: str) -> str | None:
    """The hex private key of the vectors' entry that holds `text` in any form."""

    def strings(node: Any) -> set[str]:
        if isinstance(node, dict):
            return {s for v in node.values() for s in strings(v)}
        return {node} if isinstance(node, str) else set()

    for entry in VECTORS["keys"]:
        if text in strings(entry):
            return str(entry["private_key_hex"])
    return None


def run(server: Server, script: str) -> list[Any]:
    """The block run by bash as pasted, with CK and TOKEN set: the answers it printed."""
    if shutil.which("curl") is None:
        why = "curl is not installed (apt-get install curl)"
        if REQUIRE_NODE:  # CI: the external tools the tests need are there
            pytest.fail(why)
        pytest.skip(why)
    env = {**os.environ, "CK": server.base_url, "TOKEN": server.new_token()}
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return documents(done.stdout)


@pytest.mark.parametrize("family", FAMILIES)
def test_the_example_answers_what_the_page_shows(server: Server, family: str) -> None:
    require_node()
    script, shown = examples()[family]
    answers = run(server, script)
    assert len(answers) == len(shown), answers
    for got, want in zip(answers, shown, strict=True):
        same(got, want)
    imported, signed = answers[0], answers[-1]
    assert signed["success"] is True and signed["message"] == "signed", signed
    [key] = re.findall(r'"private_key":"([^"]+)"', script)
    network = f"{family}/{imported['data']['network']}"
    if family == "eos":
        [chain] = re.findall(r'"chainId":"([0-9a-f]{64})"', script)
        [sig] = signed["data"]["signatures"]
        check = run_node(
            "eos.mjs",
            {
                "action": "verify_tx",
                "chainId": chain,
                "signature": sig,
                "serializedTransaction": signed["data"]["serializedTransaction"],
                "publicKey": imported["data"]["public_key"],
            },
        )
        assert check["valid"] and check["canonical"], check
        assert {p[0] for a in check["actions"] for p in a["authorization"]} == {imported["address"]}
    else:
        [psbt] = re.findall(r'"psbt":"([^"]+)"', script)
        theirs = run_node(
            "utxo.mjs",
            {
                "action": "sign_psbt",
                "network": network,
                "psbt": psbt,
                "privateKey": vectors_key(key),
            },
        )
        assert signed["data"]["complete"] is True
        assert (signed["data"]["hex"], signed["data"]["txid"]) == (theirs["hex"], theirs["txid"])
