/** The HTTP part every adapter shares: the envelope, auth, errors, approvals. */
import { ApprovalPending, ChainkeysError } from "./errors.js";
/** The 32 bytes a vote signs: the `challenge` of `challenge()`'s options, decoded. */
export function challengeBytes(options) {
    const s = options.challenge.replace(/-/g, "+").replace(/_/g, "/");
    return fromBase64(s + "===".slice((s.length + 3) % 4));
}
/** A small client for the endpoints the adapters call. */
export class ChainkeysClient {
    options;
    #base;
    #fetch;
    constructor(options) {
        for (const key of ["url", "token", "account"]) {
            if (typeof options?.[key] !== "string" || options[key] === "") {
                throw new TypeError(`chainkeys: options.${key} must be a non-empty string`);
            }
        }
        const f = options.fetch ?? globalThis.fetch;
        if (typeof f !== "function")
            throw new TypeError("chainkeys: no fetch available; pass options.fetch");
        this.options = options;
        this.#base = options.url.replace(/\/+$/, "");
        this.#fetch = options.fetch ? options.fetch : (input, init) => globalThis.fetch(input, init);
    }
    /** `/{family}/{account}` + suffix, each segment URL-encoded. */
    accountPath(family, suffix = "") {
        return `/${family}/${encodeURIComponent(this.options.account)}${suffix}`;
    }
    /** GET or POST one endpoint and return the envelope's `data`. */
    async call(method, path, body) {
        const headers = {
            Authorization: `Bearer ${this.options.token}`,
            Accept: "application/json",
        };
        if (body !== undefined)
            headers["Content-Type"] = "application/json";
        let response;
        try {
            response = await this.#fetch(this.#base + path, {
                method, headers, body: body === undefined ? undefined : JSON.stringify(body),
            });
        }
        catch (cause) {
            throw new ChainkeysError(`chainkeys: ${method} ${path} failed: ${String(cause)}`, "network_error", 0, { cause });
        }
        const text = await response.text();
        let envelope;
        try {
            envelope = JSON.parse(text);
        }
        catch {
            throw new ChainkeysError(`chainkeys: ${method} ${path} answered HTTP ${response.status} with a body that is not JSON`, response.ok ? "invalid_response" : httpCode(response.status), response.status, { body: text });
        }
        if (!response.ok || envelope === null || typeof envelope !== "object" || envelope.success !== true) {
            const e = (envelope ?? {});
            throw new ChainkeysError(typeof e.message === "string" ? e.message : `HTTP ${response.status}`, typeof e.code === "string" ? e.code : response.ok ? "invalid_response" : httpCode(response.status), response.status, { body: envelope });
        }
        return { status: response.status, envelope };
    }
    /** GET: the envelope's `data`. */
    async get(path) {
        return (await this.call("GET", path)).envelope.data;
    }
    /**
     * POST a sign request; `finish` turns the endpoint's `data` into the
     * adapter's result, now or, after a 202, once the request is approved.
     */
    async sign(path, body, finish) {
        const { status, envelope } = await this.call("POST", path, body);
        if (status === 202) {
            const approval = envelope.data;
            if (!approval || typeof approval.id !== "string") {
                throw new ChainkeysError("chainkeys: a 202 answer without an approval id", "invalid_response", 202, { body: envelope });
            }
            const pending = new ApprovalPending(envelope.message ?? "", approval, (id) => this.approval(id), finish);
            const wait = this.options.waitForApproval;
            if (wait)
                return pending.waitForApproval(wait === true ? {} : wait);
            throw pending;
        }
        return finish(envelope.data);
    }
    /**
     * `POST /{family}/{account}/sign-batch`: up to 1,000 of the account's sign requests in one
     * request and one transaction; each item is decided, capped, audited and answered as its
     * endpoint alone would answer it, in order (an item's caps see what the items before it
     * spent), and no signature is handed out unless all of the batch's committed. One result
     * per item, in order (`SignBatchResult`). Throws a `ChainkeysError` when the batch as a
     * whole is refused (no item or over 1,000, an item without a kind of this family, a body
     * over the route's 1 MiB cap). The `data` is the service's answer as the endpoint gives
     * it: unlike the adapters, this method does not check signatures; check them as the
     * adapter of that kind does, or sign through the adapters.
     */
    async signBatch(family, items) {
        const path = this.accountPath(family, "/sign-batch");
        const { envelope } = await this.call("POST", path, { items });
        const results = envelope.data?.results;
        if (!Array.isArray(results) || results.length !== items.length) {
            throw new ChainkeysError("chainkeys: the batch answer does not hold one result per item", "invalid_response", 200, { body: envelope });
        }
        return results.map((r) => {
            if (r?.status === 200)
                return { status: "fulfilled", value: r.data };
            if (r?.status === 202) {
                const approval = r.data;
                return { status: "rejected", reason: new ApprovalPending("approval required: nothing is signed yet", approval, (id) => this.approval(id), (data) => data) };
            }
            const status = typeof r?.status === "number" ? r.status : 0;
            return { status: "rejected", reason: new ChainkeysError(typeof r?.message === "string" ? r.message : `HTTP ${status}`, typeof r?.code === "string" ? r.code : httpCode(status), status, { body: r }) };
        });
    }
    /** `GET /approvals/{id}`. */
    async approval(id) {
        return (await this.get(`/approvals/${encodeURIComponent(id)}`));
    }
    /**
     * `POST /approvals/{id}/approve` (an approve token), on the digest you looked at; on a
     * passkey rule with its `proof` (the token alone is refused: `passkey_required`).
     */
    async approve(id, digest, proof) {
        const body = { digest, ...(proof ?? {}) };
        return (await this.call("POST", `/approvals/${encodeURIComponent(id)}/approve`, body)).envelope.data;
    }
    /** `POST /approvals/{id}/reject`: one rejection ends the request. */
    async reject(id, reason, proof) {
        const body = { ...(reason === undefined ? {} : { reason }), ...(proof ?? {}) };
        return (await this.call("POST", `/approvals/${encodeURIComponent(id)}/reject`, body)).envelope.data;
    }
    /** `GET /approvals/{id}/challenge`: WebAuthn request options for a signed vote. */
    async challenge(id, decision) {
        return await this.get(`/approvals/${encodeURIComponent(id)}/challenge?decision=${decision}`);
    }
}
function httpCode(status) {
    return { 400: "bad_request", 401: "unauthorized", 403: "forbidden", 404: "not_found", 409: "conflict",
        429: "rate_limited", 500: "internal_error", 503: "unavailable" }[status] ?? `http_${status}`;
}
// ---- encodings without Buffer (browsers too) -------------------------------------------
export function toBase64(bytes) {
    let s = "";
    for (let i = 0; i < bytes.length; i += 0x8000) {
        s += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
    }
    return btoa(s);
}
export function fromBase64(text) {
    const s = atob(text);
    const out = new Uint8Array(s.length);
    for (let i = 0; i < s.length; i++)
        out[i] = s.charCodeAt(i);
    return out;
}
export function toHex(bytes) {
    let s = "";
    for (const b of bytes)
        s += b.toString(16).padStart(2, "0");
    return s;
}
export function utf8(text) {
    return new TextEncoder().encode(text);
}
export function bytesEqual(a, b) {
    if (a === undefined || b === undefined)
        return a === b;
    if (a.length !== b.length)
        return false;
    for (let i = 0; i < a.length; i++)
        if (a[i] !== b[i])
            return false;
    return true;
}
// ---- answers are checked, not trusted ---------------------------------------------------
/**
 * The error every adapter throws when the service's answer does not check out
 * (another transaction, another key, a signature that does not verify):
 * code `answer_mismatch`, status 0 (the HTTP exchange itself succeeded).
 */
export function answerMismatch(message, body, cause) {
    return new ChainkeysError(`chainkeys: the service's answer does not check out: ${message}`, "answer_mismatch", 0, { body, cause });
}
/**
 * `import(name)` of a peer the checks need, or a `ChainkeysError`
 * (`missing_peer`) saying which package to install.
 */
export async function peer(load, name, why) {
    try {
        return await load();
    }
    catch (cause) {
        throw new ChainkeysError(`chainkeys: ${why} needs the package ${name}; install it`, "missing_peer", 0, { cause });
    }
}
