/** The HTTP part every adapter shares: the envelope, auth, errors, approvals. */
import { ApprovalPending, ChainkeysError, type Approval, type WaitOptions } from "./errors.js";

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
export type VoteProof =
  | { assertion: Record<string, unknown> }
  | { signature: { credential: string; value: string } };

/** The 32 bytes a vote signs: the `challenge` of `challenge()`'s options, decoded. */
export function challengeBytes(options: { challenge: string }): Uint8Array {
  const s = options.challenge.replace(/-/g, "+").replace(/_/g, "/");
  return fromBase64(s + "===".slice((s.length + 3) % 4));
}

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
export class ChainkeysClient {
  readonly options: ChainkeysOptions;
  readonly #base: string;
  readonly #fetch: typeof fetch;

  constructor(options: ChainkeysOptions) {
    for (const key of ["url", "token", "account"] as const) {
      if (typeof options?.[key] !== "string" || options[key] === "") {
        throw new TypeError(`chainkeys: options.${key} must be a non-empty string`);
      }
    }
    const f = options.fetch ?? globalThis.fetch;
    if (typeof f !== "function") throw new TypeError("chainkeys: no fetch available; pass options.fetch");
    this.options = options;
    this.#base = options.url.replace(/\/+$/, "");
    this.#fetch = options.fetch ? options.fetch : (input, init) => globalThis.fetch(input, init);
  }

  /** `/{family}/{account}` + suffix, each segment URL-encoded. */
  accountPath(family: string, suffix = ""): string {
    return `/${family}/${encodeURIComponent(this.options.account)}${suffix}`;
  }

  /** GET or POST one endpoint and return the envelope's `data`. */
  async call(method: "GET" | "POST", path: string, body?: unknown): Promise<{ status: number; envelope: Envelope }> {
    const headers: Record<string, string> = {
      Authorization: `Bearer ${this.options.token}`,
      Accept: "application/json",
    };
    if (body !== undefined) headers["Content-Type"] = "application/json";
    let response: Response;
    try {
      response = await this.#fetch(this.#base + path, {
        method, headers, body: body === undefined ? undefined : JSON.stringify(body),
      });
    } catch (cause) {
      throw new ChainkeysError(`chainkeys: ${method} ${path} failed: ${String(cause)}`, "network_error", 0, { cause });
    }
    const text = await response.text();
    let envelope: Envelope;
    try {
      envelope = JSON.parse(text) as Envelope;
    } catch {
      throw new ChainkeysError(
        `chainkeys: ${method} ${path} answered HTTP ${response.status} with a body that is not JSON`,
        response.ok ? "invalid_response" : httpCode(response.status), response.status, { body: text },
      );
    }
    if (!response.ok || envelope === null || typeof envelope !== "object" || envelope.success !== true) {
      const e = (envelope ?? {}) as Envelope;
      throw new ChainkeysError(
        typeof e.message === "string" ? e.message : `HTTP ${response.status}`,
        typeof e.code === "string" ? e.code : response.ok ? "invalid_response" : httpCode(response.status),
        response.status, { body: envelope },
      );
    }
    return { status: response.status, envelope };
  }

  /** GET: the envelope's `data`. */
  async get(path: string): Promise<any> {
    return (await this.call("GET", path)).envelope.data;
  }

  /**
   * POST a sign request; `finish` turns the endpoint's `data` into the
   * adapter's result, now or, after a 202, once the request is approved.
   */
  async sign<T>(path: string, body: unknown, finish: (data: any) => T | Promise<T>): Promise<T> {
    const { status, envelope } = await this.call("POST", path, body);
    if (status === 202) {
      const approval = envelope.data as Approval;
      if (!approval || typeof approval.id !== "string") {
        throw new ChainkeysError("chainkeys: a 202 answer without an approval id", "invalid_response", 202, { body: envelope });
      }
      const pending = new ApprovalPending<T>(
        envelope.message ?? "", approval, (id) => this.approval(id), finish,
      );
      const wait = this.options.waitForApproval;
      if (wait) return pending.waitForApproval(wait === true ? {} : wait);
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
  async signBatch(family: string, items: SignBatchItem[]): Promise<SignBatchResult[]> {
    const path = this.accountPath(family, "/sign-batch");
    const { envelope } = await this.call("POST", path, { items });
    const results = (envelope.data as { results?: unknown } | undefined)?.results;
    if (!Array.isArray(results) || results.length !== items.length) {
      throw new ChainkeysError("chainkeys: the batch answer does not hold one result per item",
        "invalid_response", 200, { body: envelope });
    }
    return results.map((r: { status?: unknown; data?: unknown; code?: unknown; message?: unknown }) => {
      if (r?.status === 200) return { status: "fulfilled", value: r.data };
      if (r?.status === 202) {
        const approval = r.data as Approval;
        return { status: "rejected", reason: new ApprovalPending(
          "approval required: nothing is signed yet", approval, (id) => this.approval(id), (data: unknown) => data) };
      }
      const status = typeof r?.status === "number" ? r.status : 0;
      return { status: "rejected", reason: new ChainkeysError(
        typeof r?.message === "string" ? r.message : `HTTP ${status}`,
        typeof r?.code === "string" ? r.code : httpCode(status), status, { body: r }) };
    });
  }

  /** `GET /approvals/{id}`. */
  async approval(id: string): Promise<Approval> {
    return (await this.get(`/approvals/${encodeURIComponent(id)}`)) as Approval;
  }

  /**
   * `POST /approvals/{id}/approve` (an approve token), on the digest you looked at; on a
   * passkey rule with its `proof` (the token alone is refused: `passkey_required`).
   */
  async approve(id: string, digest: string, proof?: VoteProof): Promise<Approval> {
    const body = { digest, ...(proof ?? {}) };
    return (await this.call("POST", `/approvals/${encodeURIComponent(id)}/approve`, body)).envelope.data as Approval;
  }

  /** `POST /approvals/{id}/reject`: one rejection ends the request. */
  async reject(id: string, reason?: string, proof?: VoteProof): Promise<Approval> {
    const body = { ...(reason === undefined ? {} : { reason }), ...(proof ?? {}) };
    return (await this.call("POST", `/approvals/${encodeURIComponent(id)}/reject`, body)).envelope.data as Approval;
  }

  /** `GET /approvals/{id}/challenge`: WebAuthn request options for a signed vote. */
  async challenge(id: string, decision: "approve" | "reject"): Promise<{ challenge: string; [key: string]: unknown }> {
    return await this.get(`/approvals/${encodeURIComponent(id)}/challenge?decision=${decision}`);
  }
}

function httpCode(status: number): string {
  return ({ 400: "bad_request", 401: "unauthorized", 403: "forbidden", 404: "not_found", 409: "conflict",
    429: "rate_limited", 500: "internal_error", 503: "unavailable" } as Record<number, string>)[status] ?? `http_${status}`;
}

// ---- encodings without Buffer (browsers too) -------------------------------------------

export function toBase64(bytes: Uint8Array): string {
  let s = "";
  for (let i = 0; i < bytes.length; i += 0x8000) {
    s += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  }
  return btoa(s);
}

export function fromBase64(text: string): Uint8Array {
  const s = atob(text);
  const out = new Uint8Array(s.length);
  for (let i = 0; i < s.length; i++) out[i] = s.charCodeAt(i);
  return out;
}

export function toHex(bytes: Uint8Array): string {
  let s = "";
  for (const b of bytes) s += b.toString(16).padStart(2, "0");
  return s;
}

export function utf8(text: string): Uint8Array {
  return new TextEncoder().encode(text);
}

export function bytesEqual(a: Uint8Array | undefined, b: Uint8Array | undefined): boolean {
  if (a === undefined || b === undefined) return a === b;
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

// ---- answers are checked, not trusted ---------------------------------------------------

/**
 * The error every adapter throws when the service's answer does not check out
 * (another transaction, another key, a signature that does not verify):
 * code `answer_mismatch`, status 0 (the HTTP exchange itself succeeded).
 */
export function answerMismatch(message: string, body?: unknown, cause?: unknown): ChainkeysError {
  return new ChainkeysError(`chainkeys: the service's answer does not check out: ${message}`, "answer_mismatch", 0,
    { body, cause });
}

/**
 * `import(name)` of a peer the checks need, or a `ChainkeysError`
 * (`missing_peer`) saying which package to install.
 */
export async function peer<T>(load: () => Promise<T>, name: string, why: string): Promise<T> {
  try {
    return await load();
  } catch (cause) {
    throw new ChainkeysError(`chainkeys: ${why} needs the package ${name}; install it`, "missing_peer", 0, { cause });
  }
}
