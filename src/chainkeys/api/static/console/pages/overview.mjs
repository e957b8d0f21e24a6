// Overview: what the tenant holds, what happened in the last 24 h, and how much of
// each daily cap is left (a native <meter> per rule and denom: no chart library).
import { baseAmount, h, heading, inUnits, link, table, untrusted, when } from "../dom.mjs";

export async function overview({ api, me }) {
  const [seen, usage] = await Promise.all([
    api("GET", "/overview"),
    api("GET", "/policy/usage"),
  ]);
  const day = seen.last_24h;
  const tiles = h("ul", { class: "tiles" },
    Object.entries(seen.accounts).map(([family, n]) =>
      h("li", {}, link(h("span", {}, h("strong", { class: "count" }, String(n)), ` ${family} accounts`),
        ["accounts", family]))),
    h("li", {}, link(h("span", {}, h("strong", { class: "count" }, String(seen.wallets)), " wallets"), ["wallets"])),
    me.scopes.includes("approve") || me.scopes.includes("sign")
      ? h("li", {}, link(h("span", {}, h("strong", { class: "count", id: "pending-count" }, String(seen.approvals_pending)),
        " approvals pending"), ["approvals"], { state: "pending" }))
      : null,
    h("li", {}, link(h("span", {}, h("strong", { class: "count", id: "signed-count" }, String(day.signatures)),
      " signatures in 24 h"), ["audit"], { action: "sign", outcome: "ok", since: day.since_ms })),
    h("li", { class: day.refusals ? "alert" : null }, link(h("span", {},
      h("strong", { class: "count", id: "refused-count" }, String(day.refusals)), " refused in 24 h"),
    ["audit"], { outcome: "refused", since: day.since_ms })),
  );
  return h("section", { class: "overview" },
    heading("Overview"),
    h("p", { class: "hint" }, "Since ", when(day.since_ms), "."),
    tiles,
    h("h2", {}, "Daily caps"),
    caps(usage.caps),
  );
}

function caps(list) {
  if (!list.length) {
    return h("p", {}, "No rule of the policy in force caps a day's spending (or there is no policy: see ",
      link("Policy", ["policy"]), ").");
  }
  const rows = list.map((u) => {
    const cap = BigInt(u.cap);
    const spent = BigInt(u.spent);
    const permille = cap > 0n ? Number((spent > cap ? cap : spent) * 1000n / cap) : 1000;
    const shown = (v) => {
      const units = inUnits(v, u.unit, u.decimals);
      const base = baseAmount(v, u.denom, u.base_unit);
      return units ? `${units} (${base})` : base;
    };
    const label = `${u.name || `rule ${u.rule}`}, ${u.network}, ${u.denom}: ${shown(u.spent)} of ${shown(u.cap)}`;
    return [
      h("span", {}, u.name ? untrusted(u.name) : `rule ${u.rule}`),
      `${u.family} / ${u.network}`,
      h("meter", { min: "0", max: "1000", low: "700", high: "900", optimum: "0", value: String(permille),
        "aria-label": label, dataset: { rule: String(u.rule), denom: u.denom } }),
      h("span", { class: "spent", dataset: { rule: String(u.rule), denom: u.denom } }, shown(u.spent)),
      shown(u.cap),
      h("strong", { class: "remaining", dataset: { rule: String(u.rule), denom: u.denom } }, shown(u.remaining)),
    ];
  });
  return table("Spent in the last 24 h against each rule's max_per_day (the window the caps count)",
    ["Rule", "Where", "Used", "Spent", "Cap", "May still be paid out"], rows, { class: "list caps" });
}
