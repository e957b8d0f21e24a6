import { ChainkeysClient, fromBase64, toBase64, utf8 } from "./client.js";
import { ChainkeysError } from "./errors.js";
/**
 * Signs for one Cosmos account held by chainkeys (`options.account` is its
 * address). Use it wherever cosmjs takes a signer:
 * `SigningStargateClient.connectWithSigner(rpc, new ChainkeysCosmosSigner(opts))`.
 */
export class ChainkeysCosmosSigner {
    client;
    #account;
    constructor(options) {
        this.client = new ChainkeysClient(options);
    }
    /** The account, with its public key as the service reports it (`GET /cosmos/{address}`). */
    async getAccounts() {
        this.#account ??= this.#load();
        try {
            return [await this.#account];
        }
        catch (e) {
            this.#account = undefined; // try again next time
            throw e;
        }
    }
    async #load() {
        const data = await this.client.get(this.client.accountPath("cosmos"));
        const account = data?.data;
        let key;
        try {
            key = JSON.parse(account.pubkey).key;
        }
        catch {
            key = undefined;
        }
        if (typeof account?.address !== "string" || typeof key !== "string") {
            throw new ChainkeysError("chainkeys: the account answer has no address or pubkey", "invalid_response", 200, { body: data });
        }
        return { address: account.address, algo: "secp256k1", pubkey: fromBase64(key) };
    }
    #check(signerAddress) {
        if (signerAddress !== this.client.options.account) {
            throw new ChainkeysError(`chainkeys: this signer holds ${this.client.options.account}, not ${signerAddress}`, "unknown_signer", 0);
        }
    }
    /** `POST /cosmos/{address}/sign-direct`: SIGN_MODE_DIRECT. */
    async signDirect(signerAddress, signDoc) {
        this.#check(signerAddress);
        const body = {
            signDoc: {
                bodyBytes: toBase64(signDoc.bodyBytes),
                authInfoBytes: toBase64(signDoc.authInfoBytes),
                chainId: signDoc.chainId,
                accountNumber: signDoc.accountNumber.toString(),
            },
        };
        return this.client.sign(this.client.accountPath("cosmos", "/sign-direct"), body, (data) => ({ signed: signDoc, signature: stdSignature(data) }));
    }
    /** `POST /cosmos/{address}/sign-amino`: SIGN_MODE_LEGACY_AMINO_JSON. */
    async signAmino(signerAddress, signDoc) {
        this.#check(signerAddress);
        return this.client.sign(this.client.accountPath("cosmos", "/sign-amino"), { signDoc }, (data) => ({ signed: signDoc, signature: stdSignature(data) }));
    }
    /**
     * Keplr's `signArbitrary` (ADR-036): signs `data` (text as UTF-8, or bytes)
     * wrapped in a `sign/MsgSignData` document. `chainId` is not part of an
     * ADR-036 document (Keplr uses it to pick the key); it is accepted for the
     * same call shape.
     */
    async signArbitrary(chainId, signer, data) {
        void chainId;
        this.#check(signer);
        const bytes = typeof data === "string" ? utf8(data) : data;
        return this.client.sign(this.client.accountPath("cosmos", "/sign-message"), { data: toBase64(bytes) }, (result) => stdSignature(result));
    }
}
function stdSignature(data) {
    const sig = data?.signature;
    if (typeof sig?.signature !== "string" || typeof sig?.pub_key?.value !== "string") {
        throw new ChainkeysError("chainkeys: the sign answer has no signature", "invalid_response", 200, { body: data });
    }
    return { pub_key: { type: sig.pub_key.type, value: sig.pub_key.value }, signature: sig.signature };
}
