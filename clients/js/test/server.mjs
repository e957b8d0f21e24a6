// Starts a real chainkeys server in a temp data directory for a test file.
import { spawn, execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join, dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
export const repoRoot = resolve(here, "..", "..", "..");
export const CHAINKEYS_BIN = process.env.CHAINKEYS_BIN || join(repoRoot, ".venv", "bin", "chainkeys");
const READY_BOUND_MS = 180_000;
const MASTER_KEY = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";

import { KEYS } from "./keys.mjs";

/** A test key by its id in the shared vectors (private_key_hex, eos.{public_key_legacy,public_key_k1,private_key_k1}). */
export function vectorKey(id) {
  const k = KEYS[id];
  if (!k) throw new Error(`no test key ${id}`);
  return k;
}

function freePort() {
  return new Promise((ok, fail) => {
    const s = createServer();
    s.once("error", fail);
    s.listen(0, "127.0.0.1", () => { const { port } = s.address(); s.close(() => ok(port)); });
  });
}

export async function startChainkeys() {
  const dir = mkdtempSync(join(tmpdir(), "chainkeys-js-"));
  // The caller's own CHAINKEYS_* (e.g. CHAINKEYS_BIN) are not server settings; the
  // worker count is (scripts/test runs the suites' servers with one).
  const inherited = Object.fromEntries(Object.entries(process.env).filter(
    ([k]) => !k.startsWith("CHAINKEYS_") || k === "CHAINKEYS_WORKERS"));
  const env = { ...inherited, CHAINKEYS_MASTER_KEY: MASTER_KEY, CHAINKEYS_DATA_DIR: dir };
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const proc = spawn(CHAINKEYS_BIN, ["serve", "--host", "127.0.0.1", "--port", String(port), "--data-dir", dir],
    { env, stdio: ["ignore", "pipe", "pipe"] });
  let log = "";
  proc.stdout.on("data", (c) => { log += c; });
  proc.stderr.on("data", (c) => { log += c; });
  const exited = new Promise((r) => proc.once("exit", (code) => r(code)));
  // Wait for the state, not for a time: ready, or the process ended. The bound is only
  // for a server that hangs (a busy machine starts one in seconds, not minutes).
  const deadline = Date.now() + READY_BOUND_MS;
  try {
    for (;;) {
      if (proc.exitCode !== null) throw new Error(`chainkeys exited (${proc.exitCode}):\n${log}`);
      try {
        const r = await fetch(`${url}/readyz`);
        if (r.status === 200) break;
      } catch { /* not listening yet */ }
      if (Date.now() > deadline) throw new Error(`chainkeys not ready in ${READY_BOUND_MS / 1000} s:\n${log}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  } catch (err) {
    if (proc.exitCode === null) { proc.kill("SIGKILL"); await exited; }
    rmSync(dir, { recursive: true, force: true });  // nothing left behind, a failed start included
    throw err;
  }
  const token = (scope) => execFileSync(CHAINKEYS_BIN,
    ["token", "create", "--tenant", "t1", "--label", "js", "--scope", scope, "--data-dir", dir],
    { env, encoding: "utf8" }).trim().split("\n").pop().trim();
  const main = token("read,create,sign");

  async function api(method, path, body, auth = main) {
    const r = await fetch(url + path, {
      method, headers: { Authorization: `Bearer ${auth}`, "Content-Type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const json = await r.json();
    if (!json.success) throw new Error(`${method} ${path}: HTTP ${r.status} ${JSON.stringify(json)}`);
    return json;
  }

  return {
    url, token: main, dir, api, makeToken: token,
    log: () => log,
    async stop() {
      if (proc.exitCode === null) { proc.kill("SIGTERM"); await Promise.race([exited, new Promise((r) => setTimeout(r, 30_000))]); }
      if (proc.exitCode === null) { proc.kill("SIGKILL"); await exited; }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
