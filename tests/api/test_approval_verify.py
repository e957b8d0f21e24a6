"""`chainkeys approval verify FILE` (in process) on approvals as `GET /approvals/{id}`
gives them, through real HTTP on both engines: an honest approval of every kind of
every family is accepted; a tampered request, summary or digest is named."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.api.test_sign_cosmos import PRIVATE
from tests.api.test_sign_eos import NAME
from tests.api.test_sign_properties import KINDS, Target, target
from tests.api.test_sign_utxo import KEY
from tests.conftest import Server, chainkeys_cli

__all__ = ["target"]  # the module fixture: one request every kind signs
FAMILIES = ("cosmos", "eos", "litecoin", "dogecoin")
POLICY = [
    {"family": f, "raw_messages": True, "approval": {"quorum": 1, "group": "g"}} for f in FAMILIES
]


@pytest.fixture(scope="module")
def waiting(server: Server, target: Target) -> Iterator[dict[str, dict[str, Any]]]:
    """An approval of every kind's request, as its requester reads it."""
    assert server.services is not None
    name = "verify-" + server.new_token()[-8:].lower()
    client = server.client(server.new_token(name))
    made = [
        client.post("/cosmos", json={"private_key": PRIVATE}),
        client.post("/eos", json={"private_key": PRIVATE, "name": NAME}),
        client.post("/litecoin", json={"private_key": KEY["private_key_hex"]}),
        client.post("/dogecoin", json={"private_key": KEY["private_key_hex"]}),
    ]
    assert all(r.status_code == 200 for r in made), [r.text for r in made]
    server.call(server.services.policies.set(name, json.dumps({"rules": POLICY}), "json"))
    found = {}
    for kind in KINDS:
        ep = target.endpoints[kind]
        r = client.post(ep.path, json=ep.body)
        assert r.status_code == 202, (kind, r.text)
        got = client.get(f"/approvals/{r.json()['data']['id']}")
        found[kind] = got.json()
    yield found
    client.close()


def verify(tmp_path: Path, document: Any) -> tuple[int, str]:
    path = tmp_path / "approval.json"
    path.write_text(json.dumps(document))
    done = chainkeys_cli("approval", "verify", str(path))  # its context kept in the call
    return done.returncode, done.stdout + done.stderr


@pytest.mark.parametrize("kind", KINDS)
def test_an_honest_approval_is_accepted(
    waiting: dict[str, dict[str, Any]], kind: str, tmp_path: Path
) -> None:
    document = waiting[kind]
    assert document["data"]["request"] is not None and "signer" in document["data"]
    code, out = verify(tmp_path, document)
    assert code == 0 and ": ok:" in out, out
    assert verify(tmp_path, document["data"])[0] == 0  # the approval alone, without envelope


def test_tampering_is_named(waiting: dict[str, dict[str, Any]], tmp_path: Path) -> None:
    honest = waiting["sign-transfer"]["data"]
    shown = copy.deepcopy(honest)
    shown["summary"]["items"][0]["amounts"][0]["display"] = "0.009 ATOM"
    code, out = verify(tmp_path, shown)
    assert code == 1 and "summary.items[0].amounts[0].display" in out and "0.009 ATOM" in out
    digest = {**honest, "digest": "00" * 32}
    code, out = verify(tmp_path, digest)
    assert code == 1 and "digest: the file says " + "00" * 32 in out
    request = copy.deepcopy(honest)
    request["request"]["amount"] = str(int(request["request"]["amount"]) + 1)
    code, out = verify(tmp_path, request)
    assert code == 1 and "digest:" in out and "summary.items[0].amounts[0].amount" in out, out
    raw = copy.deepcopy(waiting["sign-raw-transaction"]["data"])
    raw["summary"]["items"][0]["recipient"] = "DAttackerAddressXXXXXXXXXXXXXXXXXX"
    code, out = verify(tmp_path, raw)
    assert code == 1 and "summary.items[0].recipient" in out, out
    code, out = verify(tmp_path, {"id": "apr_x"})
    assert code == 1 and "not an approval" in out


def test_the_approval_carries_its_raw_request(
    waiting: dict[str, dict[str, Any]], target: Target
) -> None:
    """The request as the server read it: every field sent, with the defaults it filled."""
    for kind in KINDS:
        assert _holds(waiting[kind]["data"]["request"], target.endpoints[kind].body), kind


def _holds(read: Any, sent: Any) -> bool:
    if isinstance(sent, dict):
        return isinstance(read, dict) and all(_holds(read.get(k), v) for k, v in sent.items())
    if isinstance(sent, list):
        return (
            isinstance(read, list)
            and len(read) == len(sent)
            and all(_holds(r, s) for r, s in zip(read, sent, strict=True))
        )
    return bool(read == sent)
