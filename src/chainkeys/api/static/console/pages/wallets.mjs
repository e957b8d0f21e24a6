// Wallets: the list, and a wallet's page with its extended public keys (in each format
// the API says fits) and descriptors per family and address type (copy buttons), the
// accounts derived from it, and derive-next (create scope). The phrase is never shown.
import { copyable, facts, h, heading, link, table, untrusted, when } from "../dom.mjs";
import { familiesOf } from "./accounts.mjs";

const TYPES = { litecoin: ["p2wpkh", "p2sh-p2wpkh", "p2pkh"] };

export async function wallets({ api, params }) {
  const query = new URLSearchParams({ limit: "50" });
  if (params.get("cursor")) query.set("cursor", params.get("cursor"));
  const data = await api("GET", `/wallets?${query}`);
  const rows = data.wallets.map((w) => [
    link(untrusted(w.name), ["wallet", w.id]), h("code", {}, w.fingerprint), when(w.created_at),
    w.exported ? h("span", { class: "warn" }, "exported") : "no",
  ]);
  return h("section", {}, heading("Wallets"),
    rows.length ? table(null, ["Name", "Fingerprint", "Created", "Phrase exported"], rows)
      : h("p", { class: "empty" }, "No wallet yet. Make one with the API: ",
        h("code", {}, 'POST /wallets {"name": "deposits"}'),
        " (a token with the create scope; docs/wallets.md). The chainkeys command has no wallet create."),
    data.next_cursor ? h("p", {}, link("Next page", ["wallets"], { cursor: data.next_cursor })) : null);
}

/** One family and address type's extended key, in any of the formats the API says fit
 * (`formats`, the default first: a Litecoin native segwit key as zpub for Electrum-LTC). */
function xpubBlock(family, type, x, xpub, say) {
  const name = `${family}${type ? ` ${type}` : ""}`;
  const key = h("span", { class: "xpub-key" }, copyable(x.xpub, `Copy ${x.format}`));
  let format = x.format;
  if (x.formats && x.formats.length > 1) {
    format = h("select", { class: "xpub-format", "aria-label": `Format of the ${name} key`, dataset: { family, type: type || "" } },
      x.formats.map((f) => h("option", { value: f, selected: f === x.format }, f)));
    format.addEventListener("change", async () => {
      try {
        const y = await xpub(format.value);
        key.replaceChildren(copyable(y.xpub, `Copy ${y.format}`));
      } catch (e) {
        say(`${name}: ${e.message}`, true);
      }
    });
  }
  return h("div", { class: "xpub", dataset: { family, type: type || "" } },
    h("h3", {}, name, " ", h("small", {}, x.path)),
    facts([
      ["Format", format],
      ["Extended key", key],
      ["Descriptor", x.descriptor ? copyable(x.descriptor, "Copy descriptor") : undefined],
      ["Change descriptor", x.change_descriptor ? copyable(x.change_descriptor, "Copy descriptor") : undefined],
    ]));
}

export async function wallet({ api, args, params, me, go, say }) {
  const [id] = args;
  const w = await api("GET", `/wallets/${encodeURIComponent(id)}`);
  const query = new URLSearchParams({ limit: "50" });
  if (params.get("cursor")) query.set("cursor", params.get("cursor"));
  const derived = await api("GET", `/wallets/${encodeURIComponent(w.id)}/accounts?${query}`);
  const keys = [];
  for (const family of familiesOf(me)) {
    for (const type of TYPES[family] || [null]) {
      const xpub = (format) => api("GET", `/wallets/${encodeURIComponent(w.id)}/xpub?${new URLSearchParams({
        family, ...(type ? { address_type: type } : {}), ...(format ? { format } : {}) })}`);
      try {
        keys.push(xpubBlock(family, type, await xpub(), xpub, say));
      } catch (e) {
        keys.push(h("p", { class: "warn" }, `${family}: ${e.message}`));
      }
    }
  }
  const rows = derived.accounts.map((a) => [
    link(untrusted(a.address), ["account", a.family, a.name]), a.family, a.network,
    h("code", {}, a.path), when(a.created_ms),
  ]);
  let derive = null;
  if (me.scopes.includes("create")) {
    const families = familiesOf(me).filter((f) => f !== "eos"); // EOS needs a chosen name
    derive = h("form", { class: "bar", id: "derive" },
      h("label", { for: "derive-family" }, "Derive the next account of"),
      h("select", { id: "derive-family" }, families.map((f) => h("option", { value: f }, f))),
      h("button", { type: "submit" }, "Derive next"));
    derive.addEventListener("submit", async (e) => {
      e.preventDefault();
      const family = derive.querySelector("select").value;
      const button = derive.querySelector("button");
      button.disabled = true;
      try {
        const made = await api("POST", `/wallets/${encodeURIComponent(w.id)}/accounts`, { family });
        const a = made.accounts[0];
        say(`Derived ${a.address} at ${a.path}`);
        go(`#/wallet/${encodeURIComponent(w.id)}`);
      } catch (err) {
        say(err.message, true);
        button.disabled = false;
      }
    });
  }
  return h("section", { class: "wallet" },
    heading(`Wallet ${w.name}`),
    facts([
      ["Id", copyable(w.id, "Copy id")],
      ["Fingerprint", h("code", {}, w.fingerprint)],
      ["Created", when(w.created_at)],
      ["Phrase exported", w.exported ? "yes: treat the wallet as known outside chainkeys" : "no"],
    ]),
    h("h2", {}, "Extended public keys"),
    h("p", { class: "hint" }, "Deriving change/index from these gives exactly the service's addresses (a watch-only wallet)."),
    keys,
    h("h2", {}, "Derived accounts"),
    derive,
    rows.length ? table(null, ["Address", "Family", "Network", "Path", "Created"], rows, { class: "list derived" })
      : h("p", { class: "empty" }, "None derived yet."),
    derived.next_cursor ? h("p", {}, link("Next page", ["wallet", w.id], { cursor: derived.next_cursor })) : null);
}
