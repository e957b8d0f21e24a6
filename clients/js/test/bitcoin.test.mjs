import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import * as bitcoin from "bitcoinjs-lib";
import * as ecc from "tiny-secp256k1";
import { ECPairFactory } from "ecpair";
import { signPsbt, ChainkeysError } from "../dist/index.js";
import { startChainkeys, vectorKey } from "./server.mjs";

const NETWORKS = {
  dogecoin: { messagePrefix: "\x19Dogecoin Signed Message:\n", bech32: "doge",
    bip32: { public: 0x02facafd, private: 0x02fac398 }, pubKeyHash: 0x1e, scriptHash: 0x16, wif: 0x9e },
  litecoin: { messagePrefix: "\x19Litecoin Signed Message:\n", bech32: "ltc",
    bip32: { public: 0x019da462, private: 0x019d9cfe }, pubKeyHash: 0x30, scriptHash: 0x32, wif: 0xb0 },
};
const ECPair = ECPairFactory(ecc);
const vec = vectorKey("bitcoin-wiki-wif-example");
const privateKey = Buffer.from(vec.private_key_hex, "hex");
let ck, ltcAddress, dogeAddress;

before(async () => {
  ck = await startChainkeys();
  ltcAddress = (await ck.api("POST", "/litecoin", { private_key: vec.private_key_hex, address_type: "p2wpkh" })).address;
  dogeAddress = (await ck.api("POST", "/dogecoin", { private_key: vec.private_key_hex })).address;
});
after(() => ck?.stop());

/** A deposit to the account, then a PSBT spending it (as a wallet builds them). */
function buildPsbt(coin, kind, owner = privateKey) {
  const network = NETWORKS[coin];
  const pubkey = ECPair.fromPrivateKey(owner, { network }).publicKey;
  const pay = kind === "p2wpkh" ? bitcoin.payments.p2wpkh({ pubkey, network }) : bitcoin.payments.p2pkh({ pubkey, network });
  const fund = new bitcoin.Transaction();
  fund.version = 1;
  fund.addInput(Buffer.alloc(32, 7), 0);
  fund.addOutput(pay.output, 150_000_000n);
  const psbt = new bitcoin.Psbt({ network });
  const input = { hash: fund.getId(), index: 0, nonWitnessUtxo: fund.toBuffer() };
  if (kind === "p2wpkh") input.witnessUtxo = { script: pay.output, value: 150_000_000n };
  psbt.addInput(input);
  const to = bitcoin.payments.p2pkh({ hash: Buffer.alloc(20, 1), network }).address;
  psbt.addOutput({ address: to, value: 100_000_000n });
  psbt.addOutput({ address: pay.address, value: 49_990_000n }); // change
  return { psbt, address: pay.address, network };
}

function signLocally(psbt, network) {
  const local = bitcoin.Psbt.fromBase64(psbt.toBase64(), { network });
  local.signInput(0, ECPair.fromPrivateKey(privateKey, { network }));
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
