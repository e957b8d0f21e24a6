// A local HTTP proxy between an adapter and the real chainkeys server that can
// alter the server's answers (a compromised server, or something in between).
import { createServer } from "node:http";
import { ChainkeysError } from "../dist/index.js";

/** `assert.rejects` predicate: the adapter refused the answer (`answer_mismatch`). */
export function mismatch(e) {
  if (process.env.CHAINKEYS_SHOW_MISMATCH) console.log(`  answer_mismatch: ${e?.message}`);
  return e instanceof ChainkeysError && e.code === "answer_mismatch" && e.status === 0
    && /does not check out/.test(e.message);
}

/**
 * Starts a proxy to `target`. `proxy.alter` (settable per test) is called with
 * `{ method, path, request }` (the parsed request body) and the parsed answer;
 * it returns the answer to give instead (or changes it in place and returns
 * nothing). `proxy.altered` counts the answers it was asked about.
 */
export async function startProxy(target) {
  const proxy = { url: "", alter: null, altered: 0, close: null };
  const server = createServer((req, res) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", async () => {
      try {
        const raw = Buffer.concat(chunks);
        const headers = { Accept: "application/json" };
        if (req.headers.authorization) headers.Authorization = req.headers.authorization;
        if (req.headers["content-type"]) headers["Content-Type"] = req.headers["content-type"];
        const upstream = await fetch(target + req.url, {
          method: req.method, headers, body: raw.length ? raw : undefined,
        });
        let text = await upstream.text();
        if (proxy.alter) {
          const answer = JSON.parse(text);
          const request = raw.length ? JSON.parse(raw.toString("utf8")) : undefined;
          proxy.altered++;
          const replaced = await proxy.alter({ method: req.method, path: req.url, request }, answer);
          text = JSON.stringify(replaced ?? answer);
        }
        res.writeHead(upstream.status, { "Content-Type": "application/json" });
        res.end(text);
      } catch (err) {
        res.writeHead(502, { "Content-Type": "application/json" });
        res.end(JSON.stringify({ success: false, code: "proxy_error", message: String(err?.stack ?? err) }));
      }
    });
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  proxy.url = `http://127.0.0.1:${server.address().port}`;
  proxy.close = () => new Promise((r) => { server.closeAllConnections?.(); server.close(() => r()); });
  return proxy;
}

/**
 * `alter` for the answers of one sign endpoint (the path ends with `suffix`):
 * `change(data, request)` changes the answer's `data` in place or returns the
 * data to give instead. Other answers pass unchanged.
 */
export function onSign(suffix, change) {
  return async (req, answer) => {
    if (req.method !== "POST" || !req.path.endsWith(suffix) || !answer.success) return answer;
    const data = await change(answer.data, req.request);
    if (data !== undefined) answer.data = data;
    return answer;
  };
}
