/** A cosmjs `OfflineDirectSigner` and `OfflineAminoSigner` backed by chainkeys. */
import type { AccountData, OfflineDirectSigner, DirectSignResponse } from "@cosmjs/proto-signing";
import type {
  OfflineAminoSigner, AminoSignResponse, MultisigThresholdPubkey, StdSignDoc, StdSignature,
} from "@cosmjs/amino";
import {
  ChainkeysClient, answerMismatch, bytesEqual, fromBase64, peer, toBase64, toHex, utf8, type ChainkeysOptions,
} from "./client.js";
import { ChainkeysError } from "./errors.js";

/** cosmjs' `SignDoc` (from cosmjs-types), as `signDirect` takes it. */
export type DirectSignDoc = Parameters<OfflineDirectSigner["signDirect"]>[1];

/**
 * Signs for one Cosmos account held by chainkeys (`options.account` is its
 * address). Use it wherever cosmjs takes a signer:
 * `SigningStargateClient.connectWithSigner(rpc, new ChainkeysCosmosSigner(opts))`.
 *
 * Every answer is checked (`ChainkeysError` `answer_mismatch` otherwise): the
 * account's public key must hash to its address; a signature must carry that
 * key, be 64 bytes r‖s with a low S, and verify over the sha256 of the bytes
 * sent to be signed; the `signed` document must be the one sent. The checks
 * import `@cosmjs/crypto`, `@cosmjs/amino` and (direct) `@cosmjs/proto-signing`.
 */
export class ChainkeysCosmosSigner implements OfflineDirectSigner, OfflineAminoSigner {
  readonly client: ChainkeysClient;
  #account?: Promise<AccountData>;

  constructor(options: ChainkeysOptions) {
    this.client = new ChainkeysClient(options);
  }

  /** The account, with its public key as the service reports it (`GET /cosmos/{address}`). */
  async getAccounts(): Promise<readonly AccountData[]> {
    this.#account ??= this.#load();
    try {
      return [await this.#account];
    } catch (e) {
      this.#account = undefined; // try again next time
      throw e;
    }
  }

  async #load(): Promise<AccountData> {
    const data = await this.client.get(this.client.accountPath("cosmos"));
    const account = data?.data;
    let key: string | undefined;
    try {
      key = JSON.parse(account.pubkey).key;
    } catch {
      key = undefined;
    }
    if (typeof account?.address !== "string" || typeof key !== "string") {
      throw new ChainkeysError("chainkeys: the account answer has no address or pubkey", "invalid_response", 200, { body: data });
    }
    const address = this.client.options.account;
    if (account.address !== address) {
      throw answerMismatch(`the account answer is for ${account.address}, not ${address}`, data);
    }
    const pubkey = decode64(key);
    const { encodeSecp256k1Pubkey, pubkeyToAddress } = await amino();
    let derived: string | undefined;
    try {
      derived = pubkeyToAddress(encodeSecp256k1Pubkey(pubkey ?? new Uint8Array()), address.slice(0, address.lastIndexOf("1")));
    } catch {
      derived = undefined; // not a compressed secp256k1 key
    }
    if (derived !== address) {
      throw answerMismatch(`the account's public key is not the key of ${address}`, data);
    }
    return { address, algo: "secp256k1", pubkey: pubkey! };
  }

  #check(signerAddress: string): void {
    if (signerAddress !== this.client.options.account) {
      throw new ChainkeysError(
        `chainkeys: this signer holds ${this.client.options.account}, not ${signerAddress}`, "unknown_signer", 0,
      );
    }
  }

  /** `POST /cosmos/{address}/sign-direct`: SIGN_MODE_DIRECT. */
  async signDirect(signerAddress: string, signDoc: DirectSignDoc): Promise<DirectSignResponse> {
    this.#check(signerAddress);
    const body = {
      signDoc: {
        bodyBytes: toBase64(signDoc.bodyBytes),
        authInfoBytes: toBase64(signDoc.authInfoBytes),
        chainId: signDoc.chainId,
        accountNumber: signDoc.accountNumber.toString(),
      },
    };
    const [account] = await this.getAccounts();
    const [{ makeSignBytes }, crypto] = await Promise.all([
      peer(() => import("@cosmjs/proto-signing"), "@cosmjs/proto-signing", "checking the service's signatures"),
      cosmjsCrypto(),
    ]);
    const message = makeSignBytes(signDoc);
    return this.client.sign(this.client.accountPath("cosmos", "/sign-direct"), body, async (data) => {
      const signature = stdSignature(data);
      const signed = data?.signed;
      if (signed?.bodyBytes !== body.signDoc.bodyBytes || signed?.authInfoBytes !== body.signDoc.authInfoBytes
        || signed?.chainId !== body.signDoc.chainId || String(signed?.accountNumber) !== body.signDoc.accountNumber) {
        throw answerMismatch("the signed document is not the one sent", data);
      }
      await checkSignature(crypto, signature, account!.pubkey, message, data);
      return { signed: signDoc, signature };
    });
  }

  /** `POST /cosmos/{address}/sign-amino`: SIGN_MODE_LEGACY_AMINO_JSON. */
  async signAmino(signerAddress: string, signDoc: StdSignDoc): Promise<AminoSignResponse> {
    this.#check(signerAddress);
    const [account] = await this.getAccounts();
    const [{ serializeSignDoc }, crypto] = await Promise.all([amino(), cosmjsCrypto()]);
    const message = serializeSignDoc(signDoc);
    return this.client.sign(this.client.accountPath("cosmos", "/sign-amino"), { signDoc }, async (data) => {
      const signature = stdSignature(data);
      if (!sameDoc(serializeSignDoc, data?.signed, message)) {
        throw answerMismatch("the signed document is not the one sent", data);
      }
      await checkSignature(crypto, signature, account!.pubkey, message, data);
      return { signed: signDoc, signature };
    });
  }

  /**
   * Keplr's `signArbitrary` (ADR-036): signs `data` (text as UTF-8, or bytes)
   * wrapped in a `sign/MsgSignData` document. `chainId` is not part of an
   * ADR-036 document (Keplr uses it to pick the key); it is accepted for the
   * same call shape.
   */
  async signArbitrary(chainId: string, signer: string, data: string | Uint8Array): Promise<StdSignature> {
    void chainId;
    this.#check(signer);
    const bytes = typeof data === "string" ? utf8(data) : data;
    const [account] = await this.getAccounts();
    const [{ makeSignDoc, serializeSignDoc }, crypto] = await Promise.all([amino(), cosmjsCrypto()]);
    // Keplr's makeADR36AminoSignDoc
    const message = serializeSignDoc(makeSignDoc(
      [{ type: "sign/MsgSignData", value: { signer, data: toBase64(bytes) } }], { gas: "0", amount: [] }, "", "", 0, 0,
    ));
    return this.client.sign(this.client.accountPath("cosmos", "/sign-message"), { data: toBase64(bytes) },
      async (result) => {
        const signature = stdSignature(result);
        if (result?.signed !== undefined && !sameDoc(serializeSignDoc, result.signed, message)) {
          throw answerMismatch("the signed ADR-036 document is not the one for this data", result);
        }
        await checkSignature(crypto, signature, account!.pubkey, message, result);
        return signature;
      });
  }
}

/**
 * chainkeys as one member (or several) of a Cosmos multisig (`options.account` is the
 * multisig's address; docs/multisig.md). The coordinator collects the members'
 * amino signatures over one `StdSignDoc` and has chainkeys assemble the transaction:
 *
 *   const ms = new ChainkeysCosmosMultisig(opts);
 *   const ours = await ms.signAmino(doc);                  // the members held there
 *   const theirs = (await wallet.signAmino(me, doc)).signature;
 *   const { signedTx } = await ms.combine(doc, [...ours, theirs]);
 *
 * Answers are checked as `ChainkeysCosmosSigner`'s: the threshold key must hash to
 * the address, every signature must be by one of its members and verify over the
 * document sent; a combined transaction must carry that key, only signatures that
 * were given, and the document's messages and memo.
 */
export class ChainkeysCosmosMultisig {
  readonly client: ChainkeysClient;

  constructor(options: ChainkeysOptions) {
    this.client = new ChainkeysClient(options);
  }

  /** `GET /cosmos/{address}/multisig`: the threshold key, checked against the address. */
  async pubkey(): Promise<MultisigThresholdPubkey> {
    const data = await this.client.get(this.client.accountPath("cosmos", "/multisig"));
    const key = data?.pubkey;
    const address = this.client.options.account;
    const { pubkeyToAddress } = await amino();
    let derived: string | undefined;
    try {
      derived = pubkeyToAddress(key, address.slice(0, address.lastIndexOf("1")));
    } catch {
      derived = undefined;
    }
    if (key?.type !== "tendermint/PubKeyMultisigThreshold" || derived !== address) {
      throw answerMismatch(`the multisig key is not the key of ${address}`, data);
    }
    return key as MultisigThresholdPubkey;
  }

  /** `POST /cosmos/{address}/sign-amino`: every held member's signature over `signDoc`. */
  async signAmino(signDoc: StdSignDoc): Promise<StdSignature[]> {
    const key = await this.pubkey();
    const [{ serializeSignDoc }, crypto] = await Promise.all([amino(), cosmjsCrypto()]);
    const message = serializeSignDoc(signDoc);
    return this.client.sign(this.client.accountPath("cosmos", "/sign-amino"), { signDoc }, async (data) => {
      if (!sameDoc(serializeSignDoc, data?.signed, message)) {
        throw answerMismatch("the signed document is not the one sent", data);
      }
      const list: unknown = data?.signatures;
      if (!Array.isArray(list) || list.length === 0) {
        throw new ChainkeysError("chainkeys: the sign answer has no signatures", "invalid_response", 200, { body: data });
      }
      const signatures = list.map((one) => stdSignature({ signature: one }));
      for (const signature of signatures) {
        const member = key.value.pubkeys.find((pk) => pk.value === signature.pub_key.value);
        if (!member) throw answerMismatch("a signature is by a key that is not the multisig's", data);
        await checkSignature(crypto, signature, fromBase64(member.value), message, data);
      }
      return signatures;
    });
  }

  /** `POST /cosmos/{address}/combine`: the TxRaw of `signDoc` with these members' signatures. */
  async combine(signDoc: StdSignDoc, signatures: readonly StdSignature[]): Promise<{ signedTx: Uint8Array; txHash: string }> {
    const key = await this.pubkey();
    const [{ decodeTxRaw, encodePubkey }, crypto] = await Promise.all([
      peer(() => import("@cosmjs/proto-signing"), "@cosmjs/proto-signing", "checking the service's answers"),
      cosmjsCrypto(),
    ]);
    const body = { signDoc, signatures };
    return this.client.sign(this.client.accountPath("cosmos", "/combine"), body, (data) => {
      const raw = decode64(data?.signedTx);
      if (!raw) throw new ChainkeysError("chainkeys: the answer has no signedTx", "invalid_response", 200, { body: data });
      let tx;
      try {
        tx = decodeTxRaw(raw);
      } catch (cause) {
        throw answerMismatch(`its signedTx does not decode (${String(cause)})`, data, cause);
      }
      const signer = tx.authInfo.signerInfos[0];
      const expected = encodePubkey(key);
      if (tx.authInfo.signerInfos.length !== 1 || signer?.publicKey?.typeUrl !== expected.typeUrl
        || !bytesEqual(signer.publicKey.value, expected.value)) {
        throw answerMismatch("its transaction is not signed by this multisig's key", data);
      }
      if (tx.body.memo !== signDoc.memo || tx.body.messages.length !== signDoc.msgs.length) {
        throw answerMismatch("its transaction is not the document's (memo or messages)", data);
      }
      const txHash = toHex(crypto.sha256(raw)).toUpperCase();
      if (data?.txHash !== txHash) throw answerMismatch("its txHash is not the transaction's", data);
      return { signedTx: raw, txHash };
    });
  }
}

type CosmjsCrypto = typeof import("@cosmjs/crypto");

function amino(): Promise<typeof import("@cosmjs/amino")> {
  return peer(() => import("@cosmjs/amino"), "@cosmjs/amino", "checking the service's answers");
}

function cosmjsCrypto(): Promise<CosmjsCrypto> {
  return peer(() => import("@cosmjs/crypto"), "@cosmjs/crypto", "checking the service's signatures");
}

/** Base64 that must decode (undefined otherwise). */
function decode64(text: unknown): Uint8Array | undefined {
  if (typeof text !== "string") return undefined;
  try {
    return fromBase64(text);
  } catch {
    return undefined;
  }
}

/** Whether an amino document serializes (cosmjs serializeSignDoc) to `message`. */
function sameDoc(serialize: (doc: StdSignDoc) => Uint8Array, doc: unknown, message: Uint8Array): boolean {
  if (doc === null || typeof doc !== "object") return false;
  try {
    return bytesEqual(serialize(doc as StdSignDoc), message);
  } catch {
    return false;
  }
}

/** secp256k1/2 order n / 2: a signature's S must not exceed it (low S, as Cosmos SDK requires). */
const HALF_ORDER = 0x7fffffffffffffffffffffffffffffff5d576e7357a4501ddfe92f46681b20a0n;

/**
 * A StdSignature of the account: its `pub_key` is the account's key, its
 * signature 64 bytes r‖s with a low S that verifies over sha256(`message`).
 */
async function checkSignature(crypto: CosmjsCrypto, signature: StdSignature, pubkey: Uint8Array,
  message: Uint8Array, data: unknown): Promise<void> {
  if (signature.pub_key.type !== "tendermint/PubKeySecp256k1" || !bytesEqual(decode64(signature.pub_key.value), pubkey)) {
    throw answerMismatch("the signature's pub_key is not the account's public key", data);
  }
  const sig = decode64(signature.signature);
  if (!sig || sig.length !== 64) throw answerMismatch("the signature is not 64 bytes (r || s)", data);
  let s = 0n;
  for (const b of sig.subarray(32)) s = (s << 8n) | BigInt(b);
  if (s > HALF_ORDER) throw answerMismatch("the signature's S is not low (Cosmos SDK refuses it)", data);
  let ok: boolean;
  try {
    ok = await crypto.Secp256k1.verifySignature(crypto.Secp256k1Signature.fromFixedLength(sig),
      crypto.sha256(message), pubkey);
  } catch {
    ok = false; // r or s out of range
  }
  if (!ok) throw answerMismatch("the signature does not verify with the account's public key", data);
}

function stdSignature(data: any): StdSignature {
  const sig = data?.signature;
  if (typeof sig?.signature !== "string" || typeof sig?.pub_key?.value !== "string") {
    throw new ChainkeysError("chainkeys: the sign answer has no signature", "invalid_response", 200, { body: data });
  }
  return { pub_key: { type: sig.pub_key.type, value: sig.pub_key.value }, signature: sig.signature };
}
