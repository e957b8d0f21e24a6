"""The console (/ui) in headless Chromium against a real server with real data, on both
engines: sign in, each page's main flow, a refusal in the audit log with its reason, cap
usage as the API counts it, a deposit QR code read back by an independent decoder,
derive-next from a wallet's page, approve and reject with the keyboard only, hostile
strings shown as text, an axe-core scan of every page, screenshots kept as artifacts;
and every page's first paint on a tenant of 100,000 accounts (reported, not asserted:
tests/verifiers/console.mjs measures it with the browser's clock)."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from bench.preload import sqlite_dataset
from tests.api.tenants import Tenant
from tests.api.test_sign_cosmos import ADDRESS, OTHER, PRIVATE, TRANSFER
from tests.conftest import TLS, Server, free_port
from tests.node import VERIFIERS, chromium, run_node

pytestmark = [pytest.mark.slow, pytest.mark.long(65)]
ARTIFACTS = Path(os.environ.get("CHAINKEYS_TEST_ARTIFACTS", "build/test-artifacts"))
INJECTED = '<b class="injected">x</b><img src=x onerror="window.pwned=1">'
BIDI = "pay \u202egpj.exe"  # shows "pay exe.jpg" if its override were obeyed
SEND = f"/cosmos/{ADDRESS}/sign-transfer"
RULES = [
    {
        "family": "cosmos",
        "network": "cosmoshub",
        "name": "payouts",
        "max_per_tx": {"uatom": "100000"},
        "max_per_day": {"uatom": "1000000"},
        "approval": {"quorum": 1, "group": "treasury"},
        "above": {"uatom": "50000"},
    },
    {"family": "dogecoin", "max_per_day": {"DOGE": "500000000"}},
]


def send(amount: int, sequence: int, memo: str = "") -> dict[str, Any]:
    return {
        **TRANSFER,
        "amount": str(amount),
        "sequence": sequence,
        "toAddress": OTHER,
        "feeAmount": "100",
        "memo": memo,
    }


def ok(r: httpx.Response) -> Any:
    assert r.status_code in (200, 202), r.text
    return r.json()["data"]


def serious(axe: dict[str, list[dict[str, Any]]]) -> dict[str, list[str]]:
    return {
        page: [f"{v['id']}: {v['help']}" for v in found if v["impact"] in ("serious", "critical")]
        for page, found in axe.items()
        if any(v["impact"] in ("serious", "critical") for v in found)
    }


def test_a_tenant_read_from_the_console_alone(
    server: Server, tenant: Tenant, request: pytest.FixtureRequest
) -> None:
    browser = chromium()
    assert server.services is not None
    c = tenant.client
    ok(c.post("/cosmos", json={"private_key": PRIVATE}))
    dogs = [ok(c.post("/dogecoin", json={}))["address"] for _ in range(3)]
    wallet = ok(c.post("/wallets", json={"name": "deposits"}))
    ok(c.post(f"/wallets/{wallet['id']}/accounts", json={"family": "cosmos", "count": 2}))
    tenant.policy(*RULES)
    tenant.allowed(SEND, send(10_000, 1, memo=INJECTED))
    refused = tenant.denied(SEND, send(200_000, 2), "per-transaction cap")
    approve = ok(c.post(SEND, json=send(60_000, 3, memo=INJECTED)))
    reject = ok(c.post(SEND, json=send(70_000, 4, memo=BIDI)))
    usage = ok(c.get("/policy/usage"))["caps"]
    _, token = server.call(server.services.tokens.create(tenant.name, INJECTED))
    _, approver = server.call(
        server.services.tokens.create(
            tenant.name, "alice", frozenset({"approve"}), None, None, "treasury"
        )
    )
    shots = ARTIFACTS.resolve()
    shots.mkdir(parents=True, exist_ok=True)
    dry = send(10, 9)
    seen = run_node(
        "console.mjs",
        {
            "url": server.base_url,
            "chromium": browser,
            "shots": str(shots),
            "mode": "tour",
            "tag": request.node.callspec.id,
            "token": token,
            "approver": approver,
            "cosmos": ADDRESS,
            "wallet": wallet["id"],
            "prefix": dogs[0][:3],
            "approve": approve["id"],
            "reject": reject["id"],
            "rejectReason": BIDI,
            "dryRun": dry,
        },
        timeout=300,
    )

    assert "failure" not in seen, json.dumps({k: v for k, v in seen.items() if k != "csv"})
    assert seen["errors"] == [] and seen["foreign"] == []
    csp = seen["csp"]
    for part in (
        "script-src 'self'",
        "style-src 'self'",
        "connect-src 'self'",
        "frame-ancestors 'none'",
        "default-src 'none'",
    ):
        assert part in csp
    assert "unsafe" not in csp
    assert seen["nav"] == [
        "Overview",
        "Accounts",
        "Wallets",
        "Approvals",
        "Audit",
        "Policy",
        "Token",
    ]
    # what was signed and refused today, and how much may still be paid out
    o = seen["overview"]
    assert (o["signed"], o["refused"]) == ("1", "1")
    assert o["pending"] == "0"  # this token asked for none (the tenant's other token did)
    want = [next(u for u in usage if u["denom"] == d)["remaining"] for d in ("uatom", "DOGE")]
    assert [r.split(" (")[1].split(" ")[0] for r in o["remaining"]] == want
    assert o["remaining"][0].startswith("0.9899 ATOM")  # 1,000,000 - 10,100 uatom
    assert 0 < o["meters"][0] < 100
    # accounts: a family's page, a search
    assert seen["accounts"]["rows"] == 3
    assert seen["search"] and all(s.startswith(dogs[0][:3]) for s in seen["search"])
    # the deposit QR code says the address
    assert seen["qr"] == ADDRESS
    assert any("sign" in row and "ok" in row for row in seen["accountEvents"])
    assert any("policy_denied" in row for row in seen["accountEvents"])
    # wallets: xpubs, derive-next
    assert seen["walletRows"] == 1
    assert any(k.startswith("xpub") for k in seen["walletKeys"])
    assert any(k.startswith("pkh(") or k.startswith("wpkh(") for k in seen["walletKeys"])
    assert seen["derivedAfter"] == seen["derivedBefore"] + 1 == 3
    assert "m/44'/3'/0'/0/0" in seen["derivedMessage"]
    # audit: the refusal and why; the download is the filtered view
    assert len(seen["refusals"]) == 1 and "per-transaction cap" in seen["refusals"][0]
    assert refused in seen["refusals"][0] or "200100 uatom" in seen["refusals"][0]
    rows = list(csv.DictReader(io.StringIO(seen["csv"])))
    assert [r["outcome"] for r in rows] == ["policy_denied"] and seen["csvName"].endswith(".csv")
    # policy: rules drawn, history, a dry run
    assert len(seen["rules"]) == 2 and "payouts" in seen["rules"][0]
    assert len(seen["history"]) == 1
    assert "would allow" in seen["dryRun"]
    # hostile text is text: the token's label, memos, a reason with a bidi override
    assert INJECTED in seen["token"] and seen["pwned"] is False
    assert INJECTED in seen["card"] and seen["approverPwned"] is False
    assert "⟨U+202E⟩" in seen["rejectCard"] and "\u202e" not in seen["rejectCard"]
    # the approval as a file, which the offline verifier accepts as what is signed
    from chainkeys.approvals.verify import approval_of, differences

    saved = seen["approvalFile"]
    assert saved["name"] == f"{approve['id']}.json" and "cancellable" not in saved["approval"]
    assert differences(approval_of(saved["approval"])) == []
    # the approver, keyboard only
    assert seen["tabbedToApprove"] and seen["tabbedToReason"] and seen["tabbedToReject"]
    assert "approved by you; now signed" in seen["approveMessage"]
    assert "rejected; now rejected" in seen["rejectMessage"]
    assert ok(c.get(f"/approvals/{approve['id']}"))["state"] == "signed"
    final = ok(c.get(f"/approvals/{reject['id']}"))
    assert final["state"] == "rejected" and final["votes"][0]["reason"] == BIDI
    # the token lives in the tab only, and goes at sign-out
    assert seen["session"] == ["chainkeys.token"] and seen["local"] == 0 and seen["cookies"] == 0
    assert seen["afterForget"] == 0 and seen["pageHiddenAfterForget"]
    assert serious(seen["axe"]) == {}
    assert len(seen["shots"]) == 9 and all(Path(p).stat().st_size > 5_000 for p in seen["shots"])


def test_the_vendored_qr_library_is_the_pinned_package() -> None:
    """static/console/vendor holds qrcode-generator's own ES module, byte for byte (the
    version tests/verifiers/package.json pins): nothing edited, nothing stale."""
    vendored = (
        Path(__file__).resolve().parents[2]
        / "src/chainkeys/api/static/console"
        / "vendor/qrcode-generator.mjs"
    ).read_bytes()
    pinned = json.loads((VERIFIERS / "package.json").read_text())["dependencies"]
    installed = VERIFIERS / "node_modules/qrcode-generator"
    if not installed.is_dir():
        chromium()  # skips or fails as the browser tests do without the Node packages
    assert (
        json.loads((installed / "package.json").read_text())["version"]
        == pinned["qrcode-generator"]
    )
    assert vendored == (installed / "dist/qrcode.mjs").read_bytes()


def test_first_paint_on_a_tenant_of_100k_accounts(tmp_path: Path) -> None:
    """Every page on a tenant of 100,000 accounts (written in bulk, as the benchmark
    does): each is drawn (pages, never everything) and its first paint is reported in
    build/test-artifacts/console-paint.json, not asserted (a busy machine is slower)."""
    browser = chromium()
    data = sqlite_dataset(tmp_path, 100_000, sample=10)
    port = free_port()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("CHAINKEYS_")},
        "CHAINKEYS_DATA_DIR": str(data.data_dir),
        "CHAINKEYS_LOG_LEVEL": "WARNING",
        "CHAINKEYS_TEST_RUN": os.environ.get("CHAINKEYS_TEST_RUN", ""),
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "chainkeys.cli", "serve", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}"
    with proc:  # closes its pipe; terminated however the visit ends
        try:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                try:
                    if httpx.get(f"{url}/readyz", verify=TLS, timeout=1).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
                time.sleep(0.1)
            names = data.names_file.read_text().split()
            seen = run_node(
                "console.mjs",
                {
                    "url": url,
                    "chromium": browser,
                    "mode": "paint",
                    "token": data.token,
                    "family": "cosmos",
                    "prefix": names[0][:12],
                    "account": names[0],
                },
                timeout=300,
            )
        finally:
            proc.terminate()
            proc.wait(30)
    assert "failure" not in seen, seen
    assert seen["errors"] == [] and seen["foreign"] == []
    assert seen["accountsRows"] == 50 and seen["searchRows"] >= 1
    assert set(seen["paints"]) == {
        "overview",
        "accounts",
        "search",
        "account",
        "audit",
        "policy",
        "wallets",
        "token",
    }
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    report = {
        "accounts": 100_000,
        "paints_ms": seen["paints"],
        "first_contentful_paint_ms": seen["firstContentfulPaint"],
    }
    (ARTIFACTS / "console-paint.json").write_text(json.dumps(report, indent=1))
    print("console first paint on 100,000 accounts (ms):", report)
