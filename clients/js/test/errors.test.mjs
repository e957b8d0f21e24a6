import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { ChainkeysCosmosSigner, ChainkeysSignatureProvider, ChainkeysError, ApprovalPending } from "../dist/index.js";
import { startChainkeys, vectorKey } from "./server.mjs";

let ck, address;
before(async () => {
  ck = await startChainkeys();
  address = (await ck.api("POST", "/cosmos", { private_key: vectorKey("scalar-three").private_key_hex })).data.data.address;
});
after(() => ck?.stop());

const doc = () => ({ bodyBytes: new Uint8Array(), authInfoBytes: new Uint8Array(), chainId: "cosmoshub-4", accountNumber: 1n });

test("a wrong token: ChainkeysError, status 401, code unauthorized", async () => {
  const signer = new ChainkeysCosmosSigner({ url: ck.url, token: "not-a-token", account: address });
  await assert.rejects(signer.getAccounts(), (e) => {
    assert.ok(e instanceof ChainkeysError);
    assert.ok(!(e instanceof ApprovalPending));
    assert.equal(e.status, 401);
    assert.equal(e.code, "unauthorized");
    assert.equal(typeof e.message, "string");
    return true;
  });
});

test("an unknown account: 404", async () => {
  const cosmos = new ChainkeysCosmosSigner({ url: ck.url, token: ck.token, account: "cosmos1w508d6qejxtdg4y5r3zarvary0c5xw7k6ah60c" });
  await assert.rejects(cosmos.getAccounts(), (e) => e instanceof ChainkeysError && e.status === 404);
  const eos = new ChainkeysSignatureProvider({ url: ck.url, token: ck.token, account: "nosuchacct11" });
  await assert.rejects(eos.getAvailableKeys(), (e) => e instanceof ChainkeysError && e.status === 404);
});

test("a token without the sign scope: 403 forbidden", async () => {
  const signer = new ChainkeysCosmosSigner({ url: ck.url, token: ck.makeToken("read"), account: address });
  assert.equal((await signer.getAccounts())[0].address, address);
  await assert.rejects(signer.signDirect(address, doc()), (e) => e instanceof ChainkeysError && e.status === 403 && e.code === "forbidden");
});

test("a request that does not decode: 400 with the service's code", async () => {
  const signer = new ChainkeysCosmosSigner({ url: ck.url, token: ck.token, account: address });
  await assert.rejects(signer.signDirect(address, doc()), (e) => e instanceof ChainkeysError && e.status === 400 && typeof e.code === "string" && e.code.length > 0);
});

test("no server listening: network_error", async () => {
  const signer = new ChainkeysCosmosSigner({ url: "http://127.0.0.1:9", token: "x", account: address });
  await assert.rejects(signer.getAccounts(), (e) => e instanceof ChainkeysError && e.code === "network_error" && e.status === 0);
});

test("options are checked, and a custom fetch is used", async () => {
  assert.throws(() => new ChainkeysCosmosSigner({ url: ck.url, token: "", account: address }), TypeError);
  let calls = 0;
  const signer = new ChainkeysCosmosSigner({ url: ck.url + "/", token: ck.token, account: address,
    fetch: (u, i) => { calls++; return fetch(u, i); } });
  await signer.getAccounts();
  assert.equal(calls, 1);
});
