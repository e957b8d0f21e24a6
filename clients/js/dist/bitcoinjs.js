import { ChainkeysClient, answerMismatch, bytesEqual, peer, toHex } from "./client.js";
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
export async function signPsbt(psbt, options) {
    const client = new ChainkeysClient(options);
    const opts = psbt.opts ?? {};
    const coin = options.coin ?? coinOf(opts.network);
    if (coin !== "litecoin" && coin !== "dogecoin") {
        throw new ChainkeysError("chainkeys: cannot tell the coin from the Psbt's network; pass coin: \"litecoin\" or \"dogecoin\"", "unknown_coin", 0);
    }
    const ecc = options.ecc ?? await peer(() => import("tiny-secp256k1"), "tiny-secp256k1", "checking the service's Bitcoin-family signatures (or pass options.ecc)");
    const PsbtClass = psbt.constructor;
    const parseOpts = {};
    if (opts.network)
        parseOpts.network = opts.network;
    if (opts.maximumFeeRate !== undefined)
        parseOpts.maximumFeeRate = opts.maximumFeeRate;
    const sent = psbt.toBase64(); // the caller's PSBT as it was sent, whatever happens to `psbt` meanwhile
    const copy = () => PsbtClass.fromBase64(sent, parseOpts);
    // A multisig input (a witness script, or a bare multisig redeem script): the service
    // adds its members' signatures unfinalized, each checked here like any signature, and
    // bitcoinjs finalizes the inputs whose signatures reach the threshold.
    const multisig = psbt.data.inputs.some((i) => i.witnessScript !== undefined
        || (i.redeemScript !== undefined && isMultisig(i.redeemScript)));
    const finalize = options.finalize ?? true;
    const body = { psbt: sent, finalize: multisig ? false : finalize };
    return client.sign(client.accountPath(coin, "/sign-psbt"), body, (data) => {
        if (typeof data?.psbt !== "string") {
            throw new ChainkeysError("chainkeys: the sign answer has no psbt", "invalid_response", 200, { body: data });
        }
        let answer;
        try {
            answer = PsbtClass.fromBase64(data.psbt, parseOpts);
        }
        catch (cause) {
            throw answerMismatch(`its psbt does not parse (${String(cause)})`, data, cause);
        }
        const result = checkedPsbt(copy, answer, ecc, data);
        if (multisig && finalize)
            finalizeWhereComplete(result, sent, data);
        return result;
    });
}
const SIGHASH_ALL = 0x01;
/** The fields a signer adds to an input: signatures, P2SH-P2WPKH's redeem script, final scripts. */
const SIGNER_FIELDS = ["redeemScript", "witnessScript", "finalScriptSig", "finalScriptWitness"];
const OP_CHECKMULTISIG = 0xae;
/** Whether a script is a bare multisig (`OP_m <keys> OP_n OP_CHECKMULTISIG`). */
function isMultisig(script) {
    return script.length > 3 && script[script.length - 1] === OP_CHECKMULTISIG
        && script[0] >= 0x51 && script[0] <= 0x60;
}
/**
 * Finalize (bitcoinjs) each multisig input that now holds enough signatures; once every
 * input is final, the extracted transaction is checked as any finalized answer's.
 */
function finalizeWhereComplete(psbt, sent, data) {
    psbt.data.inputs.forEach((input, i) => {
        if (input.finalScriptSig !== undefined || input.finalScriptWitness !== undefined)
            return;
        const script = input.witnessScript ?? input.redeemScript;
        if (script === undefined || !isMultisig(script))
            return;
        const threshold = script[0] - 0x50;
        if ((input.partialSig ?? []).length >= threshold)
            psbt.finalizeInput(i);
    });
    if (psbt.data.inputs.every((i) => i.finalScriptSig !== undefined || i.finalScriptWitness !== undefined)) {
        const original = psbt.constructor.fromBase64(sent);
        checkFinalTransaction(psbt, original.data.globalMap.unsignedTx.toBuffer(), data);
    }
}
/** The caller's PSBT with the answer combined in, once every check passes. */
function checkedPsbt(copy, answer, ecc, data) {
    const original = copy();
    const unsigned = original.data.globalMap.unsignedTx.toBuffer();
    if (!bytesEqual(answer.data.globalMap.unsignedTx.toBuffer(), unsigned)) {
        throw answerMismatch("its PSBT holds another unsigned transaction than the one sent", data);
    }
    const result = copy();
    try {
        result.combine(answer);
    }
    catch (cause) {
        throw answerMismatch(`its PSBT does not combine with the one sent (${String(cause)})`, data, cause);
    }
    // Only what a signer adds may be new; combine never replaces what the caller had.
    if (count(result.data.globalMap, ["unsignedTx"]) !== count(original.data.globalMap, ["unsignedTx"])) {
        throw answerMismatch("it adds global fields to the PSBT", data);
    }
    result.data.outputs.forEach((out, i) => {
        if (count(out) !== count(original.data.outputs[i]))
            throw answerMismatch(`it adds fields to output ${i}`, data);
    });
    const validator = (pubkey, hash, signature) => ecc.verify(hash, pubkey, signature, true); // strict: low-S only
    let signed = 0;
    result.data.inputs.forEach((input, i) => {
        const before = original.data.inputs[i];
        const had = new Set((before.partialSig ?? []).map((p) => toHex(p.pubkey)));
        const newSigs = (input.partialSig ?? []).filter((p) => !had.has(toHex(p.pubkey)));
        const newFields = SIGNER_FIELDS.filter((f) => input[f] !== undefined && before[f] === undefined);
        if (count(input) - count(before) !== newSigs.length + newFields.length) {
            throw answerMismatch(`it adds fields other than signatures and final scripts to input ${i}`, data);
        }
        for (const p of newSigs) {
            checkSignature(result, i, p.pubkey, p.signature, validator, data);
            signed++;
        }
        if (newFields.includes("finalScriptSig") || newFields.includes("finalScriptWitness")) {
            checkFinal(copy(), i, input.finalScriptSig, input.finalScriptWitness, validator, data);
            signed++;
        }
    });
    if (signed === 0 && !answer.data.inputs.some((input, i) => (input.partialSig ?? []).some((p) => (original.data.inputs[i].partialSig ?? []).some((q) => bytesEqual(p.pubkey, q.pubkey) && bytesEqual(p.signature, q.signature))))) {
        throw answerMismatch("its PSBT carries no signature", data); // neither new nor one the caller already had
    }
    if (result.data.inputs.every((i) => i.finalScriptSig !== undefined || i.finalScriptWitness !== undefined)) {
        checkFinalTransaction(result, unsigned, data);
    }
    return result;
}
/** The number of key-value pairs of a PSBT map (an array field is one pair per item). */
function count(map, skip = []) {
    let n = 0;
    for (const [k, v] of Object.entries(map)) {
        if (v === undefined || skip.includes(k))
            continue;
        n += Array.isArray(v) ? v.length : 1;
    }
    return n;
}
/**
 * One signature of input `i` (held as `psbt`'s partial signature for `pubkey`):
 * the input's sighash type, and valid for the key the input's script pays
 * (bitcoinjs `validateSignaturesOfInput`, which also checks the key is the script's).
 */
function checkSignature(psbt, i, pubkey, signature, validator, data) {
    const wanted = psbt.data.inputs[i].sighashType ?? SIGHASH_ALL;
    if (signature.length < 9 || signature[signature.length - 1] !== wanted) {
        throw answerMismatch(`input ${i}'s signature is not a sighash type 0x${wanted.toString(16)} signature`, data);
    }
    let ok;
    try {
        ok = psbt.validateSignaturesOfInput(i, validator, pubkey);
    }
    catch (cause) {
        throw answerMismatch(`input ${i}'s signature cannot be checked (${String(cause)})`, data, cause);
    }
    if (!ok)
        throw answerMismatch(`input ${i}'s signature does not verify for the key its previous output pays`, data);
}
/**
 * A final script the answer added to input `i` of a single-key input
 * (P2PKH, P2WPKH, P2SH-P2WPKH): its signature and key are checked as a partial
 * signature on a fresh copy of the caller's PSBT, which bitcoinjs then finalizes;
 * the answer's final scripts must be exactly those.
 */
function checkFinal(scratch, i, scriptSig, witness, validator, data) {
    const sigPushes = scriptSig && scriptSig.length ? pushes(scriptSig) : [];
    const stack = witness ? witnessStack(witness) : [];
    let parts, redeem;
    if (sigPushes && stack && stack.length === 2 && sigPushes.length <= 1) {
        parts = stack; // P2WPKH, or P2SH-P2WPKH with its redeem script as the scriptSig
        redeem = sigPushes[0];
    }
    else if (sigPushes && sigPushes.length === 2 && stack && stack.length === 0) {
        parts = sigPushes; // P2PKH
    }
    if (!parts)
        throw answerMismatch(`input ${i}'s final script is not a single-key signature this client can check`, data);
    const [signature, pubkey] = parts;
    const input = scratch.data.inputs[i];
    input.partialSig = [{ pubkey, signature }];
    if (redeem && !input.redeemScript)
        input.redeemScript = redeem;
    checkSignature(scratch, i, pubkey, signature, validator, data);
    try {
        scratch.finalizeInput(i);
    }
    catch (cause) {
        throw answerMismatch(`input ${i}'s final script cannot be rebuilt (${String(cause)})`, data, cause);
    }
    const built = scratch.data.inputs[i];
    const same = (a, b) => bytesEqual(a?.length ? a : undefined, b?.length ? b : undefined);
    if (!same(built.finalScriptSig, scriptSig) || !same(built.finalScriptWitness, witness)) {
        throw answerMismatch(`input ${i}'s final script is not the one its signature makes`, data);
    }
}
/** Every input final: the extracted transaction is the one sent, signed (same txid; same unsigned form). */
function checkFinalTransaction(psbt, unsigned, data) {
    let tx;
    try {
        tx = psbt.extractTransaction(true);
    }
    catch (cause) {
        throw answerMismatch(`its final transaction cannot be extracted (${String(cause)})`, data, cause);
    }
    const bare = tx.clone();
    for (const input of bare.ins) {
        input.script = new Uint8Array(0);
        input.witness = [];
    }
    if (!bytesEqual(bare.toBuffer(), unsigned)) {
        throw answerMismatch("its final transaction is not the one sent", data);
    }
    // A segwit transaction's txid ignores its witnesses: it is the unsigned one's.
    if (tx.ins.every((input) => input.script.length === 0) && tx.getId() !== bare.getId()) {
        throw answerMismatch("its final transaction's txid is not the unsigned transaction's", data);
    }
}
/** The data pushes of a push-only script, or undefined for anything else. */
function pushes(script) {
    const out = [];
    for (let at = 0; at < script.length;) {
        const op = script[at++];
        let n;
        if (op >= 0x01 && op <= 0x4b)
            n = op;
        else if (op === 0x4c && at + 1 <= script.length)
            n = script[at++];
        else if (op === 0x4d && at + 2 <= script.length) {
            n = script[at] | (script[at + 1] << 8);
            at += 2;
        }
        else
            return undefined;
        if (at + n > script.length)
            return undefined;
        out.push(script.subarray(at, at + n));
        at += n;
    }
    return out;
}
/** The items of a serialized witness (BIP144: a count, then length-prefixed items), or undefined. */
function witnessStack(bytes) {
    let at = 0;
    const varint = () => {
        const first = bytes[at++];
        if (first === undefined)
            return undefined;
        if (first < 0xfd)
            return first;
        const size = first === 0xfd ? 2 : first === 0xfe ? 4 : 8;
        if (at + size > bytes.length || size === 8)
            return undefined;
        let n = 0;
        for (let k = size - 1; k >= 0; k--)
            n = n * 256 + bytes[at + k];
        at += size;
        return n;
    };
    const items = varint();
    if (items === undefined)
        return undefined;
    const out = [];
    for (let k = 0; k < items; k++) {
        const n = varint();
        if (n === undefined || at + n > bytes.length)
            return undefined;
        out.push(bytes.subarray(at, at + n));
        at += n;
    }
    return at === bytes.length ? out : undefined;
}
