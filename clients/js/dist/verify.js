/**
 * `verifyApproval`: an approval, as `GET /approvals/{id}` gives it, checked against its
 * own raw request with the ecosystems' reference libraries (cosmjs, bitcoinjs-lib,
 * @wharfkit/antelope), never the service's decoders. The sign bytes' digest and the
 * summary (every output, message or action with its recipient and amounts in base and
 * display units, the fee, the memo, the IBC route, a signed message) are rebuilt here and
 * every difference from what the approval shows is named by its path. A kind this module
 * does not read is a difference, never a pass; so is a network (verify-networks.ts: every
 * network a chainkeys server serves, testnets too). Each peer is loaded when a request of
 * its family is verified.
 */
import { peer } from "./client.js";
import { bitcoinjsNetwork, networkDifferences, netOf, unknown, utxoAddress } from "./verify-networks.js";
const SAFE = BigInt(Number.MAX_SAFE_INTEGER);
const SEND = "/cosmos.bank.v1beta1.MsgSend";
const IBC = "/ibc.applications.transfer.v1.MsgTransfer";
const COSMOS_UNITS = { uatom: "ATOM", uosmo: "OSMO", ujuno: "JUNO", uakt: "AKT", ustars: "STARS", utia: "TIA" };
const hex = (b) => Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
const unhex = (s) => Uint8Array.from((s.match(/../g) ?? []).map((h) => parseInt(h, 16)));
const b64 = (s) => Uint8Array.from(atob(s), (c) => c.charCodeAt(0));
const utf8 = (s) => new TextEncoder().encode(s);
const concat = (...parts) => {
    const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
    let at = 0;
    for (const p of parts) {
        out.set(p, at);
        at += p.length;
    }
    return out;
};
async function sha256(data) {
    const { sha256: hash } = await peer(() => import("@cosmjs/crypto"), "@cosmjs/crypto", "verifying approvals");
    return hash(data);
}
/** An amount as the approval shows it: the integer as decimal text, display beside it. */
function amount(denom, value, base, unit, decimals) {
    const out = { denom, amount: value.toString(), base_unit: base ?? denom };
    if (unit !== null && decimals !== null) {
        const scale = 10n ** BigInt(decimals);
        const frac = decimals ? (value % scale).toString().padStart(decimals, "0").replace(/0+$/, "") : "";
        out.display = `${value / scale}${frac ? "." + frac : ""} ${unit}`;
    }
    return out;
}
const item = (type, recipient, amounts, extra = {}) => ({ type, recipient, amounts, ...extra });
function messageRecord(data) {
    const shown = data.slice(0, 4096);
    const out = { length: data.length, hex: hex(shown) };
    let text;
    try {
        text = new TextDecoder("utf-8", { fatal: true }).decode(shown);
    }
    catch {
        return out;
    }
    // eslint-disable-next-line no-control-regex
    if (!/[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/.test(text.replace(/[\n\t]/g, "")))
        out.text = text;
    return out;
}
function safe(value) {
    if (Array.isArray(value))
        return value.map(safe);
    if (typeof value === "bigint")
        return value > SAFE || value < -SAFE ? value.toString() : Number(value);
    if (value && typeof value === "object" && !(value instanceof Uint8Array)) {
        return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, safe(v)]));
    }
    return value;
}
// ---- Cosmos (cosmjs) ---------------------------------------------------------------
const cosmosAmount = (denom, value) => {
    const unit = COSMOS_UNITS[denom] ?? null;
    return amount(denom, BigInt(value), null, unit, unit ? 6 : null);
};
function ibcRoute(channel, port, height, stamp) {
    const shown = height === null || (height[0] === 0n && height[1] === 0n) ? null : `${height[0]}-${height[1]}`;
    return { channel, port, timeout_height: shown, timeout_timestamp: stamp || null };
}
async function cosmosDirect(bodyBytes, authBytes, chainId, accountNumber) {
    const { makeSignBytes } = await peer(() => import("@cosmjs/proto-signing"), "@cosmjs/proto-signing", "verifying approvals");
    const { TxBody, AuthInfo } = await peer(() => import("cosmjs-types/cosmos/tx/v1beta1/tx"), "cosmjs-types", "verifying approvals");
    const { MsgSend } = await peer(() => import("cosmjs-types/cosmos/bank/v1beta1/tx"), "cosmjs-types", "verifying approvals");
    const { MsgTransfer } = await peer(() => import("cosmjs-types/ibc/applications/transfer/v1/tx"), "cosmjs-types", "verifying approvals");
    const body = TxBody.decode(bodyBytes);
    const auth = AuthInfo.decode(authBytes);
    const items = body.messages.map((m) => {
        if (m.typeUrl === SEND) {
            const send = MsgSend.decode(m.value);
            return item(SEND, send.toAddress, send.amount.map((c) => cosmosAmount(c.denom, c.amount)));
        }
        if (m.typeUrl === IBC) {
            const t = MsgTransfer.decode(m.value);
            const h = t.timeoutHeight;
            const route = ibcRoute(t.sourceChannel, t.sourcePort, h ? [h.revisionNumber, h.revisionHeight] : null, t.timeoutTimestamp);
            return item(IBC, t.receiver, [cosmosAmount(t.token.denom, t.token.amount)], { memo: t.memo, ibc: route });
        }
        return item(m.typeUrl, null, [], { decoded: false });
    });
    const doc = makeSignBytes({ bodyBytes, authInfoBytes: authBytes, chainId, accountNumber });
    return {
        digest: hex(await sha256(doc)), items, chain_id: chainId, memo: body.memo,
        fee: (auth.fee?.amount ?? []).map((c) => cosmosAmount(c.denom, c.amount)),
    };
}
const pick = (doc, camel, snake) => doc[camel] ?? doc[snake];
const cosmosSignDirect = async (req) => {
    const d = req.signDoc;
    return cosmosDirect(b64(pick(d, "bodyBytes", "body_bytes")), b64(pick(d, "authInfoBytes", "auth_info_bytes")), String(pick(d, "chainId", "chain_id")), BigInt(pick(d, "accountNumber", "account_number")));
};
function cosmosTransfer(ibc) {
    return async (req, signer) => {
        const { makeAuthInfoBytes, encodePubkey } = await peer(() => import("@cosmjs/proto-signing"), "@cosmjs/proto-signing", "verifying approvals");
        const { encodeSecp256k1Pubkey } = await peer(() => import("@cosmjs/amino"), "@cosmjs/amino", "verifying approvals");
        const { TxBody } = await peer(() => import("cosmjs-types/cosmos/tx/v1beta1/tx"), "cosmjs-types", "verifying approvals");
        const { MsgSend } = await peer(() => import("cosmjs-types/cosmos/bank/v1beta1/tx"), "cosmjs-types", "verifying approvals");
        const { MsgTransfer } = await peer(() => import("cosmjs-types/ibc/applications/transfer/v1/tx"), "cosmjs-types", "verifying approvals");
        const token = { denom: req.denom, amount: BigInt(req.amount).toString() };
        const message = ibc
            ? { typeUrl: IBC, value: MsgTransfer.encode(MsgTransfer.fromPartial({
                    sourcePort: req.sourcePort || "transfer", sourceChannel: req.sourceChannel, token, sender: req.fromAddress,
                    receiver: req.toAddress, timeoutHeight: { revisionNumber: 0n, revisionHeight: 0n },
                    timeoutTimestamp: BigInt(req.timeoutTimestamp)
                })).finish() }
            : { typeUrl: SEND, value: MsgSend.encode({ fromAddress: req.fromAddress, toAddress: req.toAddress, amount: [token] }).finish() };
        const body = TxBody.encode(TxBody.fromPartial({ messages: [message], memo: req.memo ?? "",
            timeoutHeight: BigInt(req.timeoutHeight ?? 0) })).finish();
        const pubkey = encodePubkey(encodeSecp256k1Pubkey(b64(signer.public_key)));
        const fee = [{ denom: req.feeDenom, amount: BigInt(req.feeAmount).toString() }];
        const auth = makeAuthInfoBytes([{ pubkey, sequence: BigInt(req.sequence) }], fee, Number(req.gasLimit), undefined, undefined);
        const rebuilt = await cosmosDirect(body, auth, String(req.chainId), BigInt(req.accountNumber));
        for (const entry of rebuilt.items)
            if (entry.memo === "")
                delete entry.memo; // a transfer sets no IBC memo
        return rebuilt;
    };
}
function aminoItem(msg) {
    const v = msg.value;
    if (msg.type === "cosmos-sdk/MsgSend")
        return item(SEND, v.to_address, v.amount.map((c) => cosmosAmount(c.denom, c.amount)));
    if (msg.type === "cosmos-sdk/MsgTransfer") {
        const h = v.timeout_height;
        const height = h === undefined ? null : [BigInt(h.revision_number ?? 0), BigInt(h.revision_height ?? 0)];
        const stamp = v.timeout_timestamp === undefined ? null : BigInt(v.timeout_timestamp);
        return item(IBC, v.receiver, [cosmosAmount(v.token.denom, v.token.amount)], { ...(v.memo !== undefined ? { memo: v.memo } : {}), ibc: ibcRoute(v.source_channel, v.source_port, height, stamp) });
    }
    return item(String(msg.type).slice(0, 200), null, [], { decoded: false });
}
const cosmosAmino = async (req) => {
    const { serializeSignDoc } = await peer(() => import("@cosmjs/amino"), "@cosmjs/amino", "verifying approvals");
    const doc = req.signDoc;
    return { digest: hex(await sha256(serializeSignDoc(doc))), items: doc.msgs.map(aminoItem),
        fee: doc.fee.amount.map((c) => cosmosAmount(c.denom, c.amount)), chain_id: doc.chain_id, memo: doc.memo ?? null };
};
const cosmosMessage = async (req, signer) => {
    const { serializeSignDoc, makeSignDoc } = await peer(() => import("@cosmjs/amino"), "@cosmjs/amino", "verifying approvals");
    const data = req.message != null ? utf8(req.message) : b64(req.data);
    const msg = { type: "sign/MsgSignData", value: { signer: signer.address, data: btoa(String.fromCharCode(...data)) } };
    const doc = makeSignDoc([msg], { gas: "0", amount: [] }, "", "", 0, 0);
    return { digest: hex(await sha256(serializeSignDoc(doc))), items: [], fee: [], raw: true, message: data };
};
// ---- Dogecoin, Litecoin (bitcoinjs-lib) ----------------------------------------------
const UTXO = {
    dogecoin: { ticker: "DOGE", base: "koinu" },
    litecoin: { ticker: "LTC", base: "litoshi" },
};
function varint(n) {
    if (n < 0xfd)
        return Uint8Array.of(n);
    if (n <= 0xffff)
        return Uint8Array.of(0xfd, n & 0xff, n >> 8);
    return Uint8Array.of(0xfe, n & 0xff, (n >> 8) & 0xff, (n >> 16) & 0xff, n >>> 24);
}
async function utxoSummary(family, signer, tx, prevouts) {
    const btc = await peer(() => import("bitcoinjs-lib"), "bitcoinjs-lib", "verifying approvals");
    const { ticker, base } = UTXO[family];
    const net = netOf(family, signer); // verifyApproval has checked it is one of the table's
    const network = bitcoinjsNetwork(family, net);
    const pubkey = unhex(signer.public_key);
    const kind = signer.address_type ?? "p2pkh";
    const p2wpkh = btc.payments.p2wpkh({ pubkey, network });
    const mine = kind === "p2pkh" ? btc.payments.p2pkh({ pubkey, network }).output
        : kind === "p2wpkh" ? p2wpkh.output : btc.payments.p2sh({ redeem: p2wpkh, network }).output;
    const same = (a, b) => a.length === b.length && a.every((x, i) => x === b[i]);
    const digests = [];
    prevouts.forEach(([script, value], n) => {
        if (!same(script, mine))
            return;
        if (kind === "p2pkh")
            digests.push(tx.hashForSignature(n, script, 1));
        else if (value === null)
            throw new Error(`input ${n} is a segwit input whose amount the request does not give`);
        else
            digests.push(tx.hashForWitnessV0(n, btc.payments.p2pkh({ pubkey }).output, value, 1));
    });
    if (!digests.length)
        throw new Error("no input spends an output of the account");
    const items = [];
    for (const o of tx.outs) {
        const to = await utxoAddress(family, net, o.script);
        const extra = same(o.script, mine) ? { change: true } : {};
        if (to === null)
            extra.decoded = false;
        items.push(item("output", to, [amount(ticker, BigInt(o.value), base, ticker, 8)], extra));
    }
    const values = prevouts.map(([, v]) => v);
    const out = tx.outs.reduce((n, o) => n + BigInt(o.value), 0n);
    const fee = values.includes(null) ? null
        : [amount(ticker, values.reduce((n, v) => n + v, 0n) - out, base, ticker, 8)];
    return { digest: hex(await sha256(concat(...digests))), items, fee };
}
function utxoRaw(family) {
    return async (req, signer) => {
        const btc = await peer(() => import("bitcoinjs-lib"), "bitcoinjs-lib", "verifying approvals");
        const tx = btc.Transaction.fromHex(req.hex);
        const prevouts = tx.ins.map((input, n) => {
            const txid = hex(Uint8Array.from(input.hash).reverse());
            const prev = (req.prevtxs ?? []).find((p) => p.txid === txid && Number(p.vout) === input.index);
            if (!prev)
                throw new Error(`input ${n}'s previous output is not in prevtxs`);
            let value = null;
            if (prev.hex != null)
                value = BigInt(btc.Transaction.fromHex(prev.hex).outs[input.index].value);
            else if (prev.amount != null) {
                const [whole, frac = ""] = String(prev.amount).split(".");
                value = BigInt(whole) * 100000000n + BigInt((frac + "00000000").slice(0, 8));
            }
            return [unhex(prev.scriptPubKey), value];
        });
        return utxoSummary(family, signer, tx, prevouts);
    };
}
function utxoPsbt(family) {
    return async (req, signer) => {
        const btc = await peer(() => import("bitcoinjs-lib"), "bitcoinjs-lib", "verifying approvals");
        const psbt = btc.Psbt.fromBase64(req.psbt, { network: bitcoinjsNetwork(family, netOf(family, signer)) });
        const tx = psbt.__CACHE.__TX;
        const prevouts = psbt.data.inputs.map((input, n) => {
            if (input.witnessUtxo)
                return [input.witnessUtxo.script, BigInt(input.witnessUtxo.value)];
            if (!input.nonWitnessUtxo)
                throw new Error(`input ${n} gives no previous output`);
            const prev = btc.Transaction.fromBuffer(input.nonWitnessUtxo).outs[tx.ins[n].index];
            return [prev.script, BigInt(prev.value)];
        });
        return utxoSummary(family, signer, tx, prevouts);
    };
}
function utxoMessage(family) {
    return async (req, signer) => {
        const btc = await peer(() => import("bitcoinjs-lib"), "bitcoinjs-lib", "verifying approvals");
        const data = utf8(String(req.message));
        const magic = utf8(bitcoinjsNetwork(family, netOf(family, signer)).messagePrefix.slice(1));
        const digest = btc.crypto.hash256(concat(varint(magic.length), magic, varint(data.length), data));
        return { digest: hex(digest), items: [], fee: [], raw: true, message: data };
    };
}
// ---- EOS (@wharfkit/antelope) --------------------------------------------------------
const TOKEN_ABI = { version: "eosio::abi/1.1", structs: [{ name: "transfer", base: "", fields: [
                { name: "from", type: "name" }, { name: "to", type: "name" }, { name: "quantity", type: "asset" }, { name: "memo", type: "string" }
            ] }] };
const eosTransaction = async (req) => {
    const { Serializer, Transaction } = await peer(() => import("@wharfkit/antelope"), "@wharfkit/antelope", "verifying approvals");
    const raw = unhex(req.serializedTransaction);
    const cfd = req.serializedContextFreeData ? unhex(req.serializedContextFreeData) : new Uint8Array();
    const tx = Serializer.decode({ data: raw, type: Transaction });
    const digest = await sha256(concat(unhex(req.chainId), raw, cfd.length ? await sha256(cfd) : new Uint8Array(32)));
    const items = tx.context_free_actions.map((a) => item(`${a.account}::${a.name}`, null, [], { decoded: false }));
    for (const a of tx.actions) {
        const kind = `${a.account}::${a.name}`;
        if (String(a.name) !== "transfer") {
            items.push(item(kind, null, [], { decoded: false }));
            continue;
        }
        const t = Serializer.decode({ data: a.data, abi: TOKEN_ABI, type: "transfer" });
        const precision = t.quantity.symbol.precision;
        const code = String(t.quantity.symbol.code);
        const step = precision ? `0.${"0".repeat(precision - 1)}1` : "1";
        items.push(item(kind, String(t.to), [amount(`${a.account}:${code}`, BigInt(String(t.quantity.units)), `units of ${step} ${code}`, code, precision)]));
    }
    return { digest: hex(digest), items, fee: [], chain_id: req.chainId };
};
const eosMessage = async (req) => {
    const data = req.message != null ? utf8(req.message) : unhex(req.data);
    return { digest: hex(await sha256(data)), items: [], fee: [], raw: true, message: data };
};
const DECODERS = {
    "cosmos sign-direct": cosmosSignDirect,
    "cosmos sign-amino": cosmosAmino,
    "cosmos sign-message": cosmosMessage,
    "cosmos sign-transfer": cosmosTransfer(false),
    "cosmos sign-ibc-transfer": cosmosTransfer(true),
    "eos sign-transaction": eosTransaction,
    "eos sign-message": eosMessage,
};
for (const family of Object.keys(UTXO)) {
    DECODERS[`${family} sign-raw-transaction`] = utxoRaw(family);
    DECODERS[`${family} sign-psbt`] = utxoPsbt(family);
    DECODERS[`${family} sign-message`] = utxoMessage(family);
}
function diff(path, said, real, found) {
    const isObject = (v) => v !== null && typeof v === "object" && !Array.isArray(v);
    if (isObject(said) && isObject(real)) {
        for (const key of [...new Set([...Object.keys(said), ...Object.keys(real)])].sort()) {
            if (!(key in real))
                found.push(`${path}.${key}: the approval says ${JSON.stringify(said[key])}; the request has none`);
            else if (!(key in said))
                found.push(`${path}.${key}: the approval has none; the request says ${JSON.stringify(real[key])}`);
            else
                diff(`${path}.${key}`, said[key], real[key], found);
        }
    }
    else if (Array.isArray(said) && Array.isArray(real) && said.length === real.length) {
        said.forEach((v, i) => diff(`${path}[${i}]`, v, real[i], found));
    }
    else if (JSON.stringify(said) !== JSON.stringify(real)) {
        found.push(`${path}: the approval says ${JSON.stringify(said)}, the request says ${JSON.stringify(real)}`);
    }
}
/** Check an approval (the JSON of `GET /approvals/{id}` or its `data`) against its raw
 * request: its digest and summary rebuilt here, every difference named by its path. */
export async function verifyApproval(approval) {
    const a = approval && typeof approval.data === "object" && approval.data !== null ? approval.data : approval;
    const missing = ["family", "account", "kind", "digest", "summary", "request", "signer"].filter((k) => a?.[k] == null);
    if (missing.length)
        return { ok: false, differences: [`not an approval with its raw request: no ${missing.join(", ")}`] };
    if (a.signer.multisig)
        return { ok: false, differences: ["a multisig account's request is not verified here"] };
    const decode = DECODERS[`${a.family} ${a.kind}`];
    if (!decode)
        return { ok: false, differences: [`${a.family} ${a.kind}: not verified by this client`] };
    const strange = unknown(a.family, a.signer);
    if (strange !== null)
        return { ok: false, differences: [strange] };
    let rebuilt;
    try {
        rebuilt = await decode(a.request, a.signer);
    }
    catch (e) {
        return { ok: false, differences: [`request: it does not decode here (${e instanceof Error ? e.message : String(e)})`] };
    }
    const summary = {
        account: a.account, family: a.family, network: a.signer.network, kind: a.kind, chain_id: rebuilt.chain_id ?? null,
        items: rebuilt.items, fee: rebuilt.fee, digest: rebuilt.digest, raw: rebuilt.raw ?? false, memo: rebuilt.memo ?? null,
    };
    if (rebuilt.message !== undefined)
        summary.message = messageRecord(rebuilt.message);
    const found = [];
    if (rebuilt.digest !== a.digest)
        found.push(`digest: the approval says ${a.digest}, the request is ${rebuilt.digest}`);
    found.push(...await networkDifferences(a.family, a.signer, String(a.account), rebuilt.chain_id));
    diff("summary", a.summary, safe(summary), found);
    return { ok: found.length === 0, differences: found };
}
