import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { Secp256k1, Secp256k1Signature, sha256 } from "@cosmjs/crypto";
import { fromBase64, fromHex, toBase64 } from "@cosmjs/encoding";
import { makeSignDoc, serializeSignDoc, Secp256k1Wallet } from "@cosmjs/amino";
import { DirectSecp256k1Wallet } from "@cosmjs/proto-signing";
import { SigningStargateClient } from "@cosmjs/stargate";
import { TxRaw } from "cosmjs-types/cosmos/tx/v1beta1/tx";
import { ChainkeysCosmosSigner, ChainkeysError } from "../dist/index.js";
import { startChainkeys, vectorKey } from "./server.mjs";

let ck, address, options;
const key = fromHex(vectorKey("bitcoin-wiki-wif-example").private_key_hex);

before(async () => {
  ck = await startChainkeys();
  const created = await ck.api("POST", "/cosmos", { private_key: Buffer.from(key).toString("hex") });
  address = created.data.data.address;
  options = { url: ck.url, token: ck.token, account: address };
});
after(() => ck?.stop());

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
