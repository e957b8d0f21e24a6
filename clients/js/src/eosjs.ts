/** An eosjs `SignatureProvider` backed by chainkeys. */
import type { SignatureProvider, SignatureProviderArgs } from "eosjs/dist/eosjs-api-interfaces.js";
import type { PushTransactionArgs } from "eosjs/dist/eosjs-rpc-interfaces.js";
import { ChainkeysClient, toHex, type ChainkeysOptions } from "./client.js";
import { ChainkeysError } from "./errors.js";

/** The account's public keys, as `GET /eos/{name}` reports them. */
export interface EosAccountKeys {
  /** `PUB_K1_…` */
  k1: string;
  /** legacy `EOS…` */
  legacy: string;
}

/** Fetches (once) an EOS account's public keys. */
export async function eosKeys(client: ChainkeysClient): Promise<EosAccountKeys> {
  const data = await client.get(client.accountPath("eos"));
  const k1 = data?.public_key_k1, legacy = data?.public_key;
  if (typeof k1 !== "string" || typeof legacy !== "string") {
    throw new ChainkeysError("chainkeys: the account answer has no public key", "invalid_response", 200, { body: data });
  }
  return { k1, legacy };
}

/** `POST /eos/{name}/sign-transaction`; resolves to the `SIG_K1_…` signatures. */
export async function signEosTransaction(
  client: ChainkeysClient, chainId: string, serializedTransaction: Uint8Array,
  serializedContextFreeData?: Uint8Array,
): Promise<string[]> {
  const body: Record<string, string> = { chainId, serializedTransaction: toHex(serializedTransaction) };
  if (serializedContextFreeData && serializedContextFreeData.length) {
    body.serializedContextFreeData = toHex(serializedContextFreeData);
  }
  return client.sign(client.accountPath("eos", "/sign-transaction"), body, (data) => {
    if (!Array.isArray(data?.signatures)) {
      throw new ChainkeysError("chainkeys: the sign answer has no signatures", "invalid_response", 200, { body: data });
    }
    return data.signatures as string[];
  });
}

/**
 * Signs for one EOS account held by chainkeys (`options.account` is the
 * account name): `new Api({ rpc, signatureProvider: new ChainkeysSignatureProvider(opts) })`.
 */
export class ChainkeysSignatureProvider implements SignatureProvider {
  readonly client: ChainkeysClient;
  #keys?: Promise<EosAccountKeys>;

  constructor(options: ChainkeysOptions) {
    this.client = new ChainkeysClient(options);
  }

  /** The account's key, in the `PUB_K1_…` form (as eosjs' JsSignatureProvider gives its keys). */
  async getAvailableKeys(): Promise<string[]> {
    this.#keys ??= eosKeys(this.client).catch((e) => { this.#keys = undefined; throw e; });
    return [(await this.#keys).k1];
  }

  async sign(args: SignatureProviderArgs): Promise<PushTransactionArgs> {
    const { chainId, serializedTransaction, serializedContextFreeData } = args;
    const signatures = await signEosTransaction(this.client, chainId, serializedTransaction, serializedContextFreeData);
    return { signatures, serializedTransaction, serializedContextFreeData };
  }
}
