// Independent checks of chainkeys' Dogecoin/Litecoin signatures with bitcoinjs-lib,
// bitcoinjs-message and tiny-secp256k1. Reads one JSON request on stdin, prints one answer.
import * as bitcoin from "bitcoinjs-lib";
import bitcoinMessage from "bitcoinjs-message";
import * as ecc from "tiny-secp256k1";
import { ECPairFactory } from "ecpair";

const NETWORKS = {
  "dogecoin/mainnet": { messagePrefix: "\x19Dogecoin Signed Message:\n", bech32: "doge",
    bip32: { public: 0x02facafd, private: 0x02fac398 }, pubKeyHash: 0x1e, scriptHash: 0x16, wif: 0x9e },
  "dogecoin/testnet": { messagePrefix: "\x19Dogecoin Signed Message:\n", bech32: "tdge",
    bip32: { public: 0x043587cf, private: 0x04358394 }, pubKeyHash: 0x71, scriptHash: 0xc4, wif: 0xf1 },
  "litecoin/mainnet": { messagePrefix: "\x19Litecoin Signed Message:\n", bech32: "ltc",
    bip32: { public: 0x019da462, private: 0x019d9cfe }, pubKeyHash: 0x30, scriptHash: 0x32, wif: 0xb0 },
  "litecoin/testnet": { messagePrefix: "\x19Litecoin Signed Message:\n", bech32: "tltc",
    bip32: { public: 0x0436f6e1, private: 0x0436ef7d }, pubKeyHash: 0x6f, scriptHash: 0x3a, wif: 0xef },
};

function addressOf(kind, pubkey, network) {
  if (kind === "p2wpkh") return bitcoin.payments.p2wpkh({ pubkey, network }).address;
  if (kind === "p2sh-p2wpkh") {
    return bitcoin.payments.p2sh({ redeem: bitcoin.payments.p2wpkh({ pubkey, network }), network }).address;
  }
  return bitcoin.payments.p2pkh({ pubkey, network }).address;
}

// A transaction paying the account `req.amountIn` in one output, as a wallet's deposit.
function funding(req, seed) {
  const pubkey = Buffer.from(req.pubkey, "hex");
  const pay = req.kind === "p2wpkh" ? bitcoin.payments.p2wpkh({ pubkey, network })
    : req.kind === "p2sh-p2wpkh"
      ? bitcoin.payments.p2sh({ redeem: bitcoin.payments.p2wpkh({ pubkey, network }), network })
      : bitcoin.payments.p2pkh({ pubkey, network });
  const fund = new bitcoin.Transaction();
  fund.version = 1;
  fund.addInput(Buffer.alloc(32, seed), 0);
  fund.addOutput(pay.output, BigInt(req.amountIn));
  return { pay, fund };
}

const req = JSON.parse(await new Promise((r) => {
  let s = ""; process.stdin.on("data", (c) => (s += c)); process.stdin.on("end", () => r(s));
}));
const network = NETWORKS[req.network];
let out;
switch (req.action) {
  case "verify_message": {
    const sig = Buffer.from(req.signature, "base64");
    const header = sig[0];
    const kind = header >= 39 ? "p2wpkh" : header >= 35 ? "p2sh-p2wpkh" : "p2pkh";
    const compressed = header >= 31;
    const recid = (header - 27) & 3;
    const hash = bitcoinMessage.magicHash(req.message, network.messagePrefix);
    const pubkey = Buffer.from(ecc.recover(hash, sig.subarray(1), recid, compressed));
    // bitcoinjs-message does not check the address version byte: rebuild the address here
    const recovered = addressOf(kind, pubkey, network);
    let library = false;
    try {
      library = bitcoinMessage.verify(req.message, req.address, sig, network.messagePrefix, kind !== "p2pkh");
    } catch (e) { library = false; }
    const s = BigInt("0x" + sig.subarray(33).toString("hex"));
    const lowS = s <= BigInt("0x7FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF5D576E7357A4501DDFE92F46681B20A0");
    out = { kind, recovered, matches: recovered === req.address, library, lowS };
    break;
  }
  case "build_psbt": {
    // A funding transaction paying the account, then a PSBT spending it, as a wallet builds them.
    // Attack shapes too: `witnessValue` claims another amount for the input, `foreign` adds
    // inputs of someone else with no UTXO data, an output may be a raw `script`.
    const { pay, fund } = funding(req, 7);
    const psbt = new bitcoin.Psbt({ network });
    psbt.setMaximumFeeRate(2 ** 31);
    const input = { hash: fund.getId(), index: 0 };
    if (req.nonWitness !== false) input.nonWitnessUtxo = req.tamperPrev
      ? (() => { const t = fund.clone(); t.locktime = 9; return t.toBuffer(); })() : fund.toBuffer();
    if (req.witness) {
      input.witnessUtxo = { script: pay.output, value: BigInt(req.witnessValue ?? req.amountIn) };
    }
    if (req.kind === "p2sh-p2wpkh") input.redeemScript = pay.redeem.output;
    if (req.sighashType) input.sighashType = req.sighashType;
    psbt.addInput(input);
    for (let i = 0; i < (req.foreign || 0); i++) psbt.addInput({ hash: Buffer.alloc(32, 0x42 + i), index: i });
    for (const o of req.outputs) {
      const script = o.script ? Buffer.from(o.script, "hex") : bitcoin.address.toOutputScript(o.address, network);
      psbt.addOutput({ script, value: BigInt(o.value) });
    }
    out = { psbt: psbt.toBase64(), fundTxid: fund.getId() };
    break;
  }
  case "build_rawtx": {
    const { pay, fund } = funding(req, 9);
    const tx = new bitcoin.Transaction();
    tx.version = 1;
    tx.addInput(Buffer.from(fund.getId(), "hex").reverse(), 0);
    for (let i = 0; i < (req.foreign || 0); i++) tx.addInput(Buffer.alloc(32, 0x42 + i), i);
    for (const o of req.outputs) {
      tx.addOutput(bitcoin.address.toOutputScript(o.address, network), BigInt(o.value));
    }
    out = { hex: tx.toHex(), fundHex: fund.toHex(), fundTxid: fund.getId(),
            scriptPubKey: Buffer.from(pay.output).toString("hex") };
    break;
  }
  case "check_rawtx": {
    const tx = bitcoin.Transaction.fromHex(req.hex);
    const pubkey = Buffer.from(req.pubkey, "hex");
    const prevScript = Buffer.from(req.scriptPubKey, "hex");
    let sigBuf, hash;
    if (req.kind === "p2pkh") {
      const chunks = bitcoin.script.decompile(tx.ins[0].script);
      sigBuf = chunks[0];
      if (!Buffer.from(chunks[1]).equals(pubkey)) throw new Error("wrong public key");
      hash = tx.hashForSignature(0, prevScript, bitcoin.Transaction.SIGHASH_ALL);
    } else {
      sigBuf = tx.ins[0].witness[0];
      const code = bitcoin.payments.p2pkh({ pubkey }).output;
      hash = tx.hashForWitnessV0(0, code, BigInt(req.value), bitcoin.Transaction.SIGHASH_ALL);
    }
    const decoded = bitcoin.script.signature.decode(Buffer.from(sigBuf));
    const N2 = BigInt("0x7FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF5D576E7357A4501DDFE92F46681B20A0");
    const lowS = BigInt("0x" + Buffer.from(decoded.signature.subarray(32)).toString("hex")) <= N2;
    out = { valid: ecc.verify(hash, pubkey, decoded.signature), lowS,
            hashType: decoded.hashType, txid: tx.getId() };
    break;
  }
  case "check_psbt": {
    const psbt = bitcoin.Psbt.fromBase64(req.psbt, { network });
    psbt.setMaximumFeeRate(2 ** 31);
    const N2 = BigInt("0x7FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF5D576E7357A4501DDFE92F46681B20A0");
    const validator = (pubkey, msghash, signature) =>
      ecc.verify(msghash, pubkey, signature) && BigInt("0x" + Buffer.from(signature.subarray(32)).toString("hex")) <= N2;
    const valid = psbt.validateSignaturesOfAllInputs(validator);
    psbt.finalizeAllInputs();
    const tx = psbt.extractTransaction(true);
    out = { valid, hex: tx.toHex(), txid: tx.getId() };
    break;
  }
  case "extract": {
    const psbt = bitcoin.Psbt.fromBase64(req.psbt, { network });
    psbt.setMaximumFeeRate(2 ** 31);
    const tx = psbt.extractTransaction(true);
    out = { hex: tx.toHex(), txid: tx.getId() };
    break;
  }
  case "sign_psbt": {
    // bitcoinjs signs (RFC 6979, as chainkeys), finalizes and extracts: known answers
    const keyPair = ECPairFactory(ecc).fromPrivateKey(Buffer.from(req.privateKey, "hex"),
      { network, compressed: req.compressed !== false });
    const psbt = bitcoin.Psbt.fromBase64(req.psbt, { network });
    psbt.setMaximumFeeRate(2 ** 31);
    psbt.signAllInputs(keyPair);
    psbt.finalizeAllInputs();
    const tx = psbt.extractTransaction(true);
    out = { hex: tx.toHex(), txid: tx.getId() };
    break;
  }
  case "verify_message_as_input": {
    // Is a message signature (65-byte compact) valid as input 0's signature of this PSBT?
    const psbt = bitcoin.Psbt.fromBase64(req.psbt, { network });
    const tx = psbt.data.globalMap.unsignedTx.tx;
    const pubkey = Buffer.from(req.pubkey, "hex");
    const code = bitcoin.payments.p2pkh({ pubkey }).output;
    const hash = tx.hashForWitnessV0(0, code, BigInt(req.value), bitcoin.Transaction.SIGHASH_ALL);
    const rs = Buffer.from(req.signature, "base64").subarray(1);
    out = { valid: ecc.verify(hash, pubkey, rs) };
    break;
  }
  case "sign_message": {
    // bitcoinjs-message: the coin's magic; BIP137 headers for segwit addresses
    const segwitType = { "p2wpkh": "p2wpkh", "p2sh-p2wpkh": "p2sh(p2wpkh)" }[req.kind];
    const sig = bitcoinMessage.sign(req.message, Buffer.from(req.privateKey, "hex"),
      req.compressed !== false, network.messagePrefix, segwitType ? { segwitType } : undefined);
    out = { signature: sig.toString("base64") };
    break;
  }
  case "multisig_addresses": {
    // bitcoinjs-lib's own payments over the keys sorted as BIP67 sorts them (sortedmulti)
    out = req.sets.map(({ m, pubkeys }) => {
      const keys = pubkeys.map((k) => Buffer.from(k, "hex")).sort(Buffer.compare);
      const ms = bitcoin.payments.p2ms({ m, pubkeys: keys, network });
      const wsh = bitcoin.payments.p2wsh({ redeem: ms, network });
      return {
        "p2wsh": network.bech32 && !req.noSegwit ? wsh.address : null,
        "p2sh-p2wsh": bitcoin.payments.p2sh({ redeem: wsh, network }).address,
        "p2sh": bitcoin.payments.p2sh({ redeem: ms, network }).address,
      };
    });
    break;
  }
  case "build_multisig_psbt": {
    // A deposit to the multisig, then a PSBT spending it, as a coordinator (Sparrow,
    // Electrum, bitcoinjs code) builds it: scripts and previous outputs filled in.
    const keys = req.pubkeys.map((k) => Buffer.from(k, "hex")).sort(Buffer.compare);
    const ms = bitcoin.payments.p2ms({ m: req.m, pubkeys: keys, network });
    const wsh = bitcoin.payments.p2wsh({ redeem: ms, network });
    const pay = req.kind === "p2wsh" ? wsh
      : req.kind === "p2sh-p2wsh" ? bitcoin.payments.p2sh({ redeem: wsh, network })
        : bitcoin.payments.p2sh({ redeem: ms, network });
    const fund = new bitcoin.Transaction();
    fund.version = 1;
    fund.addInput(Buffer.alloc(32, 11), 0);
    fund.addOutput(pay.output, BigInt(req.amountIn));
    const psbt = new bitcoin.Psbt({ network });
    psbt.setMaximumFeeRate(2 ** 31);
    const input = { hash: fund.getId(), index: 0, nonWitnessUtxo: fund.toBuffer() };
    if (req.kind !== "p2sh") {
      input.witnessUtxo = { script: pay.output, value: BigInt(req.amountIn) };
      input.witnessScript = ms.output;
    }
    if (req.kind === "p2sh-p2wsh") input.redeemScript = wsh.output;
    if (req.kind === "p2sh") input.redeemScript = ms.output;
    psbt.addInput(input);
    for (const o of req.outputs) {
      psbt.addOutput({ script: bitcoin.address.toOutputScript(o.address, network), value: BigInt(o.value) });
    }
    out = { psbt: psbt.toBase64(), address: pay.address };
    break;
  }
  case "cosign_psbt": {
    // Another member's key, in a local bitcoinjs wallet: sign, do not finalize
    const keyPair = ECPairFactory(ecc).fromPrivateKey(Buffer.from(req.privateKey, "hex"), { network });
    const psbt = bitcoin.Psbt.fromBase64(req.psbt, { network });
    psbt.setMaximumFeeRate(2 ** 31);
    psbt.signAllInputs(keyPair);
    out = { psbt: psbt.toBase64() };
    break;
  }
  default:
    throw new Error("unknown action " + req.action);
}
process.stdout.write(JSON.stringify(out));
