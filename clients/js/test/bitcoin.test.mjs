import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import * as bitcoin from "bitcoinjs-lib";
import * as ecc from "tiny-secp256k1";
import { ECPairFactory } from "ecpair";
import { signPsbt, ChainkeysError } from "../dist/index.js";
import { startChainkeys, vectorKey } from "./server.mjs";
import { startProxy, onSign, mismatch } from "./proxy.mjs";

const NETWORKS = {
  dogecoin: { messagePrefix: "\x19Dogecoin Signed Message:\n", bech32: "doge",
    bip32: { public: 0x02facafd, private: 0x02fac398 }, pubKeyHash: 0x1e, scriptHash: 0x16, wif: 0x9e },
  litecoin: { messagePrefix: "\x19Litecoin Signed Message:\n", bech32: "ltc",
    bip32: { public: 0x019da462, private: 0x019d9cfe }, pubKeyHash: 0x30, scriptHash: 0x32, wif: 0xb0 },
};
const ECPair = ECPairFactory(ecc);
const vec = vectorKey("bitcoin-wiki-wif-example");
const privateKey = Buffer.from(vec.private_key_hex, "hex");
const otherKey = Buffer.from(vectorKey("scalar-two").private_key_hex, "hex");
const p2shKey = Buffer.from(vectorKey("scalar-three").private_key_hex, "hex");
let ck, proxy, ltcAddress, dogeAddress, ltcP2shAddress;

before(async () => {
  ck = await startChainkeys();
  ltcAddress = (await ck.api("POST", "/litecoin", { private_key: vec.private_key_hex, address_type: "p2wpkh" })).address;
  dogeAddress = (await ck.api("POST", "/dogecoin", { private_key: vec.private_key_hex })).address;
  ltcP2shAddress = (await ck.api("POST", "/litecoin", { private_key: vectorKey("scalar-three").private_key_hex,
    address_type: "p2sh-p2wpkh" })).address;
  proxy = await startProxy(ck.url);
});
after(async () => { await proxy?.close(); await ck?.stop(); });

function payment(kind, pubkey, network) {
  if (kind === "p2wpkh") return bitcoin.payments.p2wpkh({ pubkey, network });
  if (kind === "p2sh-p2wpkh") return bitcoin.payments.p2sh({ redeem: bitcoin.payments.p2wpkh({ pubkey, network }), network });
  return bitcoin.payments.p2pkh({ pubkey, network });
}

/** A deposit to the account, then a PSBT spending it (as a wallet builds them). */
function buildPsbt(coin, kind, owner = privateKey, change = 49_990_000n) {
  const network = NETWORKS[coin];
  const pubkey = ECPair.fromPrivateKey(owner, { network }).publicKey;
  const pay = payment(kind, pubkey, network);
  const fund = new bitcoin.Transaction();
  fund.version = 1;
  fund.addInput(Buffer.alloc(32, 7), 0);
  fund.addOutput(pay.output, 150_000_000n);
  const psbt = new bitcoin.Psbt({ network });
  const input = { hash: fund.getId(), index: 0, nonWitnessUtxo: fund.toBuffer() };
  if (kind !== "p2pkh") input.witnessUtxo = { script: pay.output, value: 150_000_000n };
  psbt.addInput(input);
  const to = bitcoin.payments.p2pkh({ hash: Buffer.alloc(20, 1), network }).address;
  psbt.addOutput({ address: to, value: 100_000_000n });
  psbt.addOutput({ address: pay.address, value: change }); // change
  return { psbt, address: pay.address, network, pay };
}

/** `psbt` signed (input 0) by `signer`, locally; P2SH inputs get their redeem script first. */
function signedLocally(psbt, network, { signer, key = privateKey, pay, sighash } = {}) {
  const local = bitcoin.Psbt.fromBase64(psbt.toBase64(), { network });
  if (pay?.redeem && !local.data.inputs[0].redeemScript) local.updateInput(0, { redeemScript: pay.redeem.output });
  if (sighash) local.updateInput(0, { sighashType: sighash });
  local.signInput(0, signer ?? ECPair.fromPrivateKey(key, { network }), sighash ? [sighash] : undefined);
  return local;
}

function signLocally(psbt, network, opts) {
  const local = signedLocally(psbt, network, opts);
  local.finalizeAllInputs();
  return local.extractTransaction().toHex();
}

for (const [coin, kind] of [["litecoin", "p2wpkh"], ["dogecoin", "p2pkh"]]) {
  test(`${coin} ${kind}: signPsbt({finalize:true}) extracts the transaction bitcoinjs signs locally`, async () => {
    const { psbt, address, network } = buildPsbt(coin, kind);
    assert.equal(address, coin === "litecoin" ? ltcAddress : dogeAddress);
    const before = psbt.toBase64();
    const signed = await signPsbt(psbt, { url: ck.url, token: ck.token, account: address, finalize: true });
    assert.ok(signed instanceof bitcoin.Psbt);
    assert.equal(psbt.toBase64(), before, "the given Psbt is not changed");
    assert.ok(signed.data.inputs[0].finalScriptSig || signed.data.inputs[0].finalScriptWitness, "finalized");
    assert.equal(signed.extractTransaction().toHex(), signLocally(psbt, network));
  });

  test(`${coin} ${kind}: signPsbt({finalize:false}) leaves a valid partial signature`, async () => {
    const { psbt, address, network } = buildPsbt(coin, kind);
    const signed = await signPsbt(psbt, { url: ck.url, token: ck.token, account: address, finalize: false });
    assert.equal(signed.data.inputs[0].partialSig.length, 1);
    assert.ok(signed.validateSignaturesOfInput(0, (pub, hash, sig) => ecc.verify(hash, pub, sig)));
    signed.finalizeAllInputs();
    assert.equal(signed.extractTransaction().toHex(), signLocally(psbt, network));
  });
}

test("a PSBT whose input does not pay the account is refused: not_owner", async () => {
  const { psbt } = buildPsbt("litecoin", "p2wpkh", Buffer.from(vectorKey("scalar-two").private_key_hex, "hex"));
  await assert.rejects(signPsbt(psbt, { url: ck.url, token: ck.token, account: ltcAddress }),
    (e) => e instanceof ChainkeysError && e.status === 400 && e.code === "not_owner");
});

test("the coin comes from the Psbt's network, or from options.coin", async () => {
  const btc = new bitcoin.Psbt();
  await assert.rejects(signPsbt(btc, { url: ck.url, token: ck.token, account: ltcAddress }),
    (e) => e instanceof ChainkeysError && e.code === "unknown_coin");
  const { psbt } = buildPsbt("litecoin", "p2wpkh");
  const bare = bitcoin.Psbt.fromBase64(psbt.toBase64()); // bitcoin's network: coin must be said
  const signed = await signPsbt(bare, { url: ck.url, token: ck.token, account: ltcAddress, coin: "litecoin" });
  assert.equal(signed.extractTransaction().toHex(), signLocally(psbt, NETWORKS.litecoin));
});

// ---- the answer is checked: a proxy between signPsbt and the server alters it ----------------


/** signPsbt through the proxy, with `change(answerPsbt, sentPsbt)` altering the answer's PSBT. */
async function viaProxy(psbt, address, finalize, change) {
  const network = psbt.opts?.network;
  proxy.alter = change && onSign("/sign-psbt", (data, request) => {
    const answer = bitcoin.Psbt.fromBase64(data.psbt, { network });
    const replaced = change(answer, bitcoin.Psbt.fromBase64(request.psbt, { network }));
    data.psbt = typeof replaced === "string" ? replaced : (replaced ?? answer).toBase64();
  });
  try {
    return await signPsbt(psbt, { url: proxy.url, token: ck.token, account: address, finalize });
  } finally {
    proxy.alter = null;
  }
}

/** A signer that claims the account's key but signs with another. */
const impostor = (network) => ({
  publicKey: ECPair.fromPrivateKey(privateKey, { network }).publicKey,
  sign: (hash) => ECPair.fromPrivateKey(otherKey, { network }).sign(hash),
});

const flip = (bytes, at) => { const b = Uint8Array.from(bytes); b[at] ^= 0x01; return b; };

for (const [coin, kind, key] of [["litecoin", "p2wpkh", privateKey], ["dogecoin", "p2pkh", privateKey],
  ["litecoin", "p2sh-p2wpkh", p2shKey]]) {
  const address = () => (kind === "p2sh-p2wpkh" ? ltcP2shAddress : coin === "litecoin" ? ltcAddress : dogeAddress);

  test(`${coin} ${kind}: through the proxy, an honest answer passes every check (finalize true and false)`, async () => {
    const { psbt, network, pay } = buildPsbt(coin, kind, key);
    assert.equal(pay.address, address());
    const final = await viaProxy(psbt, address(), true);
    assert.equal(final.extractTransaction().toHex(), signLocally(psbt, network, { key, pay }));
    const partial = await viaProxy(psbt, address(), false);
    assert.equal(partial.data.inputs[0].partialSig.length, 1);
    partial.finalizeAllInputs();
    assert.equal(partial.extractTransaction().toHex(), signLocally(psbt, network, { key, pay }));
  });

  test(`${coin} ${kind}: a PSBT whose unsigned transaction differs (signed by the account's key) is refused`, async () => {
    const { psbt } = buildPsbt(coin, kind, key);
    for (const finalize of [true, false]) {
      await assert.rejects(viaProxy(psbt, address(), finalize, () => {
        const other = buildPsbt(coin, kind, key, 40_000_000n); // 9.99 coins more fee, to nobody's change
        const signed = signedLocally(other.psbt, other.network, { key, pay: other.pay });
        if (finalize) signed.finalizeAllInputs();
        return signed;
      }), mismatch);
    }
  });

  test(`${coin} ${kind}: a partial signature by another key, of another key, flipped, or not SIGHASH_ALL is refused`, async () => {
    const { psbt, network, pay } = buildPsbt(coin, kind, key);
    const account = ECPair.fromPrivateKey(key, { network });
    const forged = {
      "by another key": () => signedLocally(psbt, network, { pay, signer: { publicKey: account.publicKey,
        sign: (h) => ECPair.fromPrivateKey(otherKey, { network }).sign(h) } }).data.inputs[0].partialSig,
      "of another key": (sig) => [{ pubkey: ECPair.fromPrivateKey(otherKey, { network }).publicKey, signature: sig.signature }],
      "with a flipped byte": (sig) => [{ pubkey: sig.pubkey, signature: flip(sig.signature, 12) }],
      "SIGHASH_NONE": () => signedLocally(psbt, network, { key, pay, sighash: bitcoin.Transaction.SIGHASH_NONE })
        .data.inputs[0].partialSig,
    };
    for (const [what, make] of Object.entries(forged)) {
      await assert.rejects(viaProxy(psbt, address(), false, (answer) => {
        answer.data.inputs[0].partialSig = make(answer.data.inputs[0].partialSig[0]);
      }), mismatch, what);
    }
  });

  test(`${coin} ${kind}: a final script signed by another key, or with a flipped byte, is refused`, async () => {
    const { psbt, network, pay } = buildPsbt(coin, kind, key);
    const account = ECPair.fromPrivateKey(key, { network });
    await assert.rejects(viaProxy(psbt, address(), true, (answer) => {
      const forged = signedLocally(psbt, network, { pay, signer: { publicKey: account.publicKey,
        sign: (h) => ECPair.fromPrivateKey(otherKey, { network }).sign(h) } });
      forged.finalizeAllInputs();
      return forged;
    }), mismatch, "another key");
    await assert.rejects(viaProxy(psbt, address(), true, (answer) => {
      const input = answer.data.inputs[0];
      if (input.finalScriptWitness) input.finalScriptWitness = flip(input.finalScriptWitness, 12);
      else input.finalScriptSig = flip(input.finalScriptSig, 12);
    }), mismatch, "flipped");
  });
}

test("an answer with no new signature, a PSBT that does not parse, or a field a signer does not add is refused", async () => {
  const { psbt } = buildPsbt("litecoin", "p2wpkh");
  await assert.rejects(viaProxy(psbt, ltcAddress, true, (answer, sent) => sent), mismatch, "the PSBT sent, unsigned");
  await assert.rejects(viaProxy(psbt, ltcAddress, true, () => "bm90IGEgcHNidA=="), mismatch, "not a PSBT");
  await assert.rejects(viaProxy(psbt, ltcAddress, false, (answer) => {
    answer.data.addUnknownKeyValToOutput(0, { key: Buffer.from([0xfc, 0x01]), value: Buffer.from([0x01]) });
  }), mismatch, "an output field");
  await assert.rejects(viaProxy(psbt, ltcAddress, false, (answer) => {
    answer.data.addUnknownKeyValToInput(0, { key: Buffer.from([0xfc, 0x02]), value: Buffer.from([0x02]) });
  }), mismatch, "an input field");
});

test("a field the server changed where the caller's PSBT has it does not slip in: combine keeps the caller's", async () => {
  const { psbt, network } = buildPsbt("litecoin", "p2wpkh");
  const signed = await viaProxy(psbt, ltcAddress, false, (answer) => {
    answer.data.inputs[0].witnessUtxo = { ...answer.data.inputs[0].witnessUtxo, value: 1n };
    delete answer.data.inputs[0].nonWitnessUtxo; // dropped: the caller's stays
  });
  assert.equal(signed.data.inputs[0].witnessUtxo.value, 150_000_000n);
  assert.ok(signed.data.inputs[0].nonWitnessUtxo);
  signed.finalizeAllInputs();
  assert.equal(signed.extractTransaction().toHex(), signLocally(psbt, network));
});

test("a PSBT the account already signed: the same signature again passes, and finalizing it too", async () => {
  const { psbt, network } = buildPsbt("litecoin", "p2wpkh");
  const once = await viaProxy(psbt, ltcAddress, false);
  const again = await viaProxy(once, ltcAddress, false);
  assert.equal(again.data.inputs[0].partialSig.length, 1);
  const final = await viaProxy(once, ltcAddress, true);
  assert.equal(final.extractTransaction().toHex(), signLocally(psbt, network));
});

test("options.ecc replaces tiny-secp256k1, and is what checks the signatures", async () => {
  const { psbt } = buildPsbt("litecoin", "p2wpkh");
  let calls = 0;
  const ecc1 = { verify: (...a) => { calls++; return ecc.verify(...a); } };
  await signPsbt(psbt, { url: ck.url, token: ck.token, account: ltcAddress, finalize: false, ecc: ecc1 });
  assert.equal(calls, 1);
  await assert.rejects(signPsbt(psbt, { url: ck.url, token: ck.token, account: ltcAddress, ecc: { verify: () => false } }),
    mismatch);
});

for (const [coin, kind] of [["litecoin", "p2wsh"], ["litecoin", "p2sh-p2wsh"], ["dogecoin", "p2sh"]]) {
  test(`${coin} ${kind} 2-of-3 multisig: signPsbt adds the service's member signature, a local wallet the other`, async () => {
    const network = NETWORKS[coin];
    const held = ECPair.makeRandom({ network });
    const local = ECPair.makeRandom({ network });
    const offline = ECPair.makeRandom({ network });
    await ck.api("POST", `/${coin}`, { private_key: Buffer.from(held.privateKey).toString("hex") });
    const ms = await ck.api("POST", `/${coin}/multisig`, { threshold: 2, address_type: coin === "litecoin" ? kind : undefined,
      public_keys: [local, held, offline].map((k) => Buffer.from(k.publicKey).toString("hex")) });
    const pubkeys = [held, local, offline].map((k) => Buffer.from(k.publicKey)).sort(Buffer.compare);
    const redeem = bitcoin.payments.p2ms({ m: 2, pubkeys, network });
    const wsh = bitcoin.payments.p2wsh({ redeem, network });
    const pay = kind === "p2wsh" ? wsh : kind === "p2sh-p2wsh" ? bitcoin.payments.p2sh({ redeem: wsh, network })
      : bitcoin.payments.p2sh({ redeem, network });
    assert.equal(ms.data.address, pay.address);
    const fund = new bitcoin.Transaction();
    fund.version = 1;
    fund.addInput(Buffer.alloc(32, 9), 0);
    fund.addOutput(pay.output, 10_000_000n);
    const psbt = new bitcoin.Psbt({ network });
    const input = { hash: fund.getId(), index: 0, nonWitnessUtxo: fund.toBuffer() };
    if (kind !== "p2sh") Object.assign(input, { witnessUtxo: { script: pay.output, value: 10_000_000n }, witnessScript: redeem.output });
    if (kind === "p2sh-p2wsh") input.redeemScript = wsh.output;
    if (kind === "p2sh") input.redeemScript = redeem.output;
    psbt.addInput(input);
    psbt.addOutput({ address: bitcoin.payments.p2pkh({ hash: Buffer.alloc(20, 1), network }).address, value: 9_995_000n });
    const opts = { url: ck.url, token: ck.token, account: ms.data.address };

    // the service first: one signature of two, not finalized; the local wallet adds its own
    const signed = await signPsbt(psbt, opts);
    assert.equal(signed.data.inputs[0].partialSig.length, 1);
    assert.equal(signed.data.inputs[0].finalScriptWitness ?? signed.data.inputs[0].finalScriptSig, undefined);
    signed.signInput(0, local);
    assert.ok(signed.validateSignaturesOfAllInputs((pub, hash, sig) => ecc.verify(hash, pub, sig)));
    signed.finalizeAllInputs();
    const hex = signed.extractTransaction().toHex();

    // the local wallet first: the service's signature completes it and signPsbt finalizes
    const first = bitcoin.Psbt.fromBase64(psbt.toBase64(), { network });
    first.signInput(0, local);
    const done = await signPsbt(first, opts);
    assert.equal(done.extractTransaction().toHex(), hex);
  });
}
