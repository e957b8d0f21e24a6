// Votes that carry a signature, against a real chainkeys server: on a rule with
// "passkey": true the approve token alone is refused, and a script key enrolled with
// `chainkeys approver add-key` (Ed25519; P-256 in WebCrypto's r||s form) signs the
// request's challenge, sent with the vote by ChainkeysClient.approve.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { generateKeyPairSync, sign } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ChainkeysClient, ChainkeysError, challengeBytes } from "../dist/index.js";
import { CHAINKEYS_BIN, repoRoot, startChainkeys } from "./server.mjs";

const COSMOS = JSON.parse(readFileSync(join(repoRoot, "tests/chains/vectors/cosmos_signing.json"), "utf8"));
let ck, env;

// The CLI runs without blocking the event loop: a blocked loop cannot see the server
// close an idle keep-alive connection, and the next request would be sent on it.
const run = promisify(execFile);
async function cli(...args) {
  const { stdout } = await run(CHAINKEYS_BIN, [...args, "--data-dir", ck.dir], { env, encoding: "utf8" });
  return stdout;
}

async function approver(label, publicKeyPem) {
  const token = (await cli("token", "create", "--tenant", "t1", "--label", label, "--scope", "approve",
    "--group", "keys")).trim().split("\n").pop().trim();
  const file = join(ck.dir, `${label}.pem`);
  writeFileSync(file, publicKeyPem);
  const id = (await cli("approver", "add-key", "--tenant", "t1", "--label", label, "--group", "keys", "--key", file)).split(" ")[2];
  return { token, id, client: new ChainkeysClient({ url: ck.url, token, account: COSMOS.address }) };
}

const b64url = (bytes) => Buffer.from(bytes).toString("base64url");

before(async () => {
  ck = await startChainkeys();
  env = { ...process.env, CHAINKEYS_MASTER_KEY: "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=", CHAINKEYS_DATA_DIR: ck.dir };
  for (const k of Object.keys(env)) if (k === "CHAINKEYS_BIN") delete env[k];
  const policy = join(ck.dir, "policy.json");
  writeFileSync(policy, JSON.stringify({ rules: [{ family: "cosmos", network: "cosmoshub",
    approval: { quorum: 2, group: "keys", passkey: true } }] }));
  await cli("policy", "set", "t1", policy);
  await ck.api("POST", "/cosmos", { private_key: "00".repeat(31) + "01" });
});

after(async () => { await ck?.stop(); });

test("a vote signed by a script key counts; the approve token alone does not", async () => {
  const ed = generateKeyPairSync("ed25519");
  const p256 = generateKeyPairSync("ec", { namedCurve: "P-256" });
  const alice = await approver("alice", ed.publicKey.export({ type: "spki", format: "pem" }));
  const bob = await approver("bob", p256.publicKey.export({ type: "spki", format: "pem" }));
  const waiting = (await ck.api("POST", `/cosmos/${COSMOS.address}/sign-transfer`, COSMOS["sign-transfer"].request)).data;
  assert.equal(waiting.state, "pending");
  assert.equal(waiting.passkey, true);

  await assert.rejects(alice.client.approve(waiting.id, waiting.digest),
    (e) => e instanceof ChainkeysError && e.status === 403 && e.code === "passkey_required");
  const message = challengeBytes(await alice.client.challenge(waiting.id, "approve"));
  assert.equal(message.length, 32);
  const wrong = { signature: { credential: alice.id, value: b64url(sign(null, Buffer.from("other"), ed.privateKey)) } };
  await assert.rejects(alice.client.approve(waiting.id, waiting.digest, wrong),
    (e) => e instanceof ChainkeysError && e.code === "assertion_invalid");
  const first = await alice.client.approve(waiting.id, waiting.digest,
    { signature: { credential: alice.id, value: b64url(sign(null, message, ed.privateKey)) } });
  assert.equal(first.state, "pending");
  assert.equal(first.votes[0].signed, "key");
  const rs = sign("sha256", message, { key: p256.privateKey, dsaEncoding: "ieee-p1363" });
  const done = await bob.client.approve(waiting.id, waiting.digest, { signature: { credential: bob.id, value: b64url(rs) } });
  assert.equal(done.state, "signed");
  assert.deepEqual(done.votes.map((v) => v.signed), ["key", "key"]);
});
