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
/** `POST /eos/{name}/sign-transaction`; resolves to the `SIG_K1_…` signatures. */
export declare function signEosTransaction(client: ChainkeysClient, chainId: string, serializedTransaction: Uint8Array, serializedContextFreeData?: Uint8Array): Promise<string[]>;
/**
 * Signs for one EOS account held by chainkeys (`options.account` is the
 * account name): `new Api({ rpc, signatureProvider: new ChainkeysSignatureProvider(opts) })`.
 */
export declare class ChainkeysSignatureProvider implements SignatureProvider {
    #private;
    readonly client: ChainkeysClient;
    constructor(options: ChainkeysOptions);
    /** The account's key, in the `PUB_K1_…` form (as eosjs' JsSignatureProvider gives its keys). */
    getAvailableKeys(): Promise<string[]>;
    sign(args: SignatureProviderArgs): Promise<PushTransactionArgs>;
}
