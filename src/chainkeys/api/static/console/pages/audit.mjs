// Audit: the tenant's events, newest first, filtered by action, family, account,
// outcome and time; a refusal's reason is in its row, which opens its details (the
// event's JSON) in a row under it; the filtered view downloads as CSV or JSON Lines
// (the service renders it: the same filters).
import { h, heading, link, pretty, scrolling, untrusted, when } from "../dom.mjs";
import { familiesOf } from "./accounts.mjs";

const ACTIONS = ["sign", "create", "import", "derive", "delete", "export", "restore"];
const FILTERS = ["action", "family", "account", "outcome", "since", "until"];

/** A datetime-local value (UTC) from ms, and back. */
const toInput = (ms) => (ms ? new Date(Number(ms)).toISOString().slice(0, 16) : "");
const fromInput = (v) => (v ? String(Date.parse(`${v}:00Z`)) : "");

export async function audit({ api, params, me, go, say }) {
  const query = new URLSearchParams({ limit: "50" });
  for (const f of [...FILTERS, "cursor"]) if (params.get(f)) query.set(f, params.get(f));
  const data = await api("GET", `/audit?${query}`);

  const field = (id, label, control) => h("span", { class: "field" }, h("label", { for: `f-${id}` }, label), control);
  const select = (id, options, value) => h("select", { id: `f-${id}`, name: id },
    h("option", { value: "" }, "any"), options.map((o) => h("option", { value: o, selected: o === value }, o)));
  const form = h("form", { class: "filters", "aria-label": "Filters" },
    field("action", "Action", select("action", ACTIONS, params.get("action"))),
    field("family", "Family", select("family", familiesOf(me), params.get("family"))),
    field("account", "Account", h("input", { id: "f-account", name: "account", value: params.get("account") || "", spellcheck: "false" })),
    field("outcome", "Outcome", select("outcome", ["ok", "refused"], params.get("outcome"))),
    field("since", "From (UTC)", h("input", { id: "f-since", name: "since", type: "datetime-local", value: toInput(params.get("since")) })),
    field("until", "Until (UTC)", h("input", { id: "f-until", name: "until", type: "datetime-local", value: toInput(params.get("until")) })),
    h("button", { type: "submit" }, "Show"),
    link("Clear", ["audit"]));
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    const q = new URLSearchParams();
    for (const f of FILTERS) {
      let v = form.elements[f].value.trim();
      if (f === "since" || f === "until") v = fromInput(v);
      if (v) q.set(f, v);
    }
    go(`#/audit?${q}`);
  });

  const download = (fmt) => {
    const b = h("button", { type: "button", class: `download ${fmt}` }, `Download ${fmt === "csv" ? "CSV" : "JSON Lines"}`);
    b.addEventListener("click", async () => {
      b.disabled = true;
      try {
        const q = new URLSearchParams({ format: fmt });
        for (const f of FILTERS) if (params.get(f)) q.set(f, params.get(f));
        const response = await api("GET", `/audit/export?${q}`, undefined, { raw: true });
        const blob = await response.blob();
        const name = /filename="([^"]+)"/.exec(response.headers.get("content-disposition") || "");
        const a = h("a", { href: URL.createObjectURL(blob), download: name ? name[1] : `audit.${fmt}` });
        document.body.append(a);
        a.click();
        a.remove();
        say(`Downloaded the filtered view (${fmt}, at most the newest 100,000 events)`);
      } catch (err) {
        say(err.message, true);
      } finally {
        b.disabled = false;
      }
    });
    return b;
  };

  // An event is a row; its details (pretty JSON) open in a row of their own under it,
  // across every column, so the other columns keep their width.
  const rows = data.events.flatMap((e) => {
    const refused = e.outcome !== "ok";
    const row = h("tr", { class: refused ? "event refused" : "event", dataset: { id: String(e.id) } },
      h("td", { class: "time" }, when(e.time_ms)),
      h("td", { class: "word" }, e.action),
      h("td", { class: refused ? "word warn" : "word ok" }, e.outcome),
      h("td", { class: "word" }, e.family || ""),
      h("td", { class: "account" }, e.account_name ? (e.family ? link(untrusted(e.account_name), ["account", e.family, e.account_name]) : untrusted(e.account_name)) : ""),
      h("td", {}, refused && e.details && e.details.reason ? h("span", { class: "reason" }, untrusted(e.details.reason), " ") : null));
    if (!e.details) return [row];
    const id = `details-${e.id}`;
    const toggle = h("button", { type: "button", class: "details", "aria-expanded": "false", "aria-controls": id }, "Details");
    const detail = h("tr", { class: "detail", id, hidden: true },
      h("td", { colspan: "6" }, pretty(e.details)));
    toggle.addEventListener("click", () => {
      const open = detail.hidden;
      detail.hidden = !open;
      toggle.setAttribute("aria-expanded", String(open)); // its label stays: the column keeps its width
    });
    row.lastElementChild.append(toggle);
    return [row, detail];
  });
  const table = h("table", { class: "list audit" },
    h("caption", {}, "Newest first"),
    h("thead", {}, h("tr", {}, ["Time", "Action", "Outcome", "Family", "Account", "Details"].map((t) => h("th", { scope: "col" }, t)))),
    h("tbody", {}, rows));
  return h("section", {}, heading("Audit log"), form,
    h("div", { class: "bar" }, download("csv"), download("jsonl")),
    rows.length ? scrolling(table, "Audit events, newest first") : h("p", { class: "empty" }, "No event matches."),
    data.next_cursor ? h("p", {}, link("Older events", ["audit"],
      Object.fromEntries([...FILTERS.map((f) => [f, params.get(f)]), ["cursor", data.next_cursor]]))) : null);
}
