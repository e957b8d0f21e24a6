/**
 * A WharfKit `WalletPlugin` backed by chainkeys. Imported from
 * `@chainkeys/signers/wharfkit` (it needs `@wharfkit/session` at run time; the
 * other adapters need nothing).
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
    sign(resolved: ResolvedSigningRequest, context: TransactContext): Promise<WalletPluginSignResponse>;
    retrievePublicKey(chainId: Checksum256Type): Promise<PublicKey>;
}
