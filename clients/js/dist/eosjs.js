import { ChainkeysClient, toHex } from "./client.js";
import { ChainkeysError } from "./errors.js";
/** Fetches (once) an EOS account's public keys. */
export async function eosKeys(client) {
    const data = await client.get(client.accountPath("eos"));
    const k1 = data?.public_key_k1, legacy = data?.public_key;
    if (typeof k1 !== "string" || typeof legacy !== "string") {
        throw new ChainkeysError("chainkeys: the account answer has no public key", "invalid_response", 200, { body: data });
    }
    return { k1, legacy };
}
/** `POST /eos/{name}/sign-transaction`; resolves to the `SIG_K1_…` signatures. */
export async function signEosTransaction(client, chainId, serializedTransaction, serializedContextFreeData) {
    const body = { chainId, serializedTransaction: toHex(serializedTransaction) };
    if (serializedContextFreeData && serializedContextFreeData.length) {
        body.serializedContextFreeData = toHex(serializedContextFreeData);
    }
    return client.sign(client.accountPath("eos", "/sign-transaction"), body, (data) => {
        if (!Array.isArray(data?.signatures)) {
            throw new ChainkeysError("chainkeys: the sign answer has no signatures", "invalid_response", 200, { body: data });
        }
        return data.signatures;
    });
}
/**
 * Signs for one EOS account held by chainkeys (`options.account` is the
 * account name): `new Api({ rpc, signatureProvider: new ChainkeysSignatureProvider(opts) })`.
 */
export class ChainkeysSignatureProvider {
    client;
    #keys;
    constructor(options) {
        this.client = new ChainkeysClient(options);
    }
    /** The account's key, in the `PUB_K1_…` form (as eosjs' JsSignatureProvider gives its keys). */
    async getAvailableKeys() {
        this.#keys ??= eosKeys(this.client).catch((e) => { this.#keys = undefined; throw e; });
        return [(await this.#keys).k1];
    }
    async sign(args) {
        const { chainId, serializedTransaction, serializedContextFreeData } = args;
        const signatures = await signEosTransaction(this.client, chainId, serializedTransaction, serializedContextFreeData);
        return { signatures, serializedTransaction, serializedContextFreeData };
    }
}
