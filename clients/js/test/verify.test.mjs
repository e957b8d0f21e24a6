// verifyApproval against a real chainkeys server: an approval of every family's kinds,
// as GET /approvals/{id} gives it, is accepted (its digest and summary rebuilt with
// cosmjs, bitcoinjs-lib and @wharfkit/antelope from its raw request); a tampered
// request, summary or digest is named.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { verifyApproval } from "../dist/index.js";
import { NETWORKS } from "../dist/verify-networks.js";
import { CHAINKEYS_BIN, repoRoot, startChainkeys } from "./server.mjs";

const vectors = (name) => JSON.parse(readFileSync(join(repoRoot, "tests/chains/vectors", name), "utf8"));
const COSMOS = vectors("cosmos_signing.json");
const UTXO = vectors("utxo_signing.json");
const ONE = "00".repeat(31) + "01";
const EOS = "custodytest1";
// a Dogecoin spend of the key-1 account's output, with its previous transaction
const RAW = {
  hex: "0100000001a705baa4ff5326976828b8fe90b3945c01112434daa6edd01eecabf2a6799c1d0000000000ffffffff01a0bb0d00000000001976a91491b24bf9f5288532960ac687abb035127b1d28a588ac00000000",
  prevtxs: [{ txid: "1d9c79a6f2abec1ed0eda6da342411015c94b390feb82868972653ffa4ba05a7", vout: 0,
    scriptPubKey: "76a914751e76e8199196d454941c45d1b3a323f1433bd688ac", amount: "0.01",
    hex: "010000000109090909090909090909090909090909090909090909090909090909090909090000000000ffffffff0140420f00000000001976a914751e76e8199196d454941c45d1b3a323f1433bd688ac00000000" }],
};
// an eosio.token transfer of 1.2345 EOS from custodytest1 to exchange1234
const EOS_TX = "000e0e6bd2042e160000000000000100a6823403ea3055000000572d3ccdcd01103256d9279ab14600000000a8ed323222103256d9279ab1464086088a4dd35057393000000000000004454f5300000000016d00";
const EOS_MAINNET = "aca376f206b8fc25a6ed44dbdc66547c36c6c33e3a119ffbeaef943642f0e906";

const JUNGLE4 = "73e4385a2708e6d7048834fbc1079f2fabb17b3c125b146af438971e90716c4d";
const EOS_JUNGLE = "verifyjungle";
// key 1's address and the vectors' recipient, written with Osmosis' prefix
const OSMO_FROM = "osmo1w508d6qejxtdg4y5r3zarvary0c5xw7kjxy2e2";
const OSMO_TO = "osmo1q6hag67dl53wl99vzg42z8eyzfz2xlkvcc4vq7";
// an eosio.token transfer of 1.2345 EOS from verifyjungle to exchange1234
const EOS_JUNGLE_TX = EOS_TX.replaceAll("103256d9279ab146", "a0229bfaf9e5aeda");
const TESTNETS = { "cosmos sign-transfer": "osmosis-testnet", "eos sign-transaction": "jungle4",
  "dogecoin sign-raw-transaction": "testnet", "litecoin sign-psbt": "testnet", "litecoin sign-message": "regtest" };

let ck;
const approvals = {};
const testnets = {};
const run = promisify(execFile);

before(async () => {
  ck = await startChainkeys();
  const env = { ...process.env, CHAINKEYS_MASTER_KEY: "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=", CHAINKEYS_DATA_DIR: ck.dir };
  delete env.CHAINKEYS_BIN;
  const policy = join(ck.dir, "policy.json");
  writeFileSync(policy, JSON.stringify({ rules: ["cosmos", "eos", "litecoin", "dogecoin"].map((family) =>
    ({ family, raw_messages: true, approval: { quorum: 1, group: "g" } })) }));
  await run(CHAINKEYS_BIN, ["policy", "set", "t1", policy, "--data-dir", ck.dir], { env });
  const made = [];
  for (const [family, body] of [["cosmos", {}], ["eos", { name: EOS }], ["dogecoin", {}], ["litecoin", {}]]) {
    const r = await ck.api("POST", `/${family}`, { private_key: ONE, ...body });
    made.push(r.address ?? r.data?.data?.address ?? r.data?.address);
  }
  const [cosmos, , doge, ltc] = made;
  const psbt = (family, kind) => UTXO["sign-psbt"].find((c) => c.family === family && c.kind === kind).request;
  const asked = {
    "cosmos sign-direct": [`/cosmos/${cosmos}/sign-direct`, COSMOS["sign-direct"].request],
    "cosmos sign-amino": [`/cosmos/${cosmos}/sign-amino`, COSMOS["sign-amino"].request],
    "cosmos sign-message": [`/cosmos/${cosmos}/sign-message`, COSMOS["sign-message"].request],
    "cosmos sign-transfer": [`/cosmos/${cosmos}/sign-transfer`, COSMOS["sign-transfer"].request],
    "cosmos sign-ibc-transfer": [`/cosmos/${cosmos}/sign-ibc-transfer`, COSMOS["sign-ibc-transfer"].request],
    "dogecoin sign-raw-transaction": [`/dogecoin/${doge}/sign-raw-transaction`, RAW],
    "dogecoin sign-psbt": [`/dogecoin/${doge}/sign-psbt`, psbt("dogecoin", "p2pkh")],
    "litecoin sign-psbt": [`/litecoin/${ltc}/sign-psbt`, psbt("litecoin", "p2wpkh")],
    "litecoin sign-message": [`/litecoin/${ltc}/sign-message`, { message: "hi" }],
    "eos sign-transaction": [`/eos/${EOS}/sign-transaction`, { chainId: EOS_MAINNET, serializedTransaction: EOS_TX }],
    "eos sign-message": [`/eos/${EOS}/sign-message`, { data: "00ff10" }],
  };
  for (const [name, [path, body]] of Object.entries(asked)) {
    const waiting = await ck.api("POST", path, body);
    assert.equal(waiting.data.state, "pending", name);
    approvals[name] = await ck.api("GET", `/approvals/${waiting.data.id}`);
  }
  // the same requests' kinds on a test network of each family
  const on = async (family, network, body = {}) => {
    const r = await ck.api("POST", `/${family}`, { private_key: ONE, network, ...body });
    return r.address ?? r.data?.data?.address ?? r.data?.address;
  };
  const osmo = await on("cosmos", "osmosis-testnet");
  assert.equal(osmo, OSMO_FROM);
  await on("eos", "jungle4", { name: EOS_JUNGLE });
  const tdoge = await on("dogecoin", "testnet");
  const tltc = await on("litecoin", "testnet");
  const rltc = await on("litecoin", "regtest");
  assert.ok(tltc.startsWith("tltc1") && rltc.startsWith("rltc1") && tdoge.startsWith("n"), [tdoge, tltc, rltc].join());
  const transfer = { ...COSMOS["sign-transfer"].request, fromAddress: osmo, toAddress: OSMO_TO, denom: "uosmo",
    feeDenom: "uosmo", chainId: "osmo-test-5" };
  const onTestnets = {
    "cosmos sign-transfer": [`/cosmos/${osmo}/sign-transfer`, transfer],
    "eos sign-transaction": [`/eos/${EOS_JUNGLE}/sign-transaction`, { chainId: JUNGLE4, serializedTransaction: EOS_JUNGLE_TX }],
    "dogecoin sign-raw-transaction": [`/dogecoin/${tdoge}/sign-raw-transaction`, RAW],
    "litecoin sign-psbt": [`/litecoin/${tltc}/sign-psbt`, psbt("litecoin", "p2wpkh")],
    "litecoin sign-message": [`/litecoin/${rltc}/sign-message`, { message: "hi" }],
  };
  for (const [name, [path, body]] of Object.entries(onTestnets)) {
    const waiting = await ck.api("POST", path, body);
    assert.equal(waiting.data.state, "pending", name);
    testnets[name] = await ck.api("GET", `/approvals/${waiting.data.id}`);
  }
});

after(async () => { await ck?.stop(); });

test("an honest approval of every family's kinds is accepted", async () => {
  for (const [name, approval] of Object.entries(approvals)) {
    const check = await verifyApproval(approval);
    assert.deepEqual(check, { ok: true, differences: [] }, name);
  }
});

test("a tampered request, summary or digest is named", async () => {
  const honest = approvals["cosmos sign-transfer"].data;
  const shown = structuredClone(honest);
  shown.summary.items[0].amounts[0].display = "0.009 ATOM";
  assert.deepEqual((await verifyApproval(shown)).differences, [
    `summary.items[0].amounts[0].display: the approval says "0.009 ATOM", the request says ${JSON.stringify(honest.summary.items[0].amounts[0].display)}`]);
  const digest = { ...honest, digest: "00".repeat(32) };
  assert.deepEqual((await verifyApproval(digest)).differences.map((d) => d.split(":")[0]), ["digest"]);
  const request = structuredClone(honest);
  request.request.toAddress = honest.request.fromAddress;
  const named = (await verifyApproval(request)).differences;
  assert.ok(named.some((d) => d.startsWith("digest:")), named);
  assert.ok(named.some((d) => d.startsWith("summary.items[0].recipient:")), named);
  const eos = structuredClone(approvals["eos sign-transaction"].data);
  eos.summary.items[0].recipient = "attacker1234";
  assert.ok((await verifyApproval(eos)).differences.some((d) => d.startsWith("summary.items[0].recipient:")));
  const psbt = structuredClone(approvals["litecoin sign-psbt"].data);
  psbt.summary.fee[0].amount = "1";
  assert.ok((await verifyApproval(psbt)).differences.some((d) => d.startsWith("summary.fee[0].amount:")));
  assert.deepEqual((await verifyApproval({ ...honest, kind: "sign-other" })).differences,
    ["cosmos sign-other: not verified by this client"]);
  assert.equal((await verifyApproval({ id: "apr_x" })).ok, false);
});

test("an honest approval on a test network of every family is accepted", async () => {
  for (const [name, approval] of Object.entries(testnets)) {
    assert.equal(approval.data.summary.network, TESTNETS[name], name);
    assert.deepEqual(await verifyApproval(approval), { ok: true, differences: [] }, name);
  }
});

test("a tampered testnet approval is named, and so is a network this client does not know", async () => {
  const first = (differences) => differences.map((d) => d.split(":")[0]);
  const psbt = testnets["litecoin sign-psbt"].data;
  const shown = structuredClone(psbt); // the same output, shown as the mainnet address it is not
  shown.summary.items[0].recipient = "ltc1qw508d6qejxtdg4y5r3zarvary0c5xw7kgmn4n9";
  assert.deepEqual(first((await verifyApproval(shown)).differences), ["summary.items[0].recipient"]);
  const transfer = testnets["cosmos sign-transfer"].data;
  const mainnet = structuredClone(transfer); // a testnet request shown as the mainnet's
  mainnet.signer.network = mainnet.summary.network = "osmosis";
  assert.deepEqual(first((await verifyApproval(mainnet)).differences), ["chain_id"]);
  const relabelled = structuredClone(psbt);
  relabelled.signer.network = "mainnet";
  const named = first((await verifyApproval(relabelled)).differences);
  assert.ok(named.includes("account") && named.includes("summary.network"), named.join());
  const strange = structuredClone(transfer);
  strange.signer.network = "osmosis-devnet";
  assert.deepEqual((await verifyApproval(strange)).differences, [
    'network: cosmos "osmosis-devnet" is not a network this client knows (cosmoshub, cosmoshub-testnet, osmosis, ' +
    "osmosis-testnet, juno, akash, stargaze, celestia)"]);
  const eos = structuredClone(testnets["eos sign-transaction"].data);
  eos.signer.network = eos.summary.network = "eos";
  assert.deepEqual(first((await verifyApproval(eos)).differences), ["chain_id"]);
});

test("the verifier's own table holds every network the server serves (GET /networks)", async () => {
  const served = (await ck.api("GET", "/networks")).data.families;
  for (const [family, { networks }] of Object.entries(served)) {
    assert.deepEqual(networks.map((n) => n.name).sort(), Object.keys(NETWORKS[family]).sort(), family);
    for (const n of networks) {
      const mine = NETWORKS[family][n.name];
      assert.deepEqual([n.chain_id ?? null, n.bech32_prefix ?? null], [mine.chainId ?? null, mine.hrp ?? null], `${family} ${n.name}`);
    }
  }
});
