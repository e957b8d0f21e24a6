// signBatch against a real chainkeys: each item's outcome in its place, as Promise.allSettled
// gives it for the same calls one at a time; the signatures are cosmjs' own for the same
// documents and key (RFC 6979), and the ADR-036 one verifies.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { Secp256k1, Secp256k1Signature, sha256 } from "@cosmjs/crypto";
import { fromBase64, fromHex, toBase64 } from "@cosmjs/encoding";
import { makeSignDoc, serializeSignDoc, Secp256k1Wallet } from "@cosmjs/amino";
import { ChainkeysClient, ChainkeysError } from "../dist/index.js";
import { startChainkeys, vectorKey } from "./server.mjs";

let ck, client, address;
const key = fromHex(vectorKey("bitcoin-wiki-wif-example").private_key_hex);
const fee = { amount: [{ denom: "uatom", amount: "5000" }], gas: "200000" };

before(async () => {
  ck = await startChainkeys();
  const created = await ck.api("POST", "/cosmos", { private_key: Buffer.from(key).toString("hex") });
  address = created.data.data.address;
  client = new ChainkeysClient({ url: ck.url, token: ck.token, account: address });
});
after(async () => { await ck?.stop(); });

const doc = (sequence) => makeSignDoc([{ type: "cosmos-sdk/MsgSend", value: { from_address: address,
  to_address: "cosmos1w508d6qejxtdg4y5r3zarvary0c5xw7k6ah60c", amount: [{ denom: "uatom", amount: "7" }] } }],
fee, "cosmoshub-4", "batch", 12345, sequence);

test("signBatch: each item signed or refused in its place, the signatures cosmjs' own", async () => {
  const local = await Secp256k1Wallet.fromKey(key, "cosmos");
  const message = toBase64(new TextEncoder().encode("I own this address"));
  const results = await client.signBatch("cosmos", [
    { kind: "sign-amino", signDoc: doc(1) },
    { kind: "sign-message", data: message },
    { kind: "sign-amino", signDoc: { ...doc(2), chain_id: "osmosis-1" } },
    { kind: "sign-message", msg: "a field sign-message does not have" },
    { kind: "sign-amino", signDoc: doc(3) },
  ]);
  assert.deepEqual(results.map((r) => r.status), ["fulfilled", "fulfilled", "rejected", "rejected", "fulfilled"]);
  for (const [i, sequence] of [[0, 1], [4, 3]]) {
    assert.deepEqual(results[i].value, await local.signAmino(address, doc(sequence)));
  }
  const adr036 = results[1].value;
  const ok = await Secp256k1.verifySignature(Secp256k1Signature.fromFixedLength(fromBase64(adr036.signedMessage)),
    sha256(serializeSignDoc(adr036.signed)), fromBase64(adr036.signature.pub_key.value));
  assert.ok(ok, "the ADR-036 signature verifies");
  const [wrongChain, malformed] = [results[2].reason, results[3].reason];
  assert.ok(wrongChain instanceof ChainkeysError && wrongChain.status === 400 && wrongChain.code === "wrong_chain");
  assert.ok(malformed instanceof ChainkeysError && malformed.code === "invalid_field");
  assert.match(malformed.message, /msg is not a field/);
});

test("signBatch: a batch refused whole throws the envelope's error", async () => {
  const item = { kind: "sign-message", message: "m" };
  await assert.rejects(client.signBatch("cosmos", Array(1001).fill(item)),
    (e) => e instanceof ChainkeysError && e.status === 400 && e.code === "invalid_batch" && /1,001/.test(e.message));
  await assert.rejects(client.signBatch("cosmos", [{ kind: "sign-psbt", psbt: "AAAA" }]),
    (e) => e instanceof ChainkeysError && e.code === "invalid_batch" && /no 'sign-psbt' signer/.test(e.message));
});
