// Independent checks of chainkeys' EOS signatures with @wharfkit/antelope and eosjs-ecc.
// Reads one JSON request on stdin, prints one JSON answer.
import {
  ABI, Action, Bytes, Checksum256, PublicKey, Serializer, Signature, Transaction,
} from "@wharfkit/antelope";
import ecc from "eosjs-ecc";

const TOKEN_ABI = ABI.from({
  version: "eosio::abi/1.2",
  structs: [{ name: "transfer", base: "", fields: [
    { name: "from", type: "name" }, { name: "to", type: "name" },
    { name: "quantity", type: "asset" }, { name: "memo", type: "string" }] }],
  actions: [{ name: "transfer", type: "transfer", ricardian_contract: "" }],
});

function canonical(sig) {
  const d = sig.data.array; // recid, r(32), s(32)
  return !(d[1] & 0x80) && !(d[1] === 0 && !(d[2] & 0x80))
    && !(d[33] & 0x80) && !(d[33] === 0 && !(d[34] & 0x80));
}

function digestOf(chainId, txHex, cfdHex) {
  const cfd = cfdHex ? Checksum256.hash(Bytes.from(cfdHex, "hex")).array : new Uint8Array(32);
  return Checksum256.hash(Bytes.from(chainId + txHex + Buffer.from(cfd).toString("hex"), "hex"));
}

const req = JSON.parse(await new Promise((r) => {
  let s = ""; process.stdin.on("data", (c) => (s += c)); process.stdin.on("end", () => r(s));
}));
let out;
switch (req.action) {
  case "build_tx": {
    const action = (a) => a.data_hex
      ? Action.from({ account: a.account, name: a.name, authorization: a.authorization,
          data: Bytes.from(a.data_hex, "hex") })
      : Action.from({ account: a.account, name: a.name, authorization: a.authorization,
          data: a.data }, TOKEN_ABI);
    const tx = Transaction.from({
      expiration: "2026-12-01T00:00:00", ref_block_num: 1234, ref_block_prefix: 5678,
      max_net_usage_words: 0, max_cpu_usage_ms: 0, delay_sec: 0,
      context_free_actions: (req.context_free_actions || []).map(action),
      actions: req.actions.map(action), transaction_extensions: [],
    });
    out = { serializedTransaction: Serializer.encode({ object: tx }).hexString,
            id: tx.id.hexString, signingDigest: tx.signingDigest(req.chainId).hexString };
    break;
  }
  case "verify_tx": {
    const digest = digestOf(req.chainId, req.serializedTransaction, req.serializedContextFreeData);
    const sig = Signature.from(req.signature);
    const tx = Serializer.decode({ data: req.serializedTransaction, type: Transaction });
    out = {
      valid: sig.verifyDigest(digest, PublicKey.from(req.publicKey)),
      canonical: canonical(sig),
      recovered: sig.recoverDigest(digest).toLegacyString(),
      digest: digest.hexString,
      id: tx.id.hexString,
      actions: tx.actions.map((a) => ({ account: String(a.account), name: String(a.name),
        authorization: a.authorization.map((p) => [String(p.actor), String(p.permission)]) })),
    };
    break;
  }
  case "verify_message": {
    const data = req.message !== undefined ? Buffer.from(req.message, "utf8")
      : Buffer.from(req.data, "hex");
    const sig = Signature.from(req.signature);
    out = {
      valid: sig.verifyMessage(Bytes.from(data), PublicKey.from(req.publicKey)),
      canonical: canonical(sig),
      ecc: ecc.verify(req.signature.startsWith("SIG_K1_") ? sig.toString() : req.signature,
        data, req.publicKey),
    };
    break;
  }
  default:
    throw new Error("unknown action " + req.action);
}
process.stdout.write(JSON.stringify(out));
