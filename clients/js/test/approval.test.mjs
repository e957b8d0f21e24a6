// The 202 path (approvals are not on the server yet): a tiny local stub plays the service.
// It holds a real test key: it reports the account's public key and signs what was sent
// once "approved", as the service does, so the adapter's checks of the answer pass.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { fromBase64, fromHex } from "@cosmjs/encoding";
import { DirectSecp256k1Wallet } from "@cosmjs/proto-signing";
import { ChainkeysCosmosSigner, ChainkeysError, ApprovalPending } from "../dist/index.js";
import { vectorKey } from "./server.mjs";

let ADDRESS, wallet, forger, server, url;
const approvals = new Map(); // id -> list of states to answer, in turn
const requests = new Map(); // id (the chain id) -> the signDoc sent
const seen = [];

/** The `signed` result of an approval: the signDoc sent, signed (by `by`, the account's key by default). */
async function signedResult(id, by = wallet) {
  const sent = requests.get(id);
  const doc = { bodyBytes: fromBase64(sent.bodyBytes), authInfoBytes: fromBase64(sent.authInfoBytes),
    chainId: sent.chainId, accountNumber: BigInt(sent.accountNumber) };
  const [{ address }] = await by.getAccounts();
  const { signature } = await by.signDirect(address, doc);
  return { signed: sent, signature };
}

before(async () => {
  wallet = await DirectSecp256k1Wallet.fromKey(fromHex(vectorKey("scalar-three").private_key_hex), "cosmos");
  forger = await DirectSecp256k1Wallet.fromKey(fromHex(vectorKey("scalar-two").private_key_hex), "cosmos");
  const [account] = await wallet.getAccounts();
  ADDRESS = account.address;
  const pubkey = JSON.stringify({ "@type": "/cosmos.crypto.secp256k1.PubKey", key: Buffer.from(account.pubkey).toString("base64") });
  server = createServer((req, res) => {
    seen.push(`${req.method} ${req.url} ${req.headers.authorization}`);
    const send = (status, body) => { res.writeHead(status, { "Content-Type": "application/json" }); res.end(JSON.stringify(body)); };
    if (req.method === "GET" && req.url === `/cosmos/${ADDRESS}`) {
      return send(200, { success: true, message: "account", data: { data: { address: ADDRESS, pubkey } } });
    }
    const sign = req.url.match(/^\/cosmos\/[^/]+\/sign-direct$/);
    if (req.method === "POST" && sign) {
      let body = "";
      req.on("data", (c) => (body += c));
      req.on("end", () => {
        const { signDoc } = JSON.parse(body);
        const id = signDoc.chainId; // the test names the approval by chain id
        requests.set(id, signDoc);
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
      if (state === "rejected") data.reason = "not today";
      if (state !== "signed") return send(200, { success: true, message: "approval", data });
      // "forged": the result carries a signature by another key
      signedResult(poll[1], poll[1].includes("forged") ? forger : wallet).then((result) => {
        data.result = result;
        send(200, { success: true, message: "approval", data });
      }, (err) => send(500, { success: false, message: String(err), code: "internal_error" }));
      return;
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
  const local = await wallet.signDirect(ADDRESS, doc("ap-1"));
  assert.deepEqual(result, { signed: doc("ap-1"), signature: local.signature });
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
  assert.deepEqual(result.signature, (await wallet.signDirect(ADDRESS, doc("ap-auto"))).signature);
});

test("an approved result is checked too: a signature by another key rejects with answer_mismatch", async () => {
  approvals.set("ap-forged", ["pending", "signed"]);
  const e = await pending("ap-forged");
  assert.ok(e instanceof ApprovalPending);
  await assert.rejects(e.waitForApproval({ intervalMs: 10 }),
    (err) => err instanceof ChainkeysError && !(err instanceof ApprovalPending) && err.code === "answer_mismatch");
});

test("an unknown approval id while polling: the service's 404", async () => {
  const e = await pending("ap-gone");
  await assert.rejects(e.waitForApproval({ intervalMs: 10 }), (err) => err instanceof ChainkeysError && err.status === 404);
});
