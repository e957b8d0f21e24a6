/** An eosjs `SignatureProvider` backed by chainkeys. */
import type { SignatureProvider, SignatureProviderArgs } from "eosjs/dist/eosjs-api-interfaces.js";
import type { PushTransactionArgs } from "eosjs/dist/eosjs-rpc-interfaces.js";
import { ChainkeysClient, type ChainkeysOptions } from "./client.js";
/** The account's public keys, as `GET /eos/{name}` reports them. */
export interface EosAccountKeys {
    /** `PUB_K1_…` */
    k1: string;
    /** legacy `EOS…` */
    legacy: string;
}
/** Fetches (once) an EOS account's public keys. */
export declare function eosKeys(client: ChainkeysClient): Promise<EosAccountKeys>;
/**
 * Whether a signature is the account's over the transaction's digest
 * (sha256(chain id ‖ transaction ‖ sha256(context-free data) or 32 zero bytes)):
 * the public key recovered from it, compared with the account's. Throws on a
 * signature that does not parse.
 */
export type EosSignatureCheck = (signature: string) => boolean;
/**
 * `POST /eos/{name}/sign-transaction`; resolves to the `SIG_K1_…` signatures,
 * once `check` accepts every one (`ChainkeysError` `answer_mismatch` otherwise).
 */
export declare function signEosTransaction(client: ChainkeysClient, chainId: string, serializedTransaction: Uint8Array, serializedContextFreeData: Uint8Array | undefined, check: EosSignatureCheck): Promise<string[]>;
/** The account's key (`PUB_K1_…`) read by `parse`; one that does not parse is the answer's fault. */
export declare function accountKey<K>(keys: EosAccountKeys, parse: (text: string) => K): K;
/**
 * Signs for one EOS account held by chainkeys (`options.account` is the
 * account name): `new Api({ rpc, signatureProvider: new ChainkeysSignatureProvider(opts) })`.
 *
 * Every signature the service answers is checked: the key recovered from it
 * over the transaction's digest (eosjs' `digestFromSerializedData`) must be
 * the account's (`getAvailableKeys()`), or `sign` throws a `ChainkeysError`
 * `answer_mismatch`.
 */
export declare class ChainkeysSignatureProvider implements SignatureProvider {
    #private;
    readonly client: ChainkeysClient;
    constructor(options: ChainkeysOptions);
    /** The account's key, in the `PUB_K1_…` form (as eosjs' JsSignatureProvider gives its keys). */
    getAvailableKeys(): Promise<string[]>;
    sign(args: SignatureProviderArgs): Promise<PushTransactionArgs>;
}
