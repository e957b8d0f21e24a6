// Independent HD derivation: bip39 + bip32 with bitcoinjs-lib payments (Dogecoin,
// Litecoin), cosmjs DirectSecp256k1HdWallet (Cosmos), bip32 + @wharfkit/antelope (EOS).
// Reads one JSON request on stdin, prints one JSON answer.
import * as bip39 from "bip39";
import { BIP32Factory } from "bip32";
import * as ecc from "tiny-secp256k1";
import * as bitcoin from "bitcoinjs-lib";
import { DirectSecp256k1HdWallet } from "@cosmjs/proto-signing";
import { stringToPath } from "@cosmjs/crypto";
import { Bytes, KeyType, PrivateKey, PublicKey } from "@wharfkit/antelope";

const bip32 = BIP32Factory(ecc);
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
const HRP = { cosmoshub: "cosmos", osmosis: "osmo", juno: "juno", akash: "akash",
  stargaze: "stars", celestia: "celestia", "cosmoshub-testnet": "cosmos", "osmosis-testnet": "osmo" };

function utxoAddress(family, network, type, pubkey) {
  const net = NETWORKS[`${family}/${network}`];
  if (type === "p2wpkh") return bitcoin.payments.p2wpkh({ pubkey, network: net }).address;
  if (type === "p2sh-p2wpkh") {
    return bitcoin.payments.p2sh({ redeem: bitcoin.payments.p2wpkh({ pubkey, network: net }), network: net }).address;
  }
  return bitcoin.payments.p2pkh({ pubkey, network: net }).address;
}

async function address(item, seed, mnemonic, passphrase) {
  if (item.family === "cosmos") {
    const wallet = await DirectSecp256k1HdWallet.fromMnemonic(mnemonic, {
      bip39Password: passphrase, hdPaths: [stringToPath(item.path)], prefix: HRP[item.network] });
    const [acct] = await wallet.getAccounts();
    return { address: acct.address };
  }
  const node = bip32.fromSeed(seed).derivePath(item.path);
  if (item.family === "eos") {
    const key = new PrivateKey(KeyType.K1, Bytes.from(Buffer.from(node.privateKey)));
    return { public_key: key.toPublic().toLegacyString() };
  }
  return { address: utxoAddress(item.family, item.network, item.type, Buffer.from(node.publicKey)) };
}

const req = JSON.parse(await new Promise((r) => {
  let s = ""; process.stdin.on("data", (c) => (s += c)); process.stdin.on("end", () => r(s));
}));
let out;
switch (req.action) {
  case "derive": {
    if (!bip39.validateMnemonic(req.mnemonic)) throw new Error("invalid mnemonic");
    const seed = bip39.mnemonicToSeedSync(req.mnemonic, req.passphrase || "");
    out = { seed: Buffer.from(seed).toString("hex"), fingerprint: Buffer.from(bip32.fromSeed(seed).fingerprint).toString("hex"),
      items: [] };
    for (const item of req.items) out.items.push(await address(item, seed, req.mnemonic, req.passphrase || ""));
    break;
  }
  case "from_xpub": {
    // Parse with the version bytes the answer claims, derive change/index publicly.
    const net = { ...bitcoin.networks.bitcoin, bip32: { public: req.version, private: 0 } };
    const account = bip32.fromBase58(req.xpub, net);
    out = { depth: account.depth, items: req.items.map((it) => {
      const pub = Buffer.from(account.derive(it.change).derive(it.index).publicKey);
      if (req.family === "cosmos") return { public_key: pub.toString("base64") };
      if (req.family === "eos") return { public_key: new PublicKey(KeyType.K1, Bytes.from(pub)).toLegacyString() };
      return { address: utxoAddress(req.family, req.network, req.type, pub) };
    }) };
    break;
  }
  case "multisig_from_xpubs": {
    // An HD multisig's addresses from its members' extended keys alone, as a watch-only
    // coordinator derives them: each key's 0/index child, sorted (sortedmulti), p2ms in
    // p2wsh (or p2sh-p2wsh). Keys are given with their version bytes.
    const net = NETWORKS[`${req.family}/${req.network}`];
    const nodes = req.xpubs.map(({ xpub, version }) =>
      bip32.fromBase58(xpub, { ...bitcoin.networks.bitcoin, bip32: { public: version, private: 0 } }));
    out = req.indices.map((index) => {
      const pubkeys = nodes.map((n) => Buffer.from(n.derive(0).derive(index).publicKey)).sort(Buffer.compare);
      const wsh = bitcoin.payments.p2wsh({ redeem: bitcoin.payments.p2ms({ m: req.m, pubkeys, network: net }), network: net });
      const pay = req.type === "p2wsh" ? wsh : bitcoin.payments.p2sh({ redeem: wsh, network: net });
      return { address: pay.address, pubkeys: pubkeys.map((k) => k.toString("hex")) };
    });
    break;
  }
  case "mnemonic_ok":
    out = { valid: bip39.validateMnemonic(req.mnemonic), words: req.mnemonic.split(" ").length };
    break;
  default:
    throw new Error("unknown action " + req.action);
}
process.stdout.write(JSON.stringify(out));
