/**
 * The networks `verifyApproval` (verify.ts) reads: this package's own table of each
 * chain's public parameters (chain ids, bech32 prefixes, base58 version bytes), as a
 * wallet keeps them, never read from the server whose approval is being checked.
 *
 * Every network a chainkeys server serves is here, testnets and regtests too. A network
 * missing from this table is a difference, never a pass: its addresses cannot be
 * written as its wallets write them. Beyond the request's own decoding, the network is
 * held to two things: the request's chain id is the network's (a testnet request shown
 * under a mainnet's name, or the reverse, is named), and the account is the address the
 * signer's public key has on that network (cosmjs, bitcoinjs-lib `payments`).
 */
import type { Network } from "bitcoinjs-lib";
export interface Net {
    chainId?: string;
    hrp?: string;
    pubKeyHash?: number;
    scriptHash?: number;
}
export declare const NETWORKS: Record<string, Record<string, Net>>;
type Signer = {
    address: string;
    public_key: string;
    network: string;
    address_type?: string;
};
/** Why the signer's network cannot be verified here (null: it can). */
export declare function unknown(family: string, signer: Signer): string | null;
/** The signer's network (`unknown` has said it is one). */
export declare const netOf: (family: string, signer: Signer) => Net;
/** A UTXO network as bitcoinjs-lib takes it, for addresses and the message prefix
 * (its bip32 and wif versions are Bitcoin's: no key is read or written here). A network
 * with no segwit addresses gets a prefix no address has; `utxoAddress` writes none. */
export declare function bitcoinjsNetwork(family: string, net: Net): Network;
/** The address `script` pays on `net` as its wallets write it; null for a script with
 * no address there (a bare multisig, OP_RETURN, a segwit output on Dogecoin). */
export declare function utxoAddress(family: string, net: Net, script: Uint8Array): Promise<string | null>;
/** What the request's chain id and the account say against the signer's network. */
export declare function networkDifferences(family: string, signer: Signer, account: string, chainId: string | null | undefined): Promise<string[]>;
export {};
