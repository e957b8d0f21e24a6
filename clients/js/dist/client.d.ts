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
