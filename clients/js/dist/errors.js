/**
 * Errors every adapter throws: `ChainkeysError` carries the service's envelope
 * (`code`, HTTP `status`, `message`); `ApprovalPending` is the 202 answer of a
 * sign request that waits for people to approve it.
 */
/** An error answer of the chainkeys service (or of the client talking to it). */
export class ChainkeysError extends Error {
    /** The envelope's machine code (`unauthorized`, `not_found`, `wrong_chain`, …). */
    code;
    /** The HTTP status; 0 when no HTTP answer says otherwise (network, timeout, client-side checks). */
    status;
    /** The parsed body of the answer, when there was one. */
    body;
    constructor(message, code, status, options) {
        super(message, options?.cause !== undefined ? { cause: options.cause } : undefined);
        this.name = "ChainkeysError";
        this.code = code;
        this.status = status;
        if (options?.body !== undefined)
            this.body = options.body;
    }
}
const TERMINAL = new Set(["rejected", "expired", "cancelled", "failed"]);
/**
 * A sign request the service accepted but that needs human approval first
 * (HTTP 202): nothing is signed yet. `waitForApproval()` polls until it is
 * signed and resolves to what the interrupted call would have returned.
 */
export class ApprovalPending extends ChainkeysError {
    /** The approval request's id. */
    id;
    /** The approval request as the 202 answer gave it. */
    approval;
    #poll;
    #finish;
    constructor(message, approval, poll, finish) {
        super(message || "the request waits for approval", "approval_pending", 202, { body: approval });
        this.name = "ApprovalPending";
        this.id = approval.id;
        this.approval = approval;
        this.#poll = poll;
        this.#finish = finish;
    }
    /**
     * Poll `GET /approvals/{id}` until the request is signed (resolves to the
     * adapter's result, built from the approval's `result`) or ends otherwise
     * (rejects with a `ChainkeysError` whose code is `approval_<state>`).
     */
    async waitForApproval(options = {}) {
        const interval = options.intervalMs ?? 2000;
        const deadline = options.timeoutMs === undefined ? Infinity : Date.now() + options.timeoutMs;
        for (;;) {
            options.signal?.throwIfAborted();
            const approval = await this.#poll(this.id);
            if (approval.state === "signed")
                return this.#finish(approval.result);
            if (TERMINAL.has(approval.state)) {
                const why = typeof approval.reason === "string" && approval.reason ? `: ${approval.reason}` : "";
                throw new ChainkeysError(`approval request ${this.id} ended ${approval.state}${why}`, `approval_${approval.state}`, 0, { body: approval });
            }
            const left = deadline - Date.now();
            if (left <= 0) {
                throw new ChainkeysError(`approval request ${this.id} is still ${approval.state} after ${options.timeoutMs} ms`, "approval_timeout", 0, { body: approval });
            }
            await sleep(Math.min(interval, left), options.signal);
        }
    }
}
function sleep(ms, signal) {
    return new Promise((resolve, reject) => {
        const timer = setTimeout(done, ms);
        function done() {
            signal?.removeEventListener("abort", abort);
            resolve();
        }
        function abort() {
            clearTimeout(timer);
            reject(signal?.reason);
        }
        signal?.addEventListener("abort", abort, { once: true });
    });
}
