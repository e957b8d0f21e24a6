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
import { ChainkeysClient } from "./client.js";
import { ChainkeysError } from "./errors.js";

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

interface PsbtInternals {
  opts?: { network?: Network; maximumFeeRate?: number };
}

/** The coin of a bitcoinjs `Network` (Litecoin's or Dogecoin's parameters). */
export function coinOf(network: Network | undefined): UtxoCoin | undefined {
  if (!network) return undefined;
  const prefix = network.messagePrefix ?? "";
  if (/Litecoin/i.test(prefix) || ["ltc", "tltc", "rltc"].includes(network.bech32)) return "litecoin";
  if (/Dogecoin/i.test(prefix) || ["doge", "tdge", "dcrt"].includes(network.bech32)) return "dogecoin";
  return undefined;
}

/**
 * Sends `psbt` to chainkeys and resolves to the signed (and, with
 * `finalize`, finalized) `Psbt`: a new object, parsed with the same network
 * and maximum fee rate as the one given. `psbt` itself is not changed.
 */
export async function signPsbt(psbt: Psbt, options: SignPsbtOptions): Promise<Psbt> {
  const client = new ChainkeysClient(options);
  const opts = (psbt as unknown as PsbtInternals).opts ?? {};
  const coin = options.coin ?? coinOf(opts.network);
  if (coin !== "litecoin" && coin !== "dogecoin") {
    throw new ChainkeysError(
      "chainkeys: cannot tell the coin from the Psbt's network; pass coin: \"litecoin\" or \"dogecoin\"",
      "unknown_coin", 0,
    );
  }
  const PsbtClass = psbt.constructor as typeof Psbt;
  const body = { psbt: psbt.toBase64(), finalize: options.finalize ?? true };
  return client.sign(client.accountPath(coin, "/sign-psbt"), body, (data: SignPsbtResult) => {
    if (typeof data?.psbt !== "string") {
      throw new ChainkeysError("chainkeys: the sign answer has no psbt", "invalid_response", 200, { body: data });
    }
    const parseOpts: { network?: Network; maximumFeeRate?: number } = {};
    if (opts.network) parseOpts.network = opts.network;
    if (opts.maximumFeeRate !== undefined) parseOpts.maximumFeeRate = opts.maximumFeeRate;
    return PsbtClass.fromBase64(data.psbt, parseOpts);
  });
}
