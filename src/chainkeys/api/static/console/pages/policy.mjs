// Policy: the rules in force drawn one by one (each amount in its smallest unit and its
// display unit), the document as set, the history with what each version changed, and
// the dry run: a sign request tried against the policy (nothing signed, no key opened,
// no cap counted) on one of the tenant's accounts, its body prefilled with the chosen
// endpoint's documented example; the answer says the decision, why, and which rule.
import { append, baseAmount, facts, h, heading, inUnits, pretty, untrusted, when } from "../dom.mjs";
import { familiesOf, listedNames } from "./accounts.mjs";

const OTHER = " another"; // the account select's "type a name" (no account name has a space)
const LISTED = 100; // accounts offered in the select; past them, a name is typed

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
    h("details", {}, h("summary", {}, `Version ${v.version}, set `, when(v.set), v.policy ? "" : " (cleared)"),
      diff(all[i + 1] ? all[i + 1].policy : null, v.policy))));

  const form = dryRunForm(api, me, say);
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
    const chosen = form.querySelector("#t-account").value;
    const account = chosen === OTHER ? form.querySelector("#t-other").value.trim() : chosen;
    try {
      const run = await api("POST", "/policy/test", {
        family: form.querySelector("#t-family").value, account,
        kind: form.querySelector("#t-kind").value, request,
      });
      result.replaceChildren(...outcome(run));
      say(`Dry run: ${run.decision}; nothing was signed`);
    } catch (err) {
      result.replaceChildren(h("p", { class: "warn" }, err.message));
    }
  });

  return h("section", { class: "policy" }, heading("Policy"),
    shown.version === null || shown.version === undefined
      ? h("p", {}, "This tenant never had a policy: the token's scopes decide.")
      : h("p", {}, `Version ${shown.version}, set `, when(shown.set), ".", rules ? "" : " It was cleared: the token's scopes decide."),
    rules ? h("h2", {}, "Rules, in the order they are tried") : null,
    rules ? h("ol", { class: "rules", start: "0" }, rules.map((r, i) => rule(r, i, shown.units))) : null,
    rules ? h("details", {}, h("summary", {}, "The document (JSON)"), pretty(shown.policy)) : null,
    h("h2", {}, "History"),
    versions.length ? h("ol", { class: "history" }, versions) : h("p", { class: "empty" }, "No version yet."),
    h("h2", {}, "Try a request"),
    h("p", { class: "hint" }, "What the policy in force would decide on a sign request, and why. Nothing is signed, no key is opened, no cap is counted."),
    form, result);
}

/** The sign endpoints of `family` and each one's first example request, from the OpenAPI
 * document the service serves (the endpoints' own documented examples). */
let documented = null;
async function signKinds(family) {
  documented = documented || fetch("/openapi.json", { credentials: "omit", cache: "no-store" })
    .then((r) => (r.ok ? r.json() : Promise.reject(new Error(`/openapi.json: HTTP ${r.status}`))));
  let doc;
  try {
    doc = await documented;
  } catch (e) {
    documented = null; // try again next time
    throw e;
  }
  const prefix = `/${family}/{accountName}/`;
  const kinds = new Map();
  for (const [path, ops] of Object.entries(doc.paths)) {
    const kind = path.startsWith(prefix) ? path.slice(prefix.length) : "";
    // a batch is its items, each of which the dry run decides alone: it is not offered
    if (!kind.startsWith("sign-") || kind === "sign-batch" || !ops.post) continue;
    const examples = ((ops.post.requestBody || {}).content || {})["application/json"] || {};
    const first = Object.values(examples.examples || {})[0];
    kinds.set(kind, first ? first.value : {});
  }
  return kinds;
}

/** The dry run's form: the family, one of the tenant's accounts of it, the family's sign
 * endpoints, and the body prefilled with the chosen endpoint's documented example (until
 * it is edited). */
function dryRunForm(api, me, say) {
  const field = (id, label, control) => h("span", { class: "field" }, h("label", { for: id }, label), control);
  const family = h("select", { id: "t-family" }, familiesOf(me).map((f) => h("option", { value: f }, f)));
  const account = h("select", { id: "t-account", required: true });
  const other = h("input", { id: "t-other", spellcheck: "false", autocomplete: "off", maxlength: "100" });
  const otherField = field("t-other", "Account name", other);
  otherField.hidden = true;
  const kind = h("select", { id: "t-kind" });
  const body = h("textarea", { id: "t-request", rows: "12", spellcheck: "false", required: true });
  let edited = false;
  let examples = new Map();
  body.addEventListener("input", () => { edited = true; });
  const prefill = () => {
    if (edited && body.value.trim()) return;
    const example = examples.get(kind.value);
    body.value = example === undefined ? "" : JSON.stringify(example, null, 2);
    edited = false;
  };
  const load = async () => {
    const f = family.value;
    account.replaceChildren(h("option", { value: "" }, "…"));
    kind.replaceChildren();
    try {
      const [listed, kinds] = await Promise.all([
        api("GET", `/${encodeURIComponent(f)}?limit=${LISTED}`).then((data) => listedNames(f, data)),
        signKinds(f),
      ]);
      if (family.value !== f) return; // another family was chosen meanwhile
      const [names, next] = listed;
      account.replaceChildren();
      append(account, [
        names.length ? null : h("option", { value: "" }, `no ${f} account`),
        names.map((n) => h("option", { value: n }, n)),
        next ? h("option", { value: OTHER }, `another ${f} account (type its name)`) : null]);
      otherField.hidden = account.value !== OTHER;
      examples = kinds;
      kind.replaceChildren(...[...kinds.keys()].map((k) => h("option", { value: k }, k)));
      edited = false;
      prefill();
    } catch (e) {
      say(e.message, true);
    }
  };
  family.addEventListener("change", load);
  kind.addEventListener("change", () => { edited = false; prefill(); });
  account.addEventListener("change", () => { otherField.hidden = account.value !== OTHER; });
  load();
  return h("form", { class: "dryrun", id: "dryrun" },
    h("div", { class: "fields" },
      field("t-family", "Family", family), field("t-account", "Account", account), otherField,
      field("t-kind", "Endpoint", kind)),
    field("t-request", "The sign request's body (JSON): the endpoint's documented example, to edit", body),
    h("button", { type: "submit" }, "Try it"));
}

/** What a dry run decided, said once: the decision and why (the reason without the
 * rule's label, which the next line names), the rule that decided (its index, name,
 * effect and condition's value), and every rule that covers the request. */
function outcome(run) {
  const decided = run.rule === undefined || run.rule === null ? null : run.rules.find((r) => r.index === run.rule);
  const approval = run.approval ? `: it waits for ${run.approval.quorum} of ${run.approval.group}` : "";
  const lines = [h("p", { class: `decision ${run.decision}` }, h("strong", {}, `The policy would ${run.decision}`),
    run.reason ? h("span", {}, ": ", untrusted(why(run))) : approval)];
  if (run.rule !== undefined && run.rule !== null) {
    lines.push(h("p", { class: "decided-by" }, `Decided by rule ${run.rule}`,
      run.rule_name ? h("span", {}, " “", untrusted(run.rule_name), "”") : "",
      decided ? ` (a${decided.effect === "allow" ? "n" : ""} ${decided.effect} rule)` : "",
      decided && decided.when ? h("span", {}, ", whose condition ", h("code", {}, untrusted(decided.when)), " is ",
        h("strong", {}, String(decided.value))) : "", "."));
  } else if (run.decision === "deny") {
    lines.push(h("p", { class: "decided-by" }, "No rule allows it: a policy refuses what no rule allows."));
  }
  const covering = run.rules.filter((r) => r.covers);
  if (covering.length) {
    lines.push(h("p", { class: "hint" }, "The rules that cover it:"), h("ul", { class: "covering" }, covering.map((r) => h("li", {},
      `rule ${r.index}`, r.name ? h("span", {}, " “", untrusted(r.name), "”") : "", ` (${r.effect})`,
      r.when ? h("span", {}, ": ", h("code", {}, untrusted(r.when)), " is ", h("strong", {}, String(r.value))) : ": no condition"))));
  }
  return lines;
}

/** The refusal's reason without its `policy rule N (label): ` prefix (said beside it). */
function why(run) {
  const reason = String(run.reason);
  if (reason.startsWith("policy: ")) return reason.slice("policy: ".length);
  if (run.rule === undefined || run.rule === null) return reason;
  const named = `policy rule ${run.rule} (${run.rule_name}): `;
  if (run.rule_name && reason.startsWith(named)) return reason.slice(named.length);
  const where = new RegExp(`^policy rule ${run.rule} \\([^()]*\\): `);
  return reason.replace(where, "");
}
