/**
 * Errors every adapter throws: `ChainkeysError` carries the service's envelope
 * (`code`, HTTP `status`, `message`); `ApprovalPending` is the 202 answer of a
 * sign request that waits for people to approve it.
 */

/** An error answer of the chainkeys service (or of the client talking to it). */
export class ChainkeysError extends Error {
  /** The envelope's machine code (`unauthorized`, `not_found`, `wrong_chain`, …). */
  readonly code: string;
  /** The HTTP status; 0 when no HTTP answer says otherwise (network, timeout, client-side checks). */
  readonly status: number;
  /** The parsed body of the answer, when there was one. */
  readonly body?: unknown;

  constructor(message: string, code: string, status: number, options?: { body?: unknown; cause?: unknown }) {
    super(message, options?.cause !== undefined ? { cause: options.cause } : undefined);
    this.name = "ChainkeysError";
    this.code = code;
    this.status = status;
    if (options?.body !== undefined) this.body = options.body;
  }
}

/** The states of an approval request (DESIGN "Approvals"). */
export type ApprovalState =
  | "pending" | "approved" | "signed" | "rejected" | "expired" | "cancelled" | "failed";

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

const TERMINAL = new Set(["rejected", "expired", "cancelled", "failed"]);

/**
 * A sign request the service accepted but that needs human approval first
 * (HTTP 202): nothing is signed yet. `waitForApproval()` polls until it is
 * signed and resolves to what the interrupted call would have returned.
 */
export class ApprovalPending<T = unknown> extends ChainkeysError {
  /** The approval request's id. */
  readonly id: string;
  /** The approval request as the 202 answer gave it. */
  readonly approval: Approval;
  readonly #poll: ApprovalPoller;
  readonly #finish: (result: unknown) => T | Promise<T>;

  constructor(
    message: string,
    approval: Approval,
    poll: ApprovalPoller,
    finish: (result: unknown) => T | Promise<T>,
  ) {
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
  async waitForApproval(options: WaitOptions = {}): Promise<T> {
    const interval = options.intervalMs ?? 2000;
    const deadline = options.timeoutMs === undefined ? Infinity : Date.now() + options.timeoutMs;
    for (;;) {
      options.signal?.throwIfAborted();
      const approval = await this.#poll(this.id);
      if (approval.state === "signed") return this.#finish(approval.result);
      if (TERMINAL.has(approval.state)) {
        const why = typeof approval.reason === "string" && approval.reason ? `: ${approval.reason}` : "";
        throw new ChainkeysError(
          `approval request ${this.id} ended ${approval.state}${why}`,
          `approval_${approval.state}`, 0, { body: approval },
        );
      }
      const left = deadline - Date.now();
      if (left <= 0) {
        throw new ChainkeysError(
          `approval request ${this.id} is still ${approval.state} after ${options.timeoutMs} ms`,
          "approval_timeout", 0, { body: approval },
        );
      }
      await sleep(Math.min(interval, left), options.signal);
    }
  }
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
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
