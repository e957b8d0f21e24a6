// Independent checks of chainkeys' Cosmos signatures with cosmjs (pinned in package.json).
// Reads one JSON request on stdin, prints one JSON answer.
import { Secp256k1, Secp256k1Signature, sha256 } from "@cosmjs/crypto";
import { fromBase64, toBase64, fromHex } from "@cosmjs/encoding";
import {
  serializeSignDoc, makeSignDoc as makeAminoSignDoc, Secp256k1Wallet, createMultisigThresholdPubkey,
  encodeSecp256k1Pubkey, pubkeyToAddress,
} from "@cosmjs/amino";
import {
  DirectSecp256k1Wallet, makeAuthInfoBytes, makeSignBytes, encodePubkey, Registry,
} from "@cosmjs/proto-signing";
import {
  AminoTypes, createDefaultAminoConverters, defaultRegistryTypes, SigningStargateClient,
} from "@cosmjs/stargate";
import { TxRaw } from "cosmjs-types/cosmos/tx/v1beta1/tx";
import { AuthInfo, TxBody } from "cosmjs-types/cosmos/tx/v1beta1/tx";
import { CompactBitArray, MultiSignature } from "cosmjs-types/cosmos/crypto/multisig/v1beta1/multisig";
import { SignMode } from "cosmjs-types/cosmos/tx/signing/v1beta1/signing";

const N = BigInt("0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141");

async function verify(message, sigB64, pubB64) {
  const raw = fromBase64(sigB64);
  const s = BigInt("0x" + Buffer.from(raw.slice(32)).toString("hex"));
  const lowS = s <= N / 2n; // cosmjs accepts high-S: check it ourselves
  const ok = await Secp256k1.verifySignature(
    Secp256k1Signature.fromFixedLength(raw), sha256(message), fromBase64(pubB64));
  return { valid: ok && lowS, lowS, ok };
}

// @cosmjs/stargate's makeCompactBitArray (multisignature.ts), which its index does not export
function makeCompactBitArray(bits) {
  const bytes = new Uint8Array(Math.ceil(bits.length / 8));
  bits.forEach((on, i) => { if (on) bytes[Math.floor(i / 8)] |= 1 << (7 - (i % 8)); });
  return CompactBitArray.fromPartial({ elems: bytes, extraBitsStored: bits.length % 8 });
}

function directDoc(d) {
  return {
    bodyBytes: fromBase64(d.bodyBytes), authInfoBytes: fromBase64(d.authInfoBytes),
    chainId: d.chainId, accountNumber: BigInt(d.accountNumber),
  };
}

const req = JSON.parse(await new Promise((r) => {
  let s = ""; process.stdin.on("data", (c) => (s += c)); process.stdin.on("end", () => r(s));
}));
let out;
switch (req.action) {
  case "build_direct": {
    const registry = new Registry(defaultRegistryTypes);
    const msgs = req.msgs.map((m) => m.typeUrl === "/cosmos.bank.v1beta1.MsgSend"
      ? { typeUrl: m.typeUrl, value: { fromAddress: m.from, toAddress: m.to, amount: m.amount } }
      : { typeUrl: m.typeUrl, value: m.value });
    const bodyBytes = registry.encode({ typeUrl: "/cosmos.tx.v1beta1.TxBody",
      value: { messages: msgs, memo: req.memo || "" } });
    const pubkey = encodePubkey({ type: "tendermint/PubKeySecp256k1", value: req.pubkey });
    const authInfoBytes = makeAuthInfoBytes([{ pubkey, sequence: BigInt(req.sequence || 0) }],
      req.fee, BigInt(req.gas), undefined, undefined, SignMode.SIGN_MODE_DIRECT);
    out = { bodyBytes: toBase64(bodyBytes), authInfoBytes: toBase64(authInfoBytes) };
    break;
  }
  case "verify_direct":
    out = await verify(makeSignBytes(directDoc(req.signDoc)), req.signature, req.pubkey);
    break;
  case "sign_direct": {
    const wallet = await DirectSecp256k1Wallet.fromKey(fromHex(req.privateKey), req.prefix);
    const [acct] = await wallet.getAccounts();
    const res = await wallet.signDirect(acct.address, directDoc(req.signDoc));
    out = { signature: res.signature.signature, pubkey: res.signature.pub_key.value };
    break;
  }
  case "verify_amino":
    out = await verify(serializeSignDoc(req.signDoc), req.signature, req.pubkey);
    break;
  case "sign_amino": {
    const wallet = await Secp256k1Wallet.fromKey(fromHex(req.privateKey), req.prefix);
    const [acct] = await wallet.getAccounts();
    const res = await wallet.signAmino(acct.address, req.signDoc);
    out = { signature: res.signature.signature };
    break;
  }
  case "adr036_doc": {
    // ADR-036 as Keplr's makeADR36AminoSignDoc builds it, with cosmjs' makeSignDoc
    const msg = { type: "sign/MsgSignData", value: { signer: req.signer, data: req.data } };
    const doc = makeAminoSignDoc([msg], { gas: "0", amount: [] }, "", "", 0, 0);
    out = { doc, verdict: await verify(serializeSignDoc(doc), req.signature, req.pubkey) };
    break;
  }
  case "decode_body": {
    const body = TxBody.decode(fromBase64(req.bodyBytes));
    out = { messages: body.messages.map((m) => m.typeUrl), memo: body.memo };
    break;
  }
  case "sign_transfer": {
    // cosmjs builds and signs the same transfer offline: the bytes must be identical
    const wallet = await DirectSecp256k1Wallet.fromKey(fromHex(req.privateKey), req.prefix);
    const [acct] = await wallet.getAccounts();
    const client = await SigningStargateClient.offline(wallet);
    const t = req.transfer;
    const token = { denom: t.denom, amount: t.amount };
    const msg = req.ibc
      ? { typeUrl: "/ibc.applications.transfer.v1.MsgTransfer", value: {
          sourcePort: t.sourcePort, sourceChannel: t.sourceChannel, token, sender: acct.address,
          receiver: t.toAddress, timeoutHeight: undefined, timeoutTimestamp: BigInt(t.timeoutTimestamp), memo: "" } }
      : { typeUrl: "/cosmos.bank.v1beta1.MsgSend",
          value: { fromAddress: acct.address, toAddress: t.toAddress, amount: [token] } };
    const fee = { amount: [{ denom: t.feeDenom, amount: t.feeAmount }], gas: String(t.gasLimit) };
    const raw = await client.sign(acct.address, [msg], fee, t.memo,
      { accountNumber: t.accountNumber, sequence: t.sequence, chainId: t.chainId },
      t.timeoutHeight ? BigInt(t.timeoutHeight) : undefined);
    out = { signedTx: toBase64(TxRaw.encode(raw).finish()) };
    break;
  }
  case "verify_tx": {
    const raw = TxRaw.decode(fromBase64(req.signedTx));
    const doc = { bodyBytes: raw.bodyBytes, authInfoBytes: raw.authInfoBytes,
      chainId: req.chainId, accountNumber: BigInt(req.accountNumber) };
    const body = TxBody.decode(raw.bodyBytes);
    out = { verdict: await verify(makeSignBytes(doc), toBase64(raw.signatures[0]), req.pubkey),
      messages: body.messages.map((m) => m.typeUrl), memo: body.memo };
    break;
  }
  case "multisig_addresses": {
    // cosmjs' own threshold key (sorted by its default rule) and address
    out = req.sets.map(({ m, pubkeys }) => {
      const key = createMultisigThresholdPubkey(pubkeys.map((k) => encodeSecp256k1Pubkey(fromHex(k))), m);
      return { address: pubkeyToAddress(key, req.prefix), pubkey: key };
    });
    break;
  }
  case "multisigned_tx": {
    // The transaction as a cosmjs coordinator assembles it from the members' amino
    // signatures (the multisig flow in cosmjs' own tests), and each signature verified.
    const key = createMultisigThresholdPubkey(req.pubkeys.map((k) => encodeSecp256k1Pubkey(fromHex(k))), req.m);
    const registry = new Registry(defaultRegistryTypes);
    const amino = new AminoTypes(createDefaultAminoConverters());
    const doc = req.signDoc;
    const bodyBytes = registry.encode({ typeUrl: "/cosmos.tx.v1beta1.TxBody", value: {
      messages: doc.msgs.map((m) => amino.fromAmino(m)), memo: doc.memo } });
    const signatures = new Map();
    const verdicts = [];
    for (const sig of req.signatures) {
      const address = pubkeyToAddress(encodeSecp256k1Pubkey(fromBase64(sig.pub_key.value)), req.prefix);
      signatures.set(address, fromBase64(sig.signature));
      verdicts.push((await verify(serializeSignDoc(doc), sig.signature, sig.pub_key.value)).valid);
    }
    // cosmjs' makeMultisignedTx, step for step with cosmjs' own parts: the function itself
    // throws in 0.39.0 (its fromBech32 passes limit Infinity, which @scure/base 2 refuses)
    const signers = key.value.pubkeys.map((pk) => signatures.has(pubkeyToAddress(pk, req.prefix)));
    const list = key.value.pubkeys.map((pk) => signatures.get(pubkeyToAddress(pk, req.prefix)))
      .filter((sig) => sig !== undefined);
    const authInfo = AuthInfo.fromPartial({
      signerInfos: [{ publicKey: encodePubkey(key), sequence: BigInt(doc.sequence), modeInfo: { multi: {
        bitarray: makeCompactBitArray(signers),
        modeInfos: list.map(() => ({ single: { mode: SignMode.SIGN_MODE_LEGACY_AMINO_JSON } })) } } }],
      fee: { amount: [...doc.fee.amount], gasLimit: BigInt(doc.fee.gas) },
    });
    const raw = TxRaw.encode(TxRaw.fromPartial({ bodyBytes, authInfoBytes: AuthInfo.encode(authInfo).finish(),
      signatures: [MultiSignature.encode(MultiSignature.fromPartial({ signatures: list })).finish()] })).finish();
    out = { signedTx: toBase64(raw), verdicts };
    break;
  }
  default:
    throw new Error("unknown action " + req.action);
}
process.stdout.write(JSON.stringify(out));
