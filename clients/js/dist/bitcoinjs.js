import { ChainkeysClient } from "./client.js";
import { ChainkeysError } from "./errors.js";
/** The coin of a bitcoinjs `Network` (Litecoin's or Dogecoin's parameters). */
export function coinOf(network) {
    if (!network)
        return undefined;
    const prefix = network.messagePrefix ?? "";
    if (/Litecoin/i.test(prefix) || ["ltc", "tltc", "rltc"].includes(network.bech32))
        return "litecoin";
    if (/Dogecoin/i.test(prefix) || ["doge", "tdge", "dcrt"].includes(network.bech32))
        return "dogecoin";
    return undefined;
}
/**
 * Sends `psbt` to chainkeys and resolves to the signed (and, with
 * `finalize`, finalized) `Psbt`: a new object, parsed with the same network
 * and maximum fee rate as the one given. `psbt` itself is not changed.
 */
export async function signPsbt(psbt, options) {
    const client = new ChainkeysClient(options);
    const opts = psbt.opts ?? {};
    const coin = options.coin ?? coinOf(opts.network);
    if (coin !== "litecoin" && coin !== "dogecoin") {
        throw new ChainkeysError("chainkeys: cannot tell the coin from the Psbt's network; pass coin: \"litecoin\" or \"dogecoin\"", "unknown_coin", 0);
    }
    const PsbtClass = psbt.constructor;
    const body = { psbt: psbt.toBase64(), finalize: options.finalize ?? true };
    return client.sign(client.accountPath(coin, "/sign-psbt"), body, (data) => {
        if (typeof data?.psbt !== "string") {
            throw new ChainkeysError("chainkeys: the sign answer has no psbt", "invalid_response", 200, { body: data });
        }
        const parseOpts = {};
        if (opts.network)
            parseOpts.network = opts.network;
        if (opts.maximumFeeRate !== undefined)
            parseOpts.maximumFeeRate = opts.maximumFeeRate;
        return PsbtClass.fromBase64(data.psbt, parseOpts);
    });
}
