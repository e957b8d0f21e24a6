import { ChainkeysClient, answerMismatch, peer, toHex } from "./client.js";
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
/**
 * `POST /eos/{name}/sign-transaction`; resolves to the `SIG_K1_…` signatures,
 * once `check` accepts every one (`ChainkeysError` `answer_mismatch` otherwise).
 */
export async function signEosTransaction(client, chainId, serializedTransaction, serializedContextFreeData, check) {
    const body = { chainId, serializedTransaction: toHex(serializedTransaction) };
    if (serializedContextFreeData && serializedContextFreeData.length) {
        body.serializedContextFreeData = toHex(serializedContextFreeData);
    }
    return client.sign(client.accountPath("eos", "/sign-transaction"), body, (data) => {
        if (!Array.isArray(data?.signatures)) {
            throw new ChainkeysError("chainkeys: the sign answer has no signatures", "invalid_response", 200, { body: data });
        }
        if (data.serializedTransaction !== undefined && data.serializedTransaction !== null
            && String(data.serializedTransaction).toLowerCase() !== body.serializedTransaction) {
            throw answerMismatch("its serializedTransaction is not the transaction sent", data);
        }
        if ((data.serializedContextFreeData ?? undefined) !== undefined
            && String(data.serializedContextFreeData).toLowerCase() !== (body.serializedContextFreeData ?? "")) {
            throw answerMismatch("its serializedContextFreeData is not the data sent", data);
        }
        const signatures = data.signatures;
        if (signatures.length === 0)
            throw answerMismatch("it has no signature", data);
        signatures.forEach((sig, n) => {
            let ok;
            try {
                ok = typeof sig === "string" && sig.startsWith("SIG_K1_") && check(sig);
            }
            catch {
                ok = false;
            }
            if (!ok) {
                throw answerMismatch(`signature ${n} is not the account's key's signature of this transaction`, data);
            }
        });
        return signatures;
    });
}
/** The account's key (`PUB_K1_…`) read by `parse`; one that does not parse is the answer's fault. */
export function accountKey(keys, parse) {
    try {
        return parse(keys.k1);
    }
    catch (cause) {
        throw answerMismatch(`the account's public key ${keys.k1} does not parse`, keys, cause);
    }
}
/**
 * Signs for one EOS account held by chainkeys (`options.account` is the
 * account name): `new Api({ rpc, signatureProvider: new ChainkeysSignatureProvider(opts) })`.
 *
 * Every signature the service answers is checked: the key recovered from it
 * over the transaction's digest (eosjs' `digestFromSerializedData`) must be
 * the account's (`getAvailableKeys()`), or `sign` throws a `ChainkeysError`
 * `answer_mismatch`.
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
        const [k1] = await this.getAvailableKeys();
        const jssig = await peer(() => import("eosjs/dist/eosjs-jssig.js"), "eosjs", "checking the service's EOS signatures");
        const expected = accountKey({ k1: k1, legacy: "" }, (text) => jssig.PublicKey.fromString(text).toString());
        // what the service signs: 32 zero bytes for no (or empty) context-free data
        const cfd = serializedContextFreeData && serializedContextFreeData.length ? serializedContextFreeData : undefined;
        const digest = jssig.digestFromSerializedData(chainId, serializedTransaction, cfd);
        const signatures = await signEosTransaction(this.client, chainId, serializedTransaction, serializedContextFreeData, (sig) => jssig.Signature.fromString(sig).recover(digest, false).toString() === expected);
        return { signatures, serializedTransaction, serializedContextFreeData };
    }
}
