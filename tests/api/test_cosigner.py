"""The co-signer through real HTTP on both engines: a co-signer the test runs (a small
HTTP server with real HMAC, written as a customer would write one) approves, rejects,
times out, answers unsigned, replays another question's id, signs with a stale `t`,
answers 500, redirects, or answers malformed JSON; only `approve` signs, and every call
and outcome is audited. A rejected signature consumes no cap; a rule may skip the
co-signer; the dry run says it will be asked; an approved request asks it at its
quorum; a freeze made while it is asked holds."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest
from tests.api.tenants import Tenant
from tests.api.test_sign_cosmos import ADDRESS, OTHER, PRIVATE, TRANSFER
from tests.conftest import BACKENDS, ROOT, Server, free_port, own_server, wait_for

from chainkeys.config import ConfigError, load_settings

pytestmark = pytest.mark.long(20)  # seconds (busy run)

SECRET = b"cosigner-secret-of-at-least-32-bytes!"
SEND = f"/cosmos/{ADDRESS}/sign-transfer"
FIELDS = {
    "id",
    "tenant",
    "family",
    "account",
    "network",
    "kind",
    "digest",
    "summary",
    "request",
    "time",
    "approval",
}


def header_for(body: bytes, at: int) -> str:
    mac = hmac.new(SECRET, str(at).encode() + b"." + body, hashlib.sha256).hexdigest()
    return f"t={at},v1={mac}"


@dataclass
class CoSigner:
    """The customer's co-signer: it checks chainkeys' signature over each question and
    answers as `mode` says (the test sets it)."""

    mode: str = "approve"
    reason: str = "payee not on our list"
    questions: list[dict[str, Any]] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)  # ends a "hang"
    meanwhile: Callable[[dict[str, Any]], None] | None = None  # runs before it answers
    port: int = 0
    _httpd: ThreadingHTTPServer | None = None

    def start(self) -> None:
        cosigner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                parts = dict(
                    p.split("=", 1) for p in self.headers["Chainkeys-Signature"].split(",")
                )
                expected = header_for(body, int(parts["t"]))
                assert hmac.compare_digest(expected, self.headers["Chainkeys-Signature"])
                assert abs(time.time() - int(parts["t"])) < 300
                asked = json.loads(body)
                cosigner.questions.append(asked)
                if cosigner.meanwhile is not None:
                    cosigner.meanwhile(asked)
                cosigner.answer(self, asked)

            def log_message(self, *args: Any) -> None:
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self._httpd.server_address[1]
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()

    def answer(self, h: BaseHTTPRequestHandler, asked: dict[str, Any]) -> None:
        mode, now = self.mode, int(time.time())
        decision = {"id": asked["id"], "decision": "reject" if mode == "reject" else "approve"}
        if mode == "reject":
            decision["reason"] = self.reason
        if mode == "other-id":  # an answer recorded for another question, replayed
            decision["id"] = "cos_" + "0" * 24
        body = json.dumps(decision).encode()
        if mode == "malformed":
            body = b'{"id": "' + asked["id"].encode() + b'", "decision": "yes"}'
        status, headers = 200, {"Content-Type": "application/json"}
        if mode == "hang":
            self.release.wait(30)  # longer than chainkeys waits (its timeout)
        if mode == "error":
            status = 500
        if mode == "redirect":
            status, headers["Location"] = 307, f"http://127.0.0.1:{self.port}/elsewhere"
        if mode != "unsigned":
            headers["Chainkeys-Signature"] = header_for(body, now - 600 if mode == "stale" else now)
        h.send_response(status)
        for k, v in headers.items():
            h.send_header(k, v)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)

    def close(self) -> None:
        self.release.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()


@dataclass
class Rig:
    server: Server
    cosigner: CoSigner


@pytest.fixture(scope="module", params=BACKENDS)
def rig(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    cosigner = CoSigner()
    cosigner.start()
    url = f"http://127.0.0.1:{cosigner.port}/cosign"
    try:
        with own_server(
            request.param,
            tmp_path_factory.mktemp("cosigner"),
            cosigner_url=url,
            cosigner_secret=SECRET.decode(),
            cosigner_timeout=3,
        ) as srv:
            yield Rig(srv, cosigner)
    finally:
        cosigner.close()


@pytest.fixture
def cosigner(rig: Rig) -> Iterator[CoSigner]:
    rig.cosigner.mode, rig.cosigner.meanwhile = "approve", None
    rig.cosigner.reason = "payee not on our list"
    rig.cosigner.questions.clear()
    rig.cosigner.release = threading.Event()
    yield rig.cosigner
    rig.cosigner.release.set()


@pytest.fixture
def tenant(rig: Rig) -> Iterator[Tenant]:
    made = Tenant(rig.server)
    assert made.client.post("/cosmos", json={"private_key": PRIVATE}).status_code == 200
    yield made
    made.client.close()


def transfer(amount: int = 1000, sequence: int = 1) -> dict[str, Any]:
    return {**TRANSFER, "amount": str(amount), "sequence": sequence, "feeAmount": "0"}


def events(t: Tenant, action: str) -> list[dict[str, Any]]:
    found = t.client.get("/audit", params={"action": action}).json()["data"]["events"]
    return list(reversed(found))


def test_an_approved_question_signs_and_says_what_it_signs(
    tenant: Tenant, cosigner: CoSigner
) -> None:
    signed = tenant.sign(SEND, transfer())
    assert signed.status_code == 200, signed.text
    [asked] = cosigner.questions
    assert set(asked) == FIELDS
    assert asked["tenant"] == tenant.name and asked["family"] == "cosmos"
    assert asked["account"] == ADDRESS and asked["network"] == "cosmoshub"
    assert asked["kind"] == "sign-transfer" and asked["approval"] is None
    assert asked["request"] == transfer() and asked["id"].startswith("cos_")
    assert asked["summary"]["items"][0]["recipient"] == OTHER
    [call] = events(tenant, "cosigner")
    assert call["outcome"] == "ok" and call["details"]["cosigner"] == asked["id"]
    [sign] = events(tenant, "sign")
    assert sign["outcome"] == "ok" and sign["details"]["cosigner"] == asked["id"]
    assert sign["details"]["digest"] == asked["digest"]


def test_a_rejection_is_a_403_with_its_reason_shown_safely(
    tenant: Tenant, cosigner: CoSigner
) -> None:
    cosigner.mode = "reject"
    cosigner.reason = "payee \u202eunknown\n" + "x" * 500
    r = tenant.sign(SEND, transfer())
    assert r.status_code == 403, r.text
    body = r.json()
    assert body["code"] == "cosigner_rejected" and "payee" in body["message"]
    assert "\u202e" not in body["message"] and "\n" not in body["message"]
    assert len(body["message"]) < 300 and "nothing was signed" in body["message"]
    [call] = events(tenant, "cosigner")
    assert call["outcome"] == "cosigner_rejected" and "payee" in call["details"]["reason"]
    [sign] = events(tenant, "sign")
    assert sign["outcome"] == "cosigner_rejected" and "payee" in sign["details"]["reason"]


@pytest.mark.parametrize(
    ("mode", "words"),
    [
        ("hang", "no answer within 3 s"),
        ("unsigned", "not signed"),
        ("other-id", "another question"),
        ("stale", "stale"),
        ("error", "HTTP 500"),
        ("redirect", "HTTP 307 (a redirect is not followed)"),
        ("malformed", "not JSON"),
    ],
)
def test_anything_but_a_valid_answer_is_a_503_and_signs_nothing(
    tenant: Tenant, cosigner: CoSigner, mode: str, words: str
) -> None:
    cosigner.mode = mode
    r = tenant.sign(SEND, transfer())
    assert r.status_code == 503, r.text
    assert r.json()["code"] == "cosigner_unavailable" and words in r.json()["message"], r.text
    assert len(cosigner.questions) == 1  # asked once; a redirect was not followed
    [sign] = events(tenant, "sign")
    assert sign["outcome"] == "cosigner_unavailable" and words in sign["details"]["reason"]
    assert events(tenant, "cosigner")[0]["outcome"] == "cosigner_unavailable"
    cosigner.mode = "approve"  # the same request, asked again, signs
    assert tenant.sign(SEND, transfer()).status_code == 200


def test_a_refused_signature_spends_no_cap_and_the_co_signer_is_not_asked_past_one(
    tenant: Tenant, cosigner: CoSigner
) -> None:
    tenant.policy({"family": "cosmos", "max_per_day": {"uatom": "1500"}})
    cosigner.mode = "reject"
    assert tenant.sign(SEND, transfer(1000)).status_code == 403
    usage = tenant.client.get("/policy/usage").json()["data"]["caps"]
    assert [c["spent"] for c in usage] == ["0"]
    cosigner.mode = "approve"
    assert tenant.sign(SEND, transfer(1000, sequence=2)).status_code == 200
    assert tenant.client.get("/policy/usage").json()["data"]["caps"][0]["spent"] == "1000"
    over = tenant.sign(SEND, transfer(1000, sequence=3))  # the cap refuses: never asked
    assert over.status_code == 403 and over.json()["code"] == "policy_denied"
    assert len(cosigner.questions) == 2


def test_a_rule_may_skip_the_co_signer_and_the_dry_run_says_which(
    tenant: Tenant, cosigner: CoSigner
) -> None:
    tenant.policy({"family": "cosmos", "network": "cosmoshub", "cosigner": False})
    cosigner.mode = "reject"
    assert tenant.sign(SEND, transfer()).status_code == 200
    assert cosigner.questions == []
    test = {"family": "cosmos", "account": ADDRESS, "kind": "sign-transfer", "request": transfer()}
    assert "cosigner" not in tenant.client.post("/policy/test", json=test).json()["data"]
    tenant.policy({"family": "cosmos"})
    assert tenant.client.post("/policy/test", json=test).json()["data"]["cosigner"] is True
    bad = {"family": "cosmos", "effect": "deny", "cosigner": False}
    assert tenant.server.services is not None
    with pytest.raises(Exception, match="deny rule signs nothing"):
        tenant.policy(bad)


def approver(rig: Rig, tenant: Tenant) -> httpx.Client:
    assert rig.server.services is not None
    _, token = rig.server.call(
        rig.server.services.tokens.create(tenant.name, "bob", frozenset({"approve"}), group="ops")
    )
    return rig.server.client(token)


def test_an_approved_request_asks_the_co_signer_at_its_quorum(
    rig: Rig, tenant: Tenant, cosigner: CoSigner
) -> None:
    tenant.policy({"family": "cosmos", "approval": {"quorum": 1, "group": "ops"}})
    with approver(rig, tenant) as bob:
        for mode, state in (("approve", "signed"), ("reject", "failed")):
            cosigner.mode = mode
            waiting = tenant.sign(SEND, transfer(sequence=len(cosigner.questions) + 1))
            assert waiting.status_code == 202, waiting.text
            pending = waiting.json()["data"]
            asked_before = len(cosigner.questions)
            done = bob.post(
                f"/approvals/{pending['id']}/approve", json={"digest": pending["digest"]}
            )
            assert done.status_code == 200 and done.json()["data"]["state"] == state, done.text
            assert cosigner.questions[asked_before]["approval"] == pending["id"]
            if state == "failed":
                assert "co-signer rejected" in done.json()["data"]["reason"]


def test_a_freeze_made_while_the_co_signer_is_asked_holds(
    rig: Rig, tenant: Tenant, cosigner: CoSigner
) -> None:
    """The co-signer's answer may take seconds; a freeze made meanwhile (here by the
    co-signer's own people, before it answers approve) still stops the signature, and an
    approved request at its quorum fails with the freeze named."""
    tenant.policy(
        {"family": "cosmos", "approval": {"quorum": 1, "group": "ops"}, "above": {"uatom": "5000"}}
    )
    with approver(rig, tenant) as bob:
        waiting = tenant.sign(SEND, transfer(9000)).json()["data"]

        def freeze(asked: dict[str, Any]) -> None:
            r = bob.post("/freezes", json={"reason": "our side saw it first"})
            assert r.status_code == 201, r.text

        cosigner.meanwhile = freeze
        done = bob.post(f"/approvals/{waiting['id']}/approve", json={"digest": waiting["digest"]})
    assert done.status_code == 200, done.text
    assert done.json()["data"]["state"] == "failed"
    assert "frozen" in done.json()["data"]["reason"]
    cosigner.meanwhile = None
    r = tenant.sign(SEND, transfer())
    assert r.status_code == 423 and "our side saw it first" in r.json()["message"]
    assert [e["outcome"] for e in events(tenant, "sign")] == ["frozen", "frozen"]


URL = "https://example.com/cosign"
UNUSABLE = [
    ({"CHAINKEYS_COSIGNER_URL": "http://example.com/cosign"}, "loopback"),
    ({"CHAINKEYS_COSIGNER_URL": URL}, "32 bytes"),
    ({"CHAINKEYS_COSIGNER_URL": URL, "CHAINKEYS_COSIGNER_SECRET": "short"}, "32 bytes"),
    ({"CHAINKEYS_COSIGNER_URL": URL, "CHAINKEYS_COSIGNER_TIMEOUT": "0"}, "COSIGNER_TIMEOUT"),
]


@pytest.mark.parametrize(("env", "says"), UNUSABLE)
def test_a_co_signer_setting_that_cannot_be_used_refuses_the_start(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any, env: dict[str, str], says: str
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError, match=says) as refused:
        load_settings()
    assert "short" not in str(refused.value)  # never the secret


def test_the_secret_is_read_from_its_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    secret = tmp_path / "cosigner.secret"
    secret.write_bytes(SECRET + b"\n")
    monkeypatch.setenv("CHAINKEYS_COSIGNER_URL", "https://cosigner.example.com/ask")
    monkeypatch.setenv("CHAINKEYS_COSIGNER_SECRET_FILE", str(secret))
    settings, _ = load_settings()
    assert settings.cosigner_secret is not None
    assert settings.cosigner_secret.get_secret_value().encode() == SECRET
    assert SECRET.decode() not in repr(settings)


def listening(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


@pytest.mark.parametrize("backend", BACKENDS, indirect=True)
def test_the_worked_co_signer_of_the_docs_approves_and_refuses(backend: str, tmp_path: Any) -> None:
    """docs/cosigner.md's co-signer, run as a reader runs it, in front of chainkeys."""
    found = re.search(
        r"<!-- cosigner -->\n```python\n(.*?)```",
        (ROOT / "docs/cosigner.md").read_text(),
        re.DOTALL,
    )
    assert found is not None
    (tmp_path / "cosigner.py").write_text(found[1])
    (tmp_path / "secret").write_bytes(SECRET + b"\n")
    port = free_port()
    env = {
        **os.environ,
        "COSIGNER_SECRET_FILE": str(tmp_path / "secret"),
        "PAYEES": OTHER,
        "PORT": str(port),
    }
    process = subprocess.Popen([sys.executable, str(tmp_path / "cosigner.py")], env=env)
    try:
        wait_for(lambda: listening(port), "the co-signer listening")
        url = f"http://127.0.0.1:{port}/"
        with (
            own_server(
                backend, tmp_path / "data", cosigner_url=url, cosigner_secret=SECRET.decode()
            ) as srv,
            srv.client(srv.new_token()) as c,
        ):
            assert c.post("/cosmos", json={"private_key": PRIVATE}).status_code == 200
            assert c.post(SEND, json=transfer()).status_code == 200
            elsewhere = c.post(SEND, json={**transfer(), "toAddress": ADDRESS})
            assert elsewhere.status_code == 403, elsewhere.text
            assert "not a known payee" in elsewhere.json()["message"]
    finally:
        process.terminate()
        process.wait(10)


def test_each_item_of_a_batch_is_asked_and_answered_in_its_place(
    tenant: Tenant, cosigner: CoSigner
) -> None:
    """A batch (`sign-batch`) asks the co-signer for each item its caps allow, in order,
    inside the batch's transaction: a rejected item is 403 in its place and spends nothing,
    the item the cap then refuses is never asked, the others are signed."""
    tenant.policy({"family": "cosmos", "max_per_day": {"uatom": "2500"}})
    cosigner.meanwhile = lambda asked: setattr(  # the second question is rejected
        cosigner, "mode", "reject" if len(cosigner.questions) == 2 else "approve"
    )
    items = [{"kind": "sign-transfer", **transfer(1000, sequence=n)} for n in (1, 2, 3, 4)]
    r = tenant.client.post(f"/cosmos/{ADDRESS}/sign-batch", json={"items": items})
    assert r.status_code == 200, r.text
    results = r.json()["data"]["results"]
    assert [x["status"] for x in results] == [200, 403, 200, 403]
    assert results[1]["code"] == "cosigner_rejected" and "payee" in results[1]["message"]
    assert results[3]["code"] == "policy_denied"  # 1,000 + 1,000 signed: over 2,500, not asked
    assert [q["request"]["sequence"] for q in cosigner.questions] == [1, 2, 3]
    assert [e["outcome"] for e in events(tenant, "cosigner")] == ["ok", "cosigner_rejected", "ok"]
    assert [e["outcome"] for e in events(tenant, "sign")] == [
        "ok",
        "cosigner_rejected",
        "ok",
        "policy_denied",
    ]
    assert tenant.client.get("/policy/usage").json()["data"]["caps"][0]["spent"] == "2000"
