// Policy: the rules in force drawn one by one (and the document), the history with
// what each version changed, and the dry run: a sign request tried against the
// policy (nothing signed, no key opened, no cap counted).
import { baseAmount, facts, h, heading, inUnits, pretty, untrusted } from "../dom.mjs";
import { familiesOf } from "./accounts.mjs";

const KINDS = ["sign-transfer", "sign-ibc-transfer", "sign-direct", "sign-amino", "sign-psbt",
  "sign-raw-transaction", "sign-transaction", "sign-message"];

/** A rule's amounts ({denom: integer}) as people read them: `100000000 litoshi (1 LTC)`,
 * from the units GET /policy gives beside the document (the document stays as set). */
function capsIn(units) {
  return (m) => (m ? Object.entries(m).map(([d, v]) => {
    const u = units[d] || {};
    const shown = inUnits(v, u.unit, u.decimals);
    const base = baseAmount(v, d, u.base_unit);
    return shown ? `${base} (${shown})` : base;
  }).join(", ") : undefined);
}

function rule(r, i, units) {
  const caps = capsIn((units || {})[r.family] || {});
  return h("li", { class: `rule ${r.effect === "deny" ? "deny" : "allow"}` },
    h("h3", {}, `${i}. ${r.effect === "deny" ? "Deny" : "Allow"} `, `${r.family} on ${r.network || "every network"}`,
      r.name ? h("span", {}, " — ", untrusted(r.name)) : ""),
    facts([
      ["When", r.when ? h("code", {}, untrusted(r.when)) : undefined],
      ["Recipients", r.recipients ? h("span", {}, `${r.recipients.length} allowed: `,
        untrusted(r.recipients.slice(0, 5).join(", ") + (r.recipients.length > 5 ? ", …" : ""))) : undefined],
      ["Per transaction", caps(r.max_per_tx)],
      ["Per 24 h", caps(r.max_per_day)],
      ["Messages", r.messages ? r.messages.join(", ") : undefined],
      ["Actions", r.actions ? r.actions.join(", ") : undefined],
      ["Raw messages", r.raw_messages ? "allowed" : undefined],
      ["IBC memos", r.ibc_memo ? "allowed" : undefined],
      ["Approval", r.approval ? `${r.approval.quorum} of ${r.approval.group}${r.above ? ` above ${caps(r.above)}` : ""}, within ${r.approval.ttl || "24h"}` : undefined],
    ]));
}

/** Lines of `b` not in `a` (+) and of `a` not in `b` (-): a policy's change, rule by rule. */
function diff(a, b) {
  const left = a ? JSON.stringify(a, null, 1).split("\n") : [];
  const right = b ? JSON.stringify(b, null, 1).split("\n") : [];
  const inLeft = new Set(left);
  const inRight = new Set(right);
  return h("pre", { class: "diff" },
    left.filter((l) => !inRight.has(l)).map((l) => h("del", {}, untrusted(`- ${l.trim()}`), "\n")),
    right.filter((l) => !inLeft.has(l)).map((l) => h("ins", {}, untrusted(`+ ${l.trim()}`), "\n")));
}

export async function policy({ api, me, say }) {
  const [shown, history] = await Promise.all([api("GET", "/policy"), api("GET", "/policy/history")]);
  const rules = shown.policy ? shown.policy.rules : null;
  const versions = history.versions.slice().reverse().map((v, i, all) => h("li", {},
    h("details", {}, h("summary", {}, `Version ${v.version}, set ${v.set}${v.policy ? "" : " (cleared)"}`),
      diff(all[i + 1] ? all[i + 1].policy : null, v.policy))));

  const form = h("form", { class: "dryrun", id: "dryrun" },
    h("span", { class: "field" }, h("label", { for: "t-family" }, "Family"),
      h("select", { id: "t-family" }, familiesOf(me).map((f) => h("option", { value: f }, f)))),
    h("span", { class: "field" }, h("label", { for: "t-account" }, "Account"),
      h("input", { id: "t-account", required: true, spellcheck: "false" })),
    h("span", { class: "field" }, h("label", { for: "t-kind" }, "Endpoint"),
      h("select", { id: "t-kind" }, KINDS.map((k) => h("option", { value: k }, k)))),
    h("label", { for: "t-request" }, "The sign request's body (JSON)"),
    h("textarea", { id: "t-request", rows: "8", spellcheck: "false", required: true }),
    h("button", { type: "submit" }, "Try it"));
  const result = h("div", { id: "dryrun-result", "aria-live": "polite" });
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    let request;
    try {
      request = JSON.parse(form.querySelector("#t-request").value);
    } catch {
      say("The request body is not JSON", true);
      return;
    }
    try {
      const run = await api("POST", "/policy/test", {
        family: form.querySelector("#t-family").value, account: form.querySelector("#t-account").value.trim(),
        kind: form.querySelector("#t-kind").value, request,
      });
      result.replaceChildren(
        h("p", { class: `decision ${run.decision}` }, h("strong", {}, `The policy would ${run.decision}`),
          run.rule !== undefined && run.rule !== null ? ` (rule ${run.rule}${run.rule_name ? `, ${run.rule_name}` : ""})` : "",
          run.reason ? h("span", {}, ": ", untrusted(run.reason)) : ""),
        h("ul", {}, run.rules.filter((r) => r.covers).map((r) => h("li", {},
          `rule ${r.index} (${r.effect})`, r.when ? h("span", {}, ": ", h("code", {}, untrusted(r.when)), " is ",
            h("strong", {}, String(r.value))) : ": no condition"))));
      say(`Dry run: ${run.decision}; nothing was signed`);
    } catch (err) {
      result.replaceChildren(h("p", { class: "warn" }, err.message));
    }
  });

  return h("section", { class: "policy" }, heading("Policy"),
    shown.version === null || shown.version === undefined
      ? h("p", {}, "This tenant never had a policy: the token's scopes decide.")
      : h("p", {}, `Version ${shown.version}, set ${shown.set}.`, rules ? "" : " It was cleared: the token's scopes decide."),
    rules ? h("h2", {}, "Rules, in the order they are tried") : null,
    rules ? h("ol", { class: "rules", start: "0" }, rules.map((r, i) => rule(r, i, shown.units))) : null,
    rules ? h("details", {}, h("summary", {}, "The document (JSON)"), pretty(shown.policy)) : null,
    h("h2", {}, "History"),
    versions.length ? h("ol", { class: "history" }, versions) : h("p", { class: "empty" }, "No version yet."),
    h("h2", {}, "Try a request"),
    h("p", { class: "hint" }, "What the policy in force would decide on a sign request, and why. Nothing is signed, no key is opened, no cap is counted."),
    form, result);
}
