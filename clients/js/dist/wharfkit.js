/**
 * A WharfKit `WalletPlugin` backed by chainkeys. Imported from
 * `@chainkeys/signers/wharfkit` (it needs `@wharfkit/session` at run time; the
 * other adapters load their peers only when they sign).
 */
import { Bytes, Checksum256, PermissionLevel, PublicKey, Signature } from "@wharfkit/antelope";
import { AbstractWalletPlugin, WalletPluginMetadata, } from "@wharfkit/session";
import { ChainkeysClient } from "./client.js";
import { ChainkeysError } from "./errors.js";
import { accountKey, eosKeys, signEosTransaction } from "./eosjs.js";
/**
 * `new Session({ chain, actor, permission, walletPlugin: new ChainkeysWalletPlugin(opts) })`,
 * or one of a `SessionKit`'s `walletPlugins`. `sign` sends the resolved
 * transaction to `POST /eos/{name}/sign-transaction` with the session's chain id.
 */
export class ChainkeysWalletPlugin extends AbstractWalletPlugin {
    id = "chainkeys";
    client;
    permission;
    config = { requiresChainSelect: true, requiresPermissionSelect: false };
    metadata = WalletPluginMetadata.from({
        name: "chainkeys",
        description: "Keys held by a chainkeys custody service; transactions are signed there.",
    });
    #keys;
    constructor(options) {
        super();
        this.client = new ChainkeysClient(options);
        this.permission = options.permission ?? "active";
    }
    /** The session's chain (the one chosen, or the kit's first) and `account@permission`. */
    async login(context) {
        const chain = context.chain ?? context.chains[0];
        if (!chain)
            throw new ChainkeysError("chainkeys: login needs a chain", "no_chain", 0);
        await this.#publicKeys(); // the account exists and the token may read it
        return {
            chain: chain.id,
            permissionLevel: PermissionLevel.from({ actor: this.client.options.account, permission: this.permission }),
        };
    }
    /**
     * Every signature the service answers is checked: the key recovered from it
     * over the transaction's digest (`Transaction.signingDigest`'s: sha256 of the
     * chain id, the transaction and 32 zero bytes) must be the account's, or this
     * throws a `ChainkeysError` `answer_mismatch`.
     */
    async sign(resolved, context) {
        const chainId = String(context.chain?.id ?? resolved.chainId);
        const expected = accountKey(await this.#publicKeys(), (text) => PublicKey.from(text));
        const digest = Checksum256.hash(Bytes.from(Checksum256.from(chainId).array)
            .appending(resolved.serializedTransaction).appending(new Uint8Array(32)));
        const signatures = await signEosTransaction(this.client, chainId, resolved.serializedTransaction, undefined, (sig) => Signature.from(sig).recoverDigest(digest).equals(expected));
        return { signatures: signatures.map((s) => Signature.from(s)) };
    }
    async retrievePublicKey(chainId) {
        void chainId;
        return PublicKey.from((await this.#publicKeys()).k1);
    }
    #publicKeys() {
        this.#keys ??= eosKeys(this.client).catch((e) => { this.#keys = undefined; throw e; });
        return this.#keys;
    }
}
