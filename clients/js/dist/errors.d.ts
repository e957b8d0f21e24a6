/**
 * Errors every adapter throws: `ChainkeysError` carries the service's envelope
 * (`code`, HTTP `status`, `message`); `ApprovalPending` is the 202 answer of a
 * sign request that waits for people to approve it.
 */
/** An error answer of the chainkeys service (or of the client talking to it). */
export declare class ChainkeysError extends Error {
    /** The envelope's machine code (`unauthorized`, `not_found`, `wrong_chain`, …). */
    readonly code: string;
    /** The HTTP status; 0 when no HTTP answer says otherwise (network, timeout, client-side checks). */
    readonly status: number;
    /** The parsed body of the answer, when there was one. */
    readonly body?: unknown;
    constructor(message: string, code: string, status: number, options?: {
        body?: unknown;
        cause?: unknown;
    });
}
/** The states of an approval request (DESIGN "Approvals"). */
export type ApprovalState = "pending" | "approved" | "signed" | "rejected" | "expired" | "cancelled" | "failed";
/** The approval request object: the 202 answer's `data`, and `GET /approvals/{id}`'s. */
export interface Approval {
    id: string;
    state: ApprovalState | string;
    family?: string;
    account?: string;
    kind?: string;
    summary?: unknown;
    digest?: string;
    required?: number;
    votes?: unknown[];
    expires_at?: string;
    /** The sign endpoint's own `data`, once `state` is `signed`. */
    result?: unknown;
    reason?: string;
    [key: string]: unknown;
}
export interface WaitOptions {
    /** Time between two polls of `GET /approvals/{id}` (default 2000 ms). */
    intervalMs?: number;
    /** Give up after this long (default: wait until the approval's own expiry ends it). */
    timeoutMs?: number;
    /** Stop waiting when aborted. */
    signal?: AbortSignal;
}
/** Reads one approval request (`GET /approvals/{id}`); supplied by the client. */
export type ApprovalPoller = (id: string) => Promise<Approval>;
/**
 * A sign request the service accepted but that needs human approval first
 * (HTTP 202): nothing is signed yet. `waitForApproval()` polls until it is
 * signed and resolves to what the interrupted call would have returned.
 */
export declare class ApprovalPending<T = unknown> extends ChainkeysError {
    #private;
    /** The approval request's id. */
    readonly id: string;
    /** The approval request as the 202 answer gave it. */
    readonly approval: Approval;
    constructor(message: string, approval: Approval, poll: ApprovalPoller, finish: (result: unknown) => T | Promise<T>);
    /**
     * Poll `GET /approvals/{id}` until the request is signed (resolves to the
     * adapter's result, built from the approval's `result`) or ends otherwise
     * (rejects with a `ChainkeysError` whose code is `approval_<state>`).
     */
    waitForApproval(options?: WaitOptions): Promise<T>;
}
