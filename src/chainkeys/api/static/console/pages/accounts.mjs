// Accounts: per family (#/accounts/litecoin), searched by the start of a name or
// address, a page at a time (the service's keyset pages: a tenant of a million accounts
// costs one page), each with its network; create on a chosen network (a main network
// asks once more, naming it); an account's page with its deposit QR code (an EOS
// account's name, labelled so) and its recent signatures and refusals.
import { copyable, facts, h, heading, link, table, untrusted, when } from "../dom.mjs";
import { qrcode } from "../vendor/qrcode-generator.mjs";

const FAMILIES = ["cosmos", "dogecoin", "eos", "litecoin"];
const PAGE = 50;

export function familiesOf(me) {
  return me.families === undefined ? FAMILIES : FAMILIES.filter((f) => me.families.includes(f));
}

/** A list page's names and next cursor, whatever the family's answer shape (Moon's). */
export function listedNames(family, data) {
  if (family === "cosmos") return [data.data.keys.map((k) => k.address), data.data.next_cursor];
  return [data.keys, data.next_cursor];
}

/** The route's family: #/accounts/litecoin (the address form), or ?family= (older links). */
function familyOf(families, args, params) {
  const asked = args[0] || params.get("family");
  if (!asked) return families[0];
  if (!families.includes(asked)) throw new Error(`${asked} is not a family this token may see (${families.join(", ")})`);
  return asked;
}

export async function accounts({ api, args, params, me, go, say }) {
  const families = familiesOf(me);
  const family = familyOf(families, args, params);
  const prefix = params.get("prefix") || "";
  const cursor = params.get("cursor") || "";
  const query = new URLSearchParams({ limit: String(PAGE) });
  if (prefix) query.set("prefix", prefix);
  if (cursor) query.set("cursor", cursor);
  const [[shown, next], networks] = await Promise.all([
    api("GET", `/${family}?${query}`).then((data) => listedNames(family, data)),
    me.scopes.includes("create") ? api("GET", "/networks") : null,
  ]);

  const tabs = h("nav", { class: "tabs", "aria-label": "Families" },
    families.map((f) => {
      const a = link(f, ["accounts", f]);
      if (f === family) a.setAttribute("aria-current", "page");
      return a;
    }));
  const search = h("form", { class: "bar", role: "search" },
    h("label", { for: "prefix" }, "Name or address starts with"),
    h("input", { id: "prefix", name: "prefix", value: prefix, spellcheck: "false", autocomplete: "off", maxlength: "100" }),
    h("button", { type: "submit" }, "Search"),
    prefix ? link("Clear", ["accounts", family]) : null);
  search.addEventListener("submit", (e) => {
    e.preventDefault();
    const value = search.querySelector("#prefix").value.trim();
    go(`#/accounts/${encodeURIComponent(family)}${value ? `?${new URLSearchParams({ prefix: value })}` : ""}`);
  });
  const rows = shown.map((name) => {
    const network = h("span", { class: "network", "aria-busy": "true" }, "…");
    return { name, network, cells: [link(untrusted(name), ["account", family, name]), network] };
  });
  const list = rows.length
    ? table(`${family} accounts${prefix ? ` starting with “${prefix}”` : ""}`, ["Name (address)", "Network"],
      rows.map((r) => r.cells), { class: "list accounts" })
    : h("p", { class: "empty" }, prefix ? "No account starts with that." : "No account yet.");
  networksOf(api, family, rows);
  const pager = h("p", { class: "bar" },
    cursor ? link("First page", ["accounts", family], { prefix }) : null,
    next ? link("Next page", ["accounts", family], { prefix, cursor: next }) : null);
  const create = networks ? creator(api, family, networks.families[family], go, say) : null;
  return h("section", {}, heading("Accounts"), tabs, h("div", { class: "bar" }, search), create, list, pager);
}

/** Fill each row's network cell: a list names accounts only (Moon's shape), so each
 * shown account is looked up, a few at a time, after the page is drawn. */
async function networksOf(api, family, rows) {
  const queue = rows.slice();
  const one = async () => {
    for (let r = queue.shift(), first = true; r; r = queue.shift(), first = false) {
      if (!first && !r.network.isConnected) return; // the page was left (or never shown)
      try {
        const data = await api("GET", `/${family}/${encodeURIComponent(r.name)}`);
        r.network.textContent = (family === "cosmos" ? data.data : data).network || "—";
      } catch (e) {
        r.network.textContent = "—";
        r.network.title = e.message;
        if (e.status === 429) queue.length = 0; // rate limited: ask no more
      }
      r.network.removeAttribute("aria-busy");
    }
  };
  await Promise.all([one(), one(), one(), one()]);
  for (const r of rows) r.network.removeAttribute("aria-busy");
}

/** Create a key on a chosen network (the family's default first); on a network that
 * is not a testnet, a second step names it before anything is made. */
function creator(api, family, info, go, say) {
  if (!info) return null;
  const id = "create-network";
  const select = h("select", { id },
    info.networks.map((n) => h("option", { value: n.name, selected: n.name === info.default },
      `${n.name}${n.testnet ? " (testnet)" : ""}`)));
  const button = h("button", { type: "submit" }, "Create");
  const confirm = h("div", { class: "confirm", id: "create-confirm", role: "group", "aria-labelledby": "create-confirm-text", hidden: true });
  const form = h("form", { class: "bar create", id: "create" },
    h("label", { for: id }, `Create a ${family} account on`), select, button, confirm);
  const make = async (network) => {
    button.disabled = true;
    confirm.hidden = true;
    try {
      const made = await api("POST", `/${family}`, network === info.default ? {} : { network });
      const address = family === "cosmos" ? made.data.address : made.address;
      go(`#/account/${encodeURIComponent(family)}/${encodeURIComponent(address)}`);
      say(`Created ${address} on ${network}`);
    } catch (e) {
      say(e.message, true);
      button.disabled = false;
    }
  };
  select.addEventListener("change", () => { confirm.hidden = true; button.disabled = false; });
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    const network = info.networks.find((n) => n.name === select.value);
    if (!network) return;
    if (network.testnet) return make(network.name);
    const yes = h("button", { type: "button", class: "danger" }, `Create on ${network.name}`);
    const no = h("button", { type: "button" }, "Cancel");
    yes.addEventListener("click", () => make(network.name));
    no.addEventListener("click", () => { confirm.hidden = true; button.disabled = false; button.focus(); });
    confirm.replaceChildren(
      h("p", { id: "create-confirm-text" }, h("strong", {}, `${network.name} is a main network.`),
        ` The new ${family} key holds real funds once anything is sent to it. Create it on ${network.name}?`),
      yes, " ", no);
    confirm.hidden = false;
    button.disabled = true;
    yes.focus();
  });
  return form;
}

/** Whether an account's "address" is a name on chain: an Antelope (EOS) account, the
 * accounts that carry a PUB_K1_ key. Such a name is made on chain by someone who pays
 * for it, never by this service, so funds sent to one that does not exist go nowhere.
 * Read from the answer, not from the family's name (tests/test_family_literals.py). */
const named = (a) => a.public_key_k1 !== undefined;

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
          [named(a) ? "Account name" : "Address", copyable(a.address, named(a) ? "Copy account name" : "Copy address")],
          ["Network", a.network],
          ["Public key", a.public_key ? copyable(a.public_key, "Copy key") : (a.pubkey ? copyable(a.pubkey, "Copy key") : undefined)],
          ["EOS K1 key", a.public_key_k1 ? copyable(a.public_key_k1, "Copy key") : undefined],
          ["Wallet", a.wallet ? link(untrusted(a.wallet), ["wallet", a.wallet]) : "— (not derived)"],
          ["Path", a.path || undefined],
          ["Created", when(a.created_at)],
        ])),
      h("figure", {}, qr(a.address), h("figcaption", {}, named(a)
        ? "Account name (it must exist on chain before funds are sent to it)" : "Deposit address"))),
    h("h2", {}, "Recent signatures and refusals"),
    recent.length
      ? table(null, ["Time", "Action", "Outcome", "Details"], recent, { class: "list events" })
      : h("p", { class: "empty" }, "Nothing yet."),
    h("p", {}, link("Everything in the audit log", ["audit"], { family, account: name })));
}
