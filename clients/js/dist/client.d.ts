/** The HTTP part every adapter shares: the envelope, auth, errors, approvals. */
import { ChainkeysError, type Approval, type WaitOptions } from "./errors.js";
/** The one options object every adapter is built from. */
export interface ChainkeysOptions {
    /** The service's base URL, e.g. `https://chainkeys.internal:8000`. */
    url: string;
    /** A bearer token (`chainkeys token create`), with `read` and `sign` scopes. */
    token: string;
    /** The chainkeys account name: the address (Cosmos, Dogecoin, Litecoin) or the EOS account name. */
    account: string;
    /** A `fetch` to use instead of the global one. */
    fetch?: typeof fetch;
    /**
     * When a sign request needs approval (HTTP 202), wait for it here instead
     * of throwing `ApprovalPending` (`true`, or the polling options).
     */
    waitForApproval?: boolean | WaitOptions;
}
interface Envelope {
    success?: boolean;
    message?: string;
    code?: string;
    data?: unknown;
}
/**
 * What signs a vote on a rule with `"passkey": true` (docs/approvals.md "Passkeys"): a
 * WebAuthn assertion (the authentication response, `PublicKeyCredential.toJSON()`) for
 * `challenge()`'s options, or an enrolled script key's signature (`chainkeys approver
 * add-key`) of the challenge's 32 bytes, base64url (Ed25519, or ECDSA P-256 DER or r||s).
 */
export type VoteProof = {
    assertion: Record<string, unknown>;
} | {
    signature: {
        credential: string;
        value: string;
    };
};
/** The 32 bytes a vote signs: the `challenge` of `challenge()`'s options, decoded. */
export declare function challengeBytes(options: {
    challenge: string;
}): Uint8Array;
/**
 * One item of `signBatch`: the body of one of the account's sign endpoints plus `kind`,
 * that endpoint's last path segment (`sign-message`, `sign-psbt`, `sign-direct`, …).
 */
export interface SignBatchItem {
    kind: string;
    [field: string]: unknown;
}
/**
 * One item's outcome in `signBatch`, shaped as `Promise.allSettled` gives it for the same
 * calls made one at a time: fulfilled with the endpoint's `data` (signed), or rejected
 * with what the call would throw: an `ApprovalPending` (HTTP 202: nothing signed yet;
 * `waitForApproval()` resolves to the endpoint's `data` once people approve it) or a
 * `ChainkeysError` (the refusal's `code`, `status` and `message`).
 */
export type SignBatchResult = PromiseSettledResult<any>;
/** A small client for the endpoints the adapters call. */
export declare class ChainkeysClient {
    #private;
    readonly options: ChainkeysOptions;
    constructor(options: ChainkeysOptions);
    /** `/{family}/{account}` + suffix, each segment URL-encoded. */
    accountPath(family: string, suffix?: string): string;
    /** GET or POST one endpoint and return the envelope's `data`. */
    call(method: "GET" | "POST", path: string, body?: unknown): Promise<{
        status: number;
        envelope: Envelope;
    }>;
    /** GET: the envelope's `data`. */
    get(path: string): Promise<any>;
    /**
     * POST a sign request; `finish` turns the endpoint's `data` into the
     * adapter's result, now or, after a 202, once the request is approved.
     */
    sign<T>(path: string, body: unknown, finish: (data: any) => T | Promise<T>): Promise<T>;
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
    signBatch(family: string, items: SignBatchItem[]): Promise<SignBatchResult[]>;
    /** `GET /approvals/{id}`. */
    approval(id: string): Promise<Approval>;
    /**
     * `POST /approvals/{id}/approve` (an approve token), on the digest you looked at; on a
     * passkey rule with its `proof` (the token alone is refused: `passkey_required`).
     */
    approve(id: string, digest: string, proof?: VoteProof): Promise<Approval>;
    /** `POST /approvals/{id}/reject`: one rejection ends the request. */
    reject(id: string, reason?: string, proof?: VoteProof): Promise<Approval>;
    /** `GET /approvals/{id}/challenge`: WebAuthn request options for a signed vote. */
    challenge(id: string, decision: "approve" | "reject"): Promise<{
        challenge: string;
        [key: string]: unknown;
    }>;
}
export declare function toBase64(bytes: Uint8Array): string;
export declare function fromBase64(text: string): Uint8Array;
export declare function toHex(bytes: Uint8Array): string;
export declare function utf8(text: string): Uint8Array;
export declare function bytesEqual(a: Uint8Array | undefined, b: Uint8Array | undefined): boolean;
/**
 * The error every adapter throws when the service's answer does not check out
 * (another transaction, another key, a signature that does not verify):
 * code `answer_mismatch`, status 0 (the HTTP exchange itself succeeded).
 */
export declare function answerMismatch(message: string, body?: unknown, cause?: unknown): ChainkeysError;
/**
 * `import(name)` of a peer the checks need, or a `ChainkeysError`
 * (`missing_peer`) saying which package to install.
 */
export declare function peer<T>(load: () => Promise<T>, name: string, why: string): Promise<T>;
export {};
