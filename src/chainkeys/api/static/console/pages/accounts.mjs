// Accounts: per family, searched by the start of a name or address, a page at a time
// (the service's keyset pages: a tenant of a million accounts costs one page); an
// account's page with its deposit QR code and its recent signatures and refusals.
import { copyable, facts, h, heading, link, table, untrusted, when } from "../dom.mjs";
import { qrcode } from "../vendor/qrcode-generator.mjs";

const FAMILIES = ["cosmos", "dogecoin", "eos", "litecoin"];
const PAGE = 50;

export function familiesOf(me) {
  return me.families === undefined ? FAMILIES : FAMILIES.filter((f) => me.families.includes(f));
}

/** A list page's names and next cursor, whatever the family's answer shape (Moon's). */
function names(family, data) {
  if (family === "cosmos") return [data.data.keys.map((k) => k.address), data.data.next_cursor];
  return [data.keys, data.next_cursor];
}

export async function accounts({ api, params, me, go, say }) {
  const families = familiesOf(me);
  const family = families.includes(params.get("family")) ? params.get("family") : families[0];
  const prefix = params.get("prefix") || "";
  const cursor = params.get("cursor") || "";
  const query = new URLSearchParams({ limit: String(PAGE) });
  if (prefix) query.set("prefix", prefix);
  if (cursor) query.set("cursor", cursor);
  const [shown, next] = names(family, await api("GET", `/${family}?${query}`));

  const tabs = h("nav", { class: "tabs", "aria-label": "Families" },
    families.map((f) => {
      const a = link(f, ["accounts"], { family: f });
      if (f === family) a.setAttribute("aria-current", "page");
      return a;
    }));
  const search = h("form", { class: "bar", role: "search" },
    h("label", { for: "prefix" }, "Name or address starts with"),
    h("input", { id: "prefix", name: "prefix", value: prefix, spellcheck: "false", autocomplete: "off", maxlength: "100" }),
    h("button", { type: "submit" }, "Search"),
    prefix ? link("Clear", ["accounts"], { family }) : null);
  search.addEventListener("submit", (e) => {
    e.preventDefault();
    const value = search.querySelector("#prefix").value.trim();
    go(`#/accounts?${new URLSearchParams({ family, ...(value ? { prefix: value } : {}) })}`);
  });
  const rows = shown.map((name) => [link(untrusted(name), ["account", family, name])]);
  const list = rows.length
    ? table(`${family} accounts${prefix ? ` starting with “${prefix}”` : ""}`, ["Name (address)"], rows, { class: "list accounts" })
    : h("p", { class: "empty" }, prefix ? "No account starts with that." : "No account yet.");
  const pager = h("p", { class: "bar" },
    cursor ? link("First page", ["accounts"], { family, prefix }) : null,
    next ? link("Next page", ["accounts"], { family, prefix, cursor: next }) : null);
  let create = null;
  if (me.scopes.includes("create") && family !== "eos") {
    create = h("button", { type: "button" }, `Create a ${family} account`);
    create.addEventListener("click", async () => {
      create.disabled = true;
      try {
        const made = await api("POST", `/${family}`, {});
        const address = family === "cosmos" ? made.data.address : made.address;
        go(`#/account/${encodeURIComponent(family)}/${encodeURIComponent(address)}`);
        say(`Created ${address}`);
      } catch (e) {
        say(e.message, true);
        create.disabled = false;
      }
    });
  }
  return h("section", {}, heading("Accounts"), tabs, h("div", { class: "bar" }, search, create), list, pager);
}

/** The deposit QR code of `text`, drawn as SVG rectangles (no markup string). */
export function qr(text) {
  const code = qrcode(0, "M");
  code.addData(text);
  code.make();
  const n = code.getModuleCount();
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("viewBox", `-4 -4 ${n + 8} ${n + 8}`);
  svg.setAttribute("class", "qr");
  svg.setAttribute("role", "img");
  svg.setAttribute("aria-label", `QR code of ${text}`);
  const bg = document.createElementNS(ns, "rect");
  for (const [k, v] of Object.entries({ x: -4, y: -4, width: n + 8, height: n + 8, fill: "#fff" })) bg.setAttribute(k, v);
  svg.append(bg);
  const path = document.createElementNS(ns, "path");
  let d = "";
  for (let r = 0; r < n; r++) for (let c = 0; c < n; c++) if (code.isDark(r, c)) d += `M${c} ${r}h1v1h-1z`;
  path.setAttribute("d", d);
  path.setAttribute("fill", "#000");
  svg.append(path);
  return svg;
}

export async function account({ api, args, me }) {
  const [family, name] = args;
  if (!familiesOf(me).includes(family) || !name) throw new Error("no such account");
  const data = await api("GET", `/${family}/${encodeURIComponent(name)}`);
  const a = family === "cosmos" ? data.data : data;
  const events = await api("GET", `/audit?${new URLSearchParams({ family, account: name, limit: "20" })}`);
  const recent = events.events.map((e) => [
    when(e.time_ms), e.action,
    h("span", { class: e.outcome === "ok" ? "ok" : "warn" }, e.outcome),
    e.details ? untrusted(e.details.reason || e.details.kind || e.details.tx_id || "") : "",
  ]);
  return h("section", { class: "account" },
    heading(`${family} account`),
    h("div", { class: "split" },
      h("div", {},
        facts([
          ["Address", copyable(a.address, "Copy address")],
          ["Network", a.network],
          ["Public key", a.public_key ? copyable(a.public_key, "Copy key") : (a.pubkey ? copyable(a.pubkey, "Copy key") : undefined)],
          ["EOS K1 key", a.public_key_k1 ? copyable(a.public_key_k1, "Copy key") : undefined],
          ["Wallet", a.wallet ? link(untrusted(a.wallet), ["wallet", a.wallet]) : "— (not derived)"],
          ["Path", a.path || undefined],
          ["Created", a.created_at],
        ])),
      h("figure", {}, qr(a.address), h("figcaption", {}, "Deposit address"))),
    h("h2", {}, "Recent signatures and refusals"),
    recent.length
      ? table(null, ["Time", "Action", "Outcome", "Details"], recent, { class: "list events" })
      : h("p", { class: "empty" }, "Nothing yet."),
    h("p", {}, link("Everything in the audit log", ["audit"], { family, account: name })));
}
