import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import {
  ABI, Action, Bytes, Checksum256, PrivateKey, PublicKey, Serializer, Signature, Transaction,
} from "@wharfkit/antelope";
import { Session } from "@wharfkit/session";
import { Api, JsonRpc } from "eosjs";
import { Signature as EosjsSignature, PublicKey as EosjsPublicKey } from "eosjs/dist/eosjs-key-conversions.js";
import { ChainkeysSignatureProvider, ChainkeysError } from "../dist/index.js";
import { ChainkeysWalletPlugin } from "../dist/wharfkit.js";
import { startChainkeys, vectorKey } from "./server.mjs";
import { startProxy, onSign, mismatch } from "./proxy.mjs";

const CHAIN_ID = "aca376f206b8fc25a6ed44dbdc66547c36c6c33e3a119ffbeaef943642f0e906";
const NAME = "chainkeyjs11";
const vec = vectorKey("eosio-dev-key");
const TOKEN_ABI = ABI.from({
  version: "eosio::abi/1.1",
  structs: [{ name: "transfer", base: "", fields: [
    { name: "from", type: "name" }, { name: "to", type: "name" },
    { name: "quantity", type: "asset" }, { name: "memo", type: "string" }] }],
  actions: [{ name: "transfer", type: "transfer", ricardian_contract: "" }],
});
const HEADER = { expiration: "2030-01-01T00:00:00", ref_block_num: 1234, ref_block_prefix: 5678 };
const transfer = { account: "eosio.token", name: "transfer",
  authorization: [{ actor: NAME, permission: "active" }],
  data: { from: NAME, to: "eosio", quantity: "1.2345 EOS", memo: "from js" } };

// A stub of the *chain's* API (get_info, ABIs, required keys): the chain is not under test.
let ck, stub, stubUrl, options, proxy;
function chainStub() {
  const lib = "00000" + "4d2" + "2e16" + "0000".repeat(13); // block 1234, prefix bytes 8..12
  return createServer((req, res) => {
    let body = "";
    req.on("data", (c) => (body += c));
    req.on("end", () => {
      const answer = {
        "/v1/chain/get_info": {
          server_version: "00000000", chain_id: CHAIN_ID, head_block_num: 1240, last_irreversible_block_num: 1234,
          last_irreversible_block_id: lib.padEnd(64, "0"), head_block_id: "0".repeat(64),
          head_block_time: "2029-12-31T23:58:00.000", head_block_producer: "eosio",
          virtual_block_cpu_limit: 200000000, virtual_block_net_limit: 1048576000,
          block_cpu_limit: 200000, block_net_limit: 1048576,
        },
        "/v1/chain/get_abi": { account_name: "eosio.token", abi: JSON.parse(JSON.stringify(TOKEN_ABI)) },
        "/v1/chain/get_raw_abi": { account_name: "eosio.token", code_hash: "0".repeat(64), abi_hash: "0".repeat(64),
          abi: Buffer.from(Serializer.encode({ object: TOKEN_ABI }).array).toString("base64") },
        "/v1/chain/get_required_keys": { required_keys: [vec.eos.public_key_legacy] },
      }[req.url];
      res.writeHead(answer ? 200 : 404, { "Content-Type": "application/json" });
      res.end(JSON.stringify(answer ?? { error: "not stubbed" }));
    });
  });
}

before(async () => {
  ck = await startChainkeys();
  await ck.api("POST", "/eos", { private_key: vec.eos.private_key_k1, name: NAME });
  options = { url: ck.url, token: ck.token, account: NAME };
  stub = chainStub();
  await new Promise((r) => stub.listen(0, "127.0.0.1", r));
  stubUrl = `http://127.0.0.1:${stub.address().port}`;
  proxy = await startProxy(ck.url);
});
after(async () => { stub?.close(); await proxy?.close(); await ck?.stop(); });

function serializedTransfer() {
  const tx = Transaction.from({ ...HEADER, actions: [Action.from(transfer, TOKEN_ABI)] });
  return { tx, bytes: Serializer.encode({ object: tx }).array };
}

function canonical(sig) {
  const d = sig.data.array; // recid, r(32), s(32)
  return !(d[1] & 0x80) && !(d[1] === 0 && !(d[2] & 0x80)) && !(d[33] & 0x80) && !(d[33] === 0 && !(d[34] & 0x80));
}

function assertSignedBy(signature, tx) {
  const digest = tx.signingDigest(CHAIN_ID);
  const sig = Signature.from(String(signature));
  assert.ok(sig.verifyDigest(digest, PublicKey.from(vec.eos.public_key_k1)), "verifies with @wharfkit/antelope");
  assert.equal(sig.recoverDigest(digest).toLegacyString(), vec.eos.public_key_legacy);
  // Not compared byte for byte with PrivateKey.signDigest: antelope and chainkeys find a
  // canonical signature with different extra-nonce schemes, so both are valid but differ.
  // The bytes signed (the transaction) are compared instead.
  assert.ok(canonical(sig), "canonical, as Antelope nodes require");
}

test("WharfKit Session + ChainkeysWalletPlugin: transact({broadcast:false}) is signed by the account's key", async () => {
  const walletPlugin = new ChainkeysWalletPlugin(options);
  const session = new Session({ chain: { id: CHAIN_ID, url: stubUrl }, actor: NAME, permission: "active", walletPlugin });
  const result = await session.transact({ action: transfer }, { broadcast: false, expireSeconds: 120 });
  assert.equal(result.signatures.length, 1);
  assert.ok(result.signatures[0] instanceof Signature);
  assertSignedBy(result.signatures[0], result.resolved.transaction);
  assert.equal(String(await walletPlugin.retrievePublicKey(CHAIN_ID)), vec.eos.public_key_k1);
  assert.equal(walletPlugin.serialize().id, "chainkeys");
});

test("eosjs Api + ChainkeysSignatureProvider: transact({broadcast:false}) is signed by the account's key", async () => {
  const signatureProvider = new ChainkeysSignatureProvider(options);
  assert.deepEqual(await signatureProvider.getAvailableKeys(), [vec.eos.public_key_k1]);
  const api = new Api({ rpc: new JsonRpc(stubUrl, { fetch }), signatureProvider, chainId: CHAIN_ID });
  const pushed = await api.transact({ ...HEADER, actions: [transfer] }, { broadcast: false, sign: true });
  const { tx, bytes } = serializedTransfer();
  assert.deepEqual(Array.from(pushed.serializedTransaction), Array.from(bytes), "eosjs built the same bytes");
  assertSignedBy(pushed.signatures[0], tx);
  // and eosjs' own ecc agrees
  const digest = tx.signingDigest(CHAIN_ID).array;
  assert.ok(EosjsSignature.fromString(pushed.signatures[0]).verify(digest, EosjsPublicKey.fromString(vec.eos.public_key_k1), false));
});

test("SignatureProvider.sign directly, and a refusal for another chain", async () => {
  const provider = new ChainkeysSignatureProvider(options);
  const { tx, bytes } = serializedTransfer();
  const out = await provider.sign({ chainId: CHAIN_ID, requiredKeys: [], serializedTransaction: bytes, abis: [] });
  assert.equal(out.serializedTransaction, bytes);
  assertSignedBy(out.signatures[0], tx);
  await assert.rejects(provider.sign({ chainId: "1".repeat(64), requiredKeys: [], serializedTransaction: bytes, abis: [] }),
    (e) => e instanceof ChainkeysError && e.status === 400 && e.code === "wrong_chain");
});

// ---- the answer is checked: a proxy between the adapters and the server alters it -------------

const other = PrivateKey.from(vectorKey("scalar-two").eos.private_key_k1);
const account = PrivateKey.from(vec.eos.private_key_k1);

/** The digest the service signs: sha256(chain id || transaction || sha256(cfd) or 32 zero bytes). */
function digestOf(request) {
  const cfd = request.serializedContextFreeData ? Checksum256.hash(Bytes.from(request.serializedContextFreeData, "hex")).array
    : new Uint8Array(32);
  return Checksum256.hash(Bytes.from(request.chainId, "hex").appending(Bytes.from(request.serializedTransaction, "hex"))
    .appending(cfd));
}

/** The ways a sign-transaction answer is altered; each must make the adapters throw answer_mismatch. */
const FORGERIES = {
  "a signature by another key": (data, request) => { data.signatures = [String(other.signDigest(digestOf(request)))]; },
  "the account's signature of another transaction": (data, request) => {
    const another = { ...request, serializedTransaction: request.serializedTransaction.replace(/..$/, "01") };
    data.signatures = [String(account.signDigest(digestOf(another)))];
  },
  "a flipped signature byte": (data) => {
    const sig = Signature.from(data.signatures[0]);
    sig.data.array[10] ^= 0x01;
    data.signatures = [String(sig)];
  },
  "a second signature by another key": (data, request) => {
    data.signatures.push(String(other.signDigest(digestOf(request))));
  },
  "no signature": (data) => { data.signatures = []; },
  "another serializedTransaction beside the right signature": (data) => {
    data.serializedTransaction = data.serializedTransaction.replace(/..$/, "01");
  },
  "not a SIG_K1": (data) => { data.signatures = ["SIG_K1_notasignature"]; },
};

async function through(change, call) {
  proxy.alter = change && onSign("/sign-transaction", change);
  try {
    return await call({ ...options, url: proxy.url });
  } finally {
    proxy.alter = null;
  }
}

const ADAPTERS = {
  "WharfKit plugin": async (opts) => {
    const walletPlugin = new ChainkeysWalletPlugin(opts);
    const { tx, bytes } = serializedTransfer();
    const out = await walletPlugin.sign({ serializedTransaction: bytes, chainId: Checksum256.from(CHAIN_ID) },
      { chain: { id: Checksum256.from(CHAIN_ID) } });
    assertSignedBy(out.signatures[0], tx);
    return out;
  },
  "eosjs SignatureProvider": async (opts) => {
    const provider = new ChainkeysSignatureProvider(opts);
    const { tx, bytes } = serializedTransfer();
    const out = await provider.sign({ chainId: CHAIN_ID, requiredKeys: [], serializedTransaction: bytes, abis: [] });
    assertSignedBy(out.signatures[0], tx);
    return out;
  },
};

for (const [name, call] of Object.entries(ADAPTERS)) {
  test(`${name}: through the proxy, an honest answer passes; every altered answer is answer_mismatch`, async () => {
    await through((data) => data, call);
    for (const [what, change] of Object.entries(FORGERIES)) {
      await assert.rejects(through(change, call), mismatch, what);
    }
  });
}

test("WharfKit Session.transact through the proxy: honest passes, a forged signature stops it", async () => {
  const run = (opts) => new Session({ chain: { id: CHAIN_ID, url: stubUrl }, actor: NAME, permission: "active",
    walletPlugin: new ChainkeysWalletPlugin(opts) }).transact({ action: transfer }, { broadcast: false, expireSeconds: 120 });
  const result = await through((data) => data, run);
  assertSignedBy(result.signatures[0], result.resolved.transaction);
  // Session.transact wraps whatever a plugin throws in a plain Error(String(error))
  await assert.rejects(through(FORGERIES["a signature by another key"], run),
    /^Error: ChainkeysError: chainkeys: the service's answer does not check out: signature 0 is not the account's/);
});

test("eosjs: context-free data is in the checked digest (sha256 of it, not 32 zero bytes)", async () => {
  const tx = Transaction.from({ ...HEADER, context_free_actions: [{ account: "eosio.null", name: "nonce",
    authorization: [], data: "0103" }], actions: [Action.from(transfer, TOKEN_ABI)] });
  const bytes = Serializer.encode({ object: tx }).array;
  const cfd = new Uint8Array([1, 2, 1, 3]);
  const call = (opts) => new ChainkeysSignatureProvider(opts).sign({ chainId: CHAIN_ID, requiredKeys: [],
    serializedTransaction: bytes, serializedContextFreeData: cfd, abis: [] });
  const out = await through((data) => data, call);
  const digest = digestOf({ chainId: CHAIN_ID, serializedTransaction: Buffer.from(bytes).toString("hex"),
    serializedContextFreeData: Buffer.from(cfd).toString("hex") });
  assert.equal(Signature.from(out.signatures[0]).recoverDigest(digest).toLegacyString(), vec.eos.public_key_legacy);
  // the account's signature without the context-free data's hash is not this transaction's
  await assert.rejects(through((data, request) => {
    data.signatures = [String(account.signDigest(digestOf({ ...request, serializedContextFreeData: undefined })))];
  }, call), mismatch);
});

test("an account answer with another key makes every honest signature answer_mismatch", async () => {
  const change = (req, answer) => {
    if (req.method === "GET" && req.path === `/eos/${NAME}`) {
      answer.data.public_key_k1 = String(other.toPublic());
      answer.data.public_key = other.toPublic().toLegacyString();
    }
    return answer;
  };
  proxy.alter = change;
  try {
    const opts = { ...options, url: proxy.url };
    await assert.rejects(ADAPTERS["eosjs SignatureProvider"](opts), mismatch);
    await assert.rejects(ADAPTERS["WharfKit plugin"](opts), mismatch);
  } finally {
    proxy.alter = null;
  }
});
