/**
 * bitcoinjs-lib: `signPsbt(psbt, opts)` signs a `Psbt`'s inputs that pay the
 * account on the server (`POST /{litecoin,dogecoin}/{address}/sign-psbt`).
 *
 * There is no `SignerAsync`: bitcoinjs hands a signer only a 32-byte sighash,
 * and chainkeys signs only what it has decoded (inputs, outputs, amounts, fee),
 * never a bare hash.
 */
import type { Psbt, Network } from "bitcoinjs-lib";
import type { ChainkeysOptions } from "./client.js";
export type UtxoCoin = "litecoin" | "dogecoin";
export interface SignPsbtOptions extends ChainkeysOptions {
    /** Finalize the inputs the service signed (default `true`, as the service does). */
    finalize?: boolean;
    /** Which family the account is in; by default read from the Psbt's network. */
    coin?: UtxoCoin;
}
/** The service's answer: `hex` and `txid` once every input is final. */
export interface SignPsbtResult {
    psbt: string;
    complete: boolean;
    hex?: string;
    txid?: string;
}
/** The coin of a bitcoinjs `Network` (Litecoin's or Dogecoin's parameters). */
export declare function coinOf(network: Network | undefined): UtxoCoin | undefined;
/**
 * Sends `psbt` to chainkeys and resolves to the signed (and, with
 * `finalize`, finalized) `Psbt`: a new object, parsed with the same network
 * and maximum fee rate as the one given. `psbt` itself is not changed.
 */
export declare function signPsbt(psbt: Psbt, options: SignPsbtOptions): Promise<Psbt>;
