import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { Secp256k1, Secp256k1Signature, sha256 } from "@cosmjs/crypto";
import { fromBase64, fromHex, toBase64 } from "@cosmjs/encoding";
import { makeSignDoc, serializeSignDoc, Secp256k1Wallet } from "@cosmjs/amino";
import { DirectSecp256k1Wallet, makeSignBytes } from "@cosmjs/proto-signing";
import { SigningStargateClient } from "@cosmjs/stargate";
import { TxRaw } from "cosmjs-types/cosmos/tx/v1beta1/tx";
import { ChainkeysCosmosSigner, ChainkeysError } from "../dist/index.js";
import { startChainkeys, vectorKey } from "./server.mjs";
import { startProxy, onSign, mismatch } from "./proxy.mjs";

let ck, proxy, address, options;
const key = fromHex(vectorKey("bitcoin-wiki-wif-example").private_key_hex);
const otherKey = fromHex(vectorKey("scalar-two").private_key_hex);

before(async () => {
  ck = await startChainkeys();
  const created = await ck.api("POST", "/cosmos", { private_key: Buffer.from(key).toString("hex") });
  address = created.data.data.address;
  options = { url: ck.url, token: ck.token, account: address };
  proxy = await startProxy(ck.url);
});
after(async () => { await proxy?.close(); await ck?.stop(); });

const fee = { amount: [{ denom: "uatom", amount: "5000" }], gas: "200000" };
const signerData = { accountNumber: 12345, sequence: 7, chainId: "cosmoshub-4" };
const send = (from) => ({
  typeUrl: "/cosmos.bank.v1beta1.MsgSend",
  value: { fromAddress: from, toAddress: "cosmos1w508d6qejxtdg4y5r3zarvary0c5xw7k6ah60c",
    amount: [{ denom: "uatom", amount: "1234567" }] },
});

test("getAccounts gives the address and public key cosmjs derives from the key", async () => {
  const local = await DirectSecp256k1Wallet.fromKey(key, "cosmos");
  const [mine] = await local.getAccounts();
  const [theirs] = await new ChainkeysCosmosSigner(options).getAccounts();
  assert.equal(theirs.address, mine.address);
  assert.equal(theirs.algo, "secp256k1");
  assert.deepEqual(Array.from(theirs.pubkey), Array.from(mine.pubkey));
});

test("SigningStargateClient.sign (direct): TxRaw bytes equal cosmjs' own wallet's", async () => {
  const local = await DirectSecp256k1Wallet.fromKey(key, "cosmos");
  const viaChainkeys = await (await SigningStargateClient.offline(new ChainkeysCosmosSigner(options)))
    .sign(address, [send(address)], fee, "paid by js", signerData);
  const viaCosmjs = await (await SigningStargateClient.offline(local))
    .sign(address, [send(address)], fee, "paid by js", signerData);
  assert.equal(toBase64(TxRaw.encode(viaChainkeys).finish()), toBase64(TxRaw.encode(viaCosmjs).finish()));
});

test("SigningStargateClient.sign (amino): TxRaw bytes equal cosmjs' Secp256k1Wallet's", async () => {
  const ckSigner = new ChainkeysCosmosSigner(options);
  // an amino-only view of the adapter, so the client takes the amino path
  const aminoOnly = { getAccounts: () => ckSigner.getAccounts(), signAmino: (a, d) => ckSigner.signAmino(a, d) };
  const local = await Secp256k1Wallet.fromKey(key, "cosmos");
  const a = await (await SigningStargateClient.offline(aminoOnly)).sign(address, [send(address)], fee, "amino", signerData);
  const b = await (await SigningStargateClient.offline(local)).sign(address, [send(address)], fee, "amino", signerData);
  assert.equal(toBase64(TxRaw.encode(a).finish()), toBase64(TxRaw.encode(b).finish()));
});

test("signAmino answers the caller's doc and cosmjs' signature", async () => {
  const doc = makeSignDoc([{ type: "cosmos-sdk/MsgSend", value: { from_address: address,
    to_address: "cosmos1w508d6qejxtdg4y5r3zarvary0c5xw7k6ah60c", amount: [{ denom: "uatom", amount: "1" }] } }],
  fee, "cosmoshub-4", "<&>", 12345, 7);
  const ours = await new ChainkeysCosmosSigner(options).signAmino(address, doc);
  const theirs = await (await Secp256k1Wallet.fromKey(key, "cosmos")).signAmino(address, doc);
  assert.deepEqual(ours, theirs);
});

test("signArbitrary: an ADR-036 signature that verifies and equals cosmjs signing the same doc", async () => {
  const signer = new ChainkeysCosmosSigner(options);
  for (const data of ["I own this address", new Uint8Array([0, 1, 2, 255])]) {
    const sig = await signer.signArbitrary("cosmoshub-4", address, data);
    const bytes = typeof data === "string" ? new TextEncoder().encode(data) : data;
    const doc = makeSignDoc([{ type: "sign/MsgSignData", value: { signer: address, data: toBase64(bytes) } }],
      { gas: "0", amount: [] }, "", "", 0, 0);
    const ok = await Secp256k1.verifySignature(Secp256k1Signature.fromFixedLength(fromBase64(sig.signature)),
      sha256(serializeSignDoc(doc)), fromBase64(sig.pub_key.value));
    assert.ok(ok, "the ADR-036 signature verifies");
    const local = await (await Secp256k1Wallet.fromKey(key, "cosmos")).signAmino(address, doc);
    assert.deepEqual(sig, local.signature);
  }
});

test("a refusal is a ChainkeysError with the envelope's code", async () => {
  const signer = new ChainkeysCosmosSigner(options);
  await assert.rejects(
    (await SigningStargateClient.offline(signer)).sign(address, [send(address)], fee, "",
      { ...signerData, chainId: "osmosis-1" }),
    (e) => e instanceof ChainkeysError && e.status === 400 && e.code === "wrong_chain",
  );
  await assert.rejects(signer.signDirect("cosmos1someoneelse", {}),
    (e) => e instanceof ChainkeysError && e.code === "unknown_signer");
});

// ---- the answer is checked: a proxy between the signer and the server alters it ---------------

const N = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n;
const toBig = (bytes) => BigInt("0x" + Buffer.from(bytes).toString("hex"));
const fromBig = (n) => Uint8Array.from(Buffer.from(n.toString(16).padStart(64, "0"), "hex"));

/** A 64-byte r||s signature of sha256(bytes) by `priv` (low S). */
async function rawSign(priv, bytes) {
  const sig = await Secp256k1.createSignature(sha256(bytes), priv);
  return new Uint8Array([...sig.r(32), ...sig.s(32)]);
}

/** The bytes a sign request asks to sign, from the request body the proxy saw. */
function signBytesOf(request) {
  if (request.signDoc?.bodyBytes !== undefined) {
    const d = request.signDoc;
    return makeSignBytes({ bodyBytes: fromBase64(d.bodyBytes), authInfoBytes: fromBase64(d.authInfoBytes),
      chainId: d.chainId, accountNumber: BigInt(d.accountNumber) });
  }
  if (request.signDoc) return serializeSignDoc(request.signDoc);
  return serializeSignDoc(makeSignDoc([{ type: "sign/MsgSignData", value: { signer: address, data: request.data } }],
    { gas: "0", amount: [] }, "", "", 0, 0));
}

/** The ways a sign answer is altered; each must make the adapter throw answer_mismatch. */
const FORGERIES = {
  "a signature by another key (pub_key kept)": async (data, request) => {
    data.signature.signature = toBase64(await rawSign(otherKey, signBytesOf(request)));
  },
  "a swapped pub_key (another key's valid signature)": async (data, request) => {
    const { pubkey } = await Secp256k1.makeKeypair(otherKey);
    data.signature.signature = toBase64(await rawSign(otherKey, signBytesOf(request)));
    data.signature.pub_key.value = toBase64(Secp256k1.compressPubkey(pubkey));
  },
  "a flipped signature byte": (data) => {
    const sig = fromBase64(data.signature.signature);
    sig[5] ^= 0x01;
    data.signature.signature = toBase64(sig);
  },
  "a high-S twin of the signature": (data) => {
    const sig = fromBase64(data.signature.signature);
    const high = fromBig(N - toBig(sig.subarray(32)));
    data.signature.signature = toBase64(new Uint8Array([...sig.subarray(0, 32), ...high]));
  },
  "a DER signature": (data) => {
    const sig = fromBase64(data.signature.signature);
    data.signature.signature = toBase64(Secp256k1Signature.fromFixedLength(sig).toDer());
  },
  "the account's signature of another document": async (data, request) => {
    const other = structuredClone(request);
    if (other.signDoc?.bodyBytes !== undefined) other.signDoc.chainId = "cosmoshub-5";
    else if (other.signDoc) other.signDoc.memo += "!";
    else other.data = toBase64(new Uint8Array([9, 9, 9]));
    data.signature.signature = toBase64(await rawSign(key, signBytesOf(other)));
  },
};

async function through(change, call) {
  proxy.alter = change;
  try {
    return await call(new ChainkeysCosmosSigner({ ...options, url: proxy.url }));
  } finally {
    proxy.alter = null;
  }
}

const ENDPOINTS = {
  "signDirect (SigningStargateClient)": ["/sign-direct", async (signer) =>
    (await SigningStargateClient.offline(signer)).sign(address, [send(address)], fee, "via proxy", signerData)],
  "signAmino": ["/sign-amino", (signer) => signer.signAmino(address, makeSignDoc([{ type: "cosmos-sdk/MsgSend",
    value: { from_address: address, to_address: "cosmos1w508d6qejxtdg4y5r3zarvary0c5xw7k6ah60c",
      amount: [{ denom: "uatom", amount: "1" }] } }], fee, "cosmoshub-4", "via proxy", 12345, 7))],
  "signArbitrary": ["/sign-message", (signer) => signer.signArbitrary("cosmoshub-4", address, "I own this address")],
};

for (const [name, [suffix, call]] of Object.entries(ENDPOINTS)) {
  test(`${name}: through the proxy, an honest answer passes; every altered answer is answer_mismatch`, async () => {
    const honest = await through(onSign(suffix, () => undefined), call);
    assert.ok(honest);
    assert.ok(proxy.altered > 0);
    for (const [what, change] of Object.entries(FORGERIES)) {
      await assert.rejects(through(onSign(suffix, change), call), mismatch, what);
    }
  });
}

test("a signed document that is not the one sent is answer_mismatch (direct and amino)", async () => {
  const [, direct] = ENDPOINTS["signDirect (SigningStargateClient)"];
  for (const change of [
    (data) => { data.signed.bodyBytes = toBase64(new Uint8Array([1, 2, 3])); },
    (data) => { data.signed.chainId = "cosmoshub-5"; },
    (data) => { data.signed.accountNumber = "1"; },
    (data) => { data.signed.authInfoBytes = ""; },
  ]) {
    await assert.rejects(through(onSign("/sign-direct", change), direct), mismatch);
  }
  const [, amino] = ENDPOINTS.signAmino;
  await assert.rejects(through(onSign("/sign-amino", (data) => { data.signed.memo = "changed"; }), amino), mismatch);
  await assert.rejects(through(onSign("/sign-amino", (data) => { delete data.signed; }), amino), mismatch);
});

test("an account answer with another public key is answer_mismatch (the key must hash to the address)", async () => {
  const { pubkey } = await Secp256k1.makeKeypair(otherKey);
  const other = toBase64(Secp256k1.compressPubkey(pubkey));
  const change = (req, answer) => {
    if (req.method === "GET" && req.path === `/cosmos/${address}`) {
      answer.data.data.pubkey = JSON.stringify({ "@type": "/cosmos.crypto.secp256k1.PubKey", key: other });
    }
    return answer;
  };
  await assert.rejects(through(change, (signer) => signer.getAccounts()), mismatch);
  await assert.rejects(through(change, (signer) => signer.signArbitrary("cosmoshub-4", address, "x")), mismatch);
});

test("a 2-of-3 multisig: the service's member signature and a local wallet's combine into the transaction", async () => {
  const { ChainkeysCosmosMultisig } = await import("../dist/index.js");
  const { createMultisigThresholdPubkey, encodeSecp256k1Pubkey, pubkeyToAddress } = await import("@cosmjs/amino");
  const { decodeTxRaw } = await import("@cosmjs/proto-signing");
  const held = await Secp256k1Wallet.fromKey(fromHex(vectorKey("scalar-three").private_key_hex), "cosmos");
  const local = await Secp256k1Wallet.fromKey(otherKey, "cosmos");
  const [heldAccount] = await held.getAccounts();
  const [me] = await local.getAccounts();
  await ck.api("POST", "/cosmos", { private_key: vectorKey("scalar-three").private_key_hex });
  const offline = (await Secp256k1Wallet.fromKey(fromHex("11".repeat(32)), "cosmos"));
  const [off] = await offline.getAccounts();
  const keys = [me.pubkey, heldAccount.pubkey, off.pubkey];
  const registered = await ck.api("POST", "/cosmos/multisig", { threshold: 2,
    public_keys: keys.map((k) => Buffer.from(k).toString("hex")) });
  const threshold = createMultisigThresholdPubkey(keys.map((k) => encodeSecp256k1Pubkey(k)), 2);
  const multisig = pubkeyToAddress(threshold, "cosmos");
  assert.equal(registered.data.address, multisig);

  const ms = new ChainkeysCosmosMultisig({ url: ck.url, token: ck.token, account: multisig });
  assert.deepEqual(await ms.pubkey(), threshold);
  const doc = makeSignDoc([{ type: "cosmos-sdk/MsgSend", value: { from_address: multisig,
    to_address: me.address, amount: [{ denom: "uatom", amount: "1000" }] } }], fee, "cosmoshub-4", "rent", 9, 0);
  const ours = await ms.signAmino(doc);
  assert.equal(ours.length, 1);
  const theirs = (await local.signAmino(me.address, doc)).signature;
  const { signedTx, txHash } = await ms.combine(doc, [ours[0], theirs]);
  const tx = decodeTxRaw(signedTx);
  assert.equal(tx.body.memo, "rent");
  assert.equal(txHash, Buffer.from(sha256(signedTx)).toString("hex").toUpperCase());
  for (const sig of [ours[0], theirs]) {
    assert.ok(await Secp256k1.verifySignature(Secp256k1Signature.fromFixedLength(fromBase64(sig.signature)),
      sha256(serializeSignDoc(doc)), fromBase64(sig.pub_key.value)));
  }
  await assert.rejects(ms.combine(doc, [theirs]), (e) => e instanceof ChainkeysError && e.code === "invalid_signature");
});
