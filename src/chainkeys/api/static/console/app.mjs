// The console: sign in with a token (kept in this tab's sessionStorage only), then
// pages under #/…, each drawn from the same JSON API every client uses. A page the
// token's scopes do not allow is not offered (the service would refuse it anyway).
import { h, heading } from "./dom.mjs";
import { overview } from "./pages/overview.mjs";
import { accounts, account } from "./pages/accounts.mjs";
import { wallets, wallet } from "./pages/wallets.mjs";
import { approvals } from "./pages/approvals.mjs";
import { audit } from "./pages/audit.mjs";
import { policy } from "./pages/policy.mjs";
import { token } from "./pages/token.mjs";
import { passkeys } from "./pages/passkeys.mjs";
import { changes, change } from "./pages/changes.mjs";

const KEY = "chainkeys.token";
const $ = (id) => document.getElementById(id);
const can = (me, scope) => me.scopes.includes(scope);

// id → [title, who may see it (null: not in the menu), draw]
const PAGES = {
  overview: ["Overview", (me) => can(me, "read"), overview],
  accounts: ["Accounts", (me) => can(me, "read"), accounts],
  account: ["Account", null, account],
  wallets: ["Wallets", (me) => can(me, "read"), wallets],
  wallet: ["Wallet", null, wallet],
  approvals: ["Approvals", (me) => can(me, "approve") || can(me, "sign"), approvals],
  changes: ["Changes", (me) => can(me, "admin"), changes],
  change: ["Change", null, change],
  passkeys: ["Passkeys", (me) => can(me, "approve") || can(me, "admin"), passkeys],
  audit: ["Audit", (me) => can(me, "read"), audit],
  policy: ["Policy", (me) => can(me, "read"), policy],
  token: ["Token", () => true, token],
};

export class ApiError extends Error {
  constructor(message, status, code) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

/** One call to the API with this tab's token; the envelope's data, or an ApiError. */
export async function api(method, path, body, { raw = false } = {}) {
  const init = {
    method, cache: "no-store", credentials: "omit", referrerPolicy: "no-referrer",
    headers: { Authorization: sessionStorage.getItem(KEY) || "" },
  };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(path, init);
  } catch {
    throw new ApiError("the service cannot be reached", 0, "network_error");
  }
  if (raw && response.ok) return response;
  let json;
  try {
    json = await response.json();
  } catch {
    throw new ApiError(`HTTP ${response.status}`, response.status, "not_json");
  }
  if (!json.success) throw new ApiError(json.message || `HTTP ${response.status}`, response.status, json.code);
  return json.data;
}

export function say(text, error = false) {
  $("message").textContent = text;
  $("message").className = error ? "error" : "";
}

/** The current route: #/page/arg/arg?query. */
function route() {
  const hash = location.hash.replace(/^#\/?/, "");
  const [path, query = ""] = hash.split("?", 2);
  const [page, ...args] = path.split("/").map((p) => decodeURIComponent(p));
  return { page: page || home(), args, params: new URLSearchParams(query) };
}

/** The page a bare /ui opens: the overview, or the first this token may see (an
 * admin token without read opens on Changes). */
function home() {
  if (location.pathname === "/ui/approvals") return "approvals";
  const visible = Object.entries(PAGES).filter(([, [, may]]) => may && me && may(me));
  return visible.some(([id]) => id === "overview") || !visible.length ? "overview" : visible[0][0];
}

export function go(hash) {
  if (location.hash === hash) show();
  else location.hash = hash;
}

let me = null;
let drawing = 0;

async function show() {
  if (!me) return;
  const { page, args, params } = route();
  const entry = PAGES[page];
  const allowed = entry && (entry[1] === null || entry[1](me));
  const target = $("page");
  for (const a of $("nav").querySelectorAll("a")) {
    a.toggleAttribute("aria-current", a.dataset.page === page || (a.dataset.page + "s") === page);
    if (a.hasAttribute("aria-current")) a.setAttribute("aria-current", "page");
  }
  if (!allowed) {
    target.replaceChildren(heading("Not here"), h("p", {}, "This page does not exist, or this token may not see it."));
    return;
  }
  const mine = ++drawing;
  const started = performance.now();
  document.title = `${entry[0]} · chainkeys console`;
  target.setAttribute("aria-busy", "true");
  try {
    const node = await entry[2]({ api, args, params, me, go, say });
    if (mine !== drawing) return; // another page was asked for meanwhile
    target.replaceChildren(node); // the last message stays: it may say what led here
  } catch (e) {
    if (mine !== drawing) return;
    if (e.status === 401) return signOut("That token is no longer accepted: sign in again.");
    target.replaceChildren(heading(entry[0]), h("p", { class: "error" }, e.message));
  } finally {
    target.removeAttribute("aria-busy");
  }
  // the page's first paint, for the tests' report (the browser's own clock)
  requestAnimationFrame(() => {
    document.body.dataset.painted = String(Math.round(performance.now() - started));
    document.body.dataset.draws = String(Number(document.body.dataset.draws || 0) + 1);
  });
  const title = target.querySelector("h1");
  if (title && document.activeElement === document.body) title.focus({ preventScroll: true });
}

function menu() {
  const nav = $("nav");
  nav.replaceChildren(...Object.entries(PAGES)
    .filter(([, [, visible]]) => visible && visible(me))
    .map(([id, [title]]) => h("a", { href: `#/${id}`, dataset: { page: id } }, title)));
}

async function signIn() {
  if (!sessionStorage.getItem(KEY)) return signedIn(false);
  try {
    me = await api("GET", "/tokens/self");
  } catch (e) {
    if (e.status === 401) sessionStorage.removeItem(KEY);
    signedIn(false);
    say(`That token was not accepted: ${e.message}`, true);
    return;
  }
  $("who").textContent = "";
  $("who").append(`${me.label || "(no label)"} · tenant ${me.tenant}`);
  menu();
  signedIn(true);
  await show();
}

function signedIn(on) {
  $("signin").hidden = on;
  $("page").hidden = !on;
  $("nav").hidden = !on;
  $("forget").hidden = !on;
  if (!on) {
    me = null;
    $("who").textContent = "";
    $("page").replaceChildren();
    $("token").focus();
  }
}

function signOut(why) {
  sessionStorage.removeItem(KEY);
  signedIn(false);
  say(why);
}

$("signin-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const value = $("token").value.trim();
  $("token").value = "";
  if (!value) return;
  sessionStorage.setItem(KEY, value.startsWith("Bearer ") ? value.slice(7) : value);
  signIn();
});
$("forget").addEventListener("click", () => signOut("Signed out: the token is forgotten in this tab."));
window.addEventListener("hashchange", show);
signIn();
