// The 202 path (approvals are not on the server yet): a tiny local stub plays the service.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { ChainkeysCosmosSigner, ChainkeysError, ApprovalPending } from "../dist/index.js";

const ADDRESS = "cosmos1w508d6qejxtdg4y5r3zarvary0c5xw7k6ah60c";
const SIGNATURE = { pub_key: { type: "tendermint/PubKeySecp256k1", value: "Anm+Zn753LusVaBilc6HCwcCm/zbLc4o2VnygVsW+BeY" }, signature: "c2ln" };
let server, url;
const approvals = new Map(); // id -> list of states to answer, in turn
const seen = [];

before(async () => {
  server = createServer((req, res) => {
    seen.push(`${req.method} ${req.url} ${req.headers.authorization}`);
    const send = (status, body) => { res.writeHead(status, { "Content-Type": "application/json" }); res.end(JSON.stringify(body)); };
    const sign = req.url.match(/^\/cosmos\/[^/]+\/sign-direct$/);
    if (req.method === "POST" && sign) {
      let body = "";
      req.on("data", (c) => (body += c));
      req.on("end", () => {
        const id = JSON.parse(body).signDoc.chainId; // the test names the approval by chain id
        send(202, { success: true, message: "waiting for 2 approvals", data: { id, state: "pending", kind: "sign-direct", required: 2, votes: [] } });
      });
      return;
    }
    const poll = req.url.match(/^\/approvals\/([^/]+)$/);
    if (req.method === "GET" && poll) {
      const states = approvals.get(poll[1]);
      if (!states) return send(404, { success: false, message: "no such approval", code: "not_found" });
      const state = states.length > 1 ? states.shift() : states[0];
      const data = { id: poll[1], state, votes: [] };
      if (state === "signed") data.result = { signed: {}, signature: SIGNATURE };
      if (state === "rejected") data.reason = "not today";
      return send(200, { success: true, message: "approval", data });
    }
    send(404, { success: false, message: "not stubbed", code: "not_found" });
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  url = `http://127.0.0.1:${server.address().port}`;
});
after(() => server?.close());

const doc = (id) => ({ bodyBytes: new Uint8Array([1]), authInfoBytes: new Uint8Array([2]), chainId: id, accountNumber: 5n });

async function pending(id, opts = {}) {
  const signer = new ChainkeysCosmosSigner({ url, token: "tok", account: ADDRESS, ...opts });
  try {
    await signer.signDirect(ADDRESS, doc(id));
  } catch (e) {
    return e;
  }
  assert.fail("expected ApprovalPending");
}

test("202: ApprovalPending with the id; waitForApproval resolves to the adapter's own result", async () => {
  approvals.set("ap-1", ["pending", "approved", "signed"]);
  const e = await pending("ap-1");
  assert.ok(e instanceof ApprovalPending);
  assert.ok(e instanceof ChainkeysError);
  assert.equal(e.id, "ap-1");
  assert.equal(e.status, 202);
  assert.equal(e.code, "approval_pending");
  assert.equal(e.message, "waiting for 2 approvals");
  assert.equal(e.approval.state, "pending");
  const result = await e.waitForApproval({ intervalMs: 10 });
  assert.deepEqual(result, { signed: doc("ap-1"), signature: SIGNATURE });
  assert.equal(seen.filter((s) => s.startsWith("GET /approvals/ap-1 Bearer tok")).length, 3);
});

for (const state of ["rejected", "expired", "cancelled", "failed"]) {
  test(`waitForApproval rejects when the request ends ${state}`, async () => {
    approvals.set(`ap-${state}`, ["pending", state]);
    const e = await pending(`ap-${state}`);
    await assert.rejects(e.waitForApproval({ intervalMs: 10 }),
      (err) => err instanceof ChainkeysError && !(err instanceof ApprovalPending) && err.code === `approval_${state}`
        && err.body.state === state);
  });
}

test("waitForApproval gives up after timeoutMs", async () => {
  approvals.set("ap-slow", ["pending"]);
  const e = await pending("ap-slow");
  const t = Date.now();
  await assert.rejects(e.waitForApproval({ intervalMs: 20, timeoutMs: 100 }), (err) => err.code === "approval_timeout");
  assert.ok(Date.now() - t < 2000);
});

test("waitForApproval stops on an abort signal", async () => {
  approvals.set("ap-abort", ["pending"]);
  const e = await pending("ap-abort");
  const ctl = new AbortController();
  setTimeout(() => ctl.abort(new Error("stop")), 50);
  await assert.rejects(e.waitForApproval({ intervalMs: 1000, signal: ctl.signal }), /stop/);
});

test("options.waitForApproval: the adapter call itself waits and resolves", async () => {
  approvals.set("ap-auto", ["pending", "signed"]);
  const signer = new ChainkeysCosmosSigner({ url, token: "tok", account: ADDRESS, waitForApproval: { intervalMs: 10 } });
  const result = await signer.signDirect(ADDRESS, doc("ap-auto"));
  assert.deepEqual(result.signature, SIGNATURE);
});

test("an unknown approval id while polling: the service's 404", async () => {
  const e = await pending("ap-gone");
  await assert.rejects(e.waitForApproval({ intervalMs: 10 }), (err) => err instanceof ChainkeysError && err.status === 404);
});
