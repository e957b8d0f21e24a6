/**
 * A WharfKit `WalletPlugin` backed by chainkeys. Imported from
 * `@chainkeys/signers/wharfkit` (it needs `@wharfkit/session` at run time; the
 * other adapters load their peers only when they sign).
 */
import { PublicKey, type Checksum256Type } from "@wharfkit/antelope";
import { AbstractWalletPlugin, WalletPluginMetadata, type LoginContext, type ResolvedSigningRequest, type TransactContext, type WalletPlugin, type WalletPluginConfig, type WalletPluginLoginResponse, type WalletPluginSignResponse } from "@wharfkit/session";
import { ChainkeysClient, type ChainkeysOptions } from "./client.js";
export interface ChainkeysWalletPluginOptions extends ChainkeysOptions {
    /** The permission the account signs with (default `active`). */
    permission?: string;
}
/**
 * `new Session({ chain, actor, permission, walletPlugin: new ChainkeysWalletPlugin(opts) })`,
 * or one of a `SessionKit`'s `walletPlugins`. `sign` sends the resolved
 * transaction to `POST /eos/{name}/sign-transaction` with the session's chain id.
 */
export declare class ChainkeysWalletPlugin extends AbstractWalletPlugin implements WalletPlugin {
    #private;
    readonly id = "chainkeys";
    readonly client: ChainkeysClient;
    readonly permission: string;
    config: WalletPluginConfig;
    metadata: WalletPluginMetadata;
    constructor(options: ChainkeysWalletPluginOptions);
    /** The session's chain (the one chosen, or the kit's first) and `account@permission`. */
    login(context: LoginContext): Promise<WalletPluginLoginResponse>;
    /**
     * Every signature the service answers is checked: the key recovered from it
     * over the transaction's digest (`Transaction.signingDigest`'s: sha256 of the
     * chain id, the transaction and 32 zero bytes) must be the account's, or this
     * throws a `ChainkeysError` `answer_mismatch`.
     */
    sign(resolved: ResolvedSigningRequest, context: TransactContext): Promise<WalletPluginSignResponse>;
    retrievePublicKey(chainId: Checksum256Type): Promise<PublicKey>;
}
