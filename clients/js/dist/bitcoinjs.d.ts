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
    /**
     * What checks the service's ECDSA signatures: an object with tiny-secp256k1's
     * `verify(hash, pubkey, signature, strict)`. By default `tiny-secp256k1` is
     * imported (an optional peer dependency).
     */
    ecc?: EccVerifier;
}
/** The part of tiny-secp256k1 the answer checks use. */
export interface EccVerifier {
    verify(hash: Uint8Array, pubkey: Uint8Array, signature: Uint8Array, strict?: boolean): boolean;
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
 * `finalize`, finalized) `Psbt`: a new object, a copy of `psbt` with the
 * service's signatures combined in (`Psbt.combine`), keeping its network and
 * maximum fee rate. `psbt` itself is not changed.
 *
 * The answer is checked before it is used (`ChainkeysError` `answer_mismatch`
 * otherwise): it must hold exactly `psbt`'s unsigned transaction; it may add
 * only signatures, a P2SH-P2WPKH redeem script, a multisig's witness script and
 * final scripts; every signature it adds (partial, or inside a final script) must
 * be a low-S SIGHASH_ALL (or the input's sighash type) signature by a key the
 * input's previous output pays, over that input's sighash; its final scripts must
 * be exactly what bitcoinjs builds from those signatures; and once every input is
 * final, the extracted transaction must be `psbt`'s transaction.
 *
 * A multisig PSBT (chainkeys registered as a co-signer, docs/multisig.md): the
 * service adds the signatures of the member keys it holds, unfinalized; with
 * `finalize`, bitcoinjs finalizes each input whose signatures reach the
 * threshold (another member's signatures may already be in `psbt`, or be added
 * to the result later with `signInput` and `finalizeAllInputs`).
 */
export declare function signPsbt(psbt: Psbt, options: SignPsbtOptions): Promise<Psbt>;
