// Changes: a governed tenant's changes for its admins (docs/governance.md). Each shows
// its state, kind, the diff in words, whether it loosens anything (then it waits the
// tenant's delay after the quorum: the countdown), the votes; its page the document
// and the digest. An admin approves or rejects with their passkey (enrolled on the
// Passkeys page with a code from `chainkeys admin invite`): the passkey signs
// SHA-256("chainkeys change v1" || id || digest || decision), computed here from the
// digest this page shows, so a changed change is not signed. Any one admin cancels a
// pending or scheduled change. Buttons only: Tab and Enter work.
import { facts, h, heading, link, pretty, untrusted, when } from "../dom.mjs";
import { changeChallenge, get, supported, why } from "../webauthn.mjs";

const STATES = ["pending", "scheduled", "applied", "rejected", "cancelled"];
const OPEN = ["pending", "scheduled"];

export async function changes({ api, params, go, say }) {
  const state = STATES.includes(params.get("state")) ? params.get("state") : "";
  const data = await api("GET", `/changes${state ? `?state=${state}` : ""}`);
  const filter = h("form", { class: "bar" },
    h("label", { for: "change-state" }, "State"),
    h("select", { id: "change-state" }, h("option", { value: "" }, "all"),
      STATES.map((s) => h("option", { value: s, selected: s === state }, s))));
  filter.querySelector("select").addEventListener("change", (e) => go(`#/changes?state=${e.target.value}`));
  return h("section", {}, heading("Changes"),
    h("p", { class: "hint" }, "Changes to this tenant's rules wait for a quorum of its admins' signed votes; ",
      "one that loosens anything then waits the tenant's delay, and any one admin may cancel it meanwhile."),
    filter,
    data.changes.length
      ? h("ol", { id: "changes", class: "cards" }, data.changes.map((c) => card(c, api, go, say, false)))
      : h("p", { class: "empty" }, `No ${state} change.`));
}

export async function change({ api, args, go, say }) {
  const c = await api("GET", `/changes/${encodeURIComponent(args[0] || "")}`);
  return h("section", {}, heading(`Change ${c.id}`), h("p", {}, link("All changes", ["changes"])),
    h("ol", { class: "cards" }, card(c, api, go, say, true)));
}

/** Seconds as people say them: `59 min 58 s`, `2 d 3 h`. */
export function duration(seconds) {
  const units = [["d", 86400], ["h", 3600], ["min", 60], ["s", 1]];
  const parts = [];
  let left = Math.max(0, Math.floor(seconds));
  for (const [name, size] of units) {
    if (left >= size || (!parts.length && size === 1)) parts.push(`${Math.floor(left / size)} ${name}`);
    left %= size;
  }
  return parts.slice(0, 2).join(" ");
}

function effective(c) {
  if (c.state === "scheduled" && c.effective_at) {
    return h("span", { class: "countdown" }, `in ${duration(c.countdown_seconds ?? 0)} (`, when(c.effective_at), ")");
  }
  if (c.state === "applied") return when(c.effective_at);
  if (c.state === "pending") {
    return c.loosens ? `${duration(c.delay_seconds)} after the quorum (it loosens)` : "at the quorum (it only tightens)";
  }
  return undefined;
}

function card(c, api, go, say, full) {
  const votes = (c.votes || []).map((v) => h("li", {}, untrusted(v.label), ` ${v.decision}d `, when(v.at)));
  const node = h("li", { class: "approval change", dataset: { id: c.id } },
    h("h2", {}, h("span", { class: `state ${c.state}` }, c.state), " ",
      full ? `${c.kind} change` : link(`${c.kind} change ${c.id}`, ["change", c.id])),
    h("ul", { class: "diff", "aria-label": "What it changes" }, (c.diff || []).map((w) => h("li", {}, untrusted(w)))),
    facts([
      ["Loosens", c.loosens ? h("span", { class: "loosens" }, "yes: it waits the delay after the quorum") : "no: it only tightens"],
      ["Votes", `${c.approvals} of ${c.quorum} approvals`],
      ["Takes effect", effective(c)],
      ["Filed", h("span", {}, when(c.created_at), " by ", untrusted(c.created_by))],
      ["Ended", c.ended_at ? h("span", {}, when(c.ended_at), c.ended_by ? [" by ", untrusted(c.ended_by)] : "") : undefined],
      ["Reason", c.reason ? untrusted(c.reason) : undefined, { warn: c.state === "rejected" }],
      ["Digest", full || c.state === "pending" ? h("code", {}, c.digest) : undefined],
    ]),
    h("div", { class: "votes" }, h("h3", {}, "Votes"), votes.length ? h("ul", {}, votes) : h("p", {}, "none yet")));
  if (full && c.document !== undefined) {
    node.append(h("details", {}, h("summary", {}, "The document it applies"), pretty(c.document)));
  }
  const actions = h("div", { class: "actions" });
  if (c.state === "pending") actions.append(...voting(c, api, go, say));
  if (OPEN.includes(c.state)) actions.append(canceller(c, api, go, say));
  if (actions.childElementCount) node.append(actions);
  return node;
}

/** Approve and reject, each signed by the admin's passkey. */
function voting(c, api, go, say) {
  const approve = h("button", { type: "button", class: "approve" }, "Approve with passkey");
  const reject = h("button", { type: "button", class: "reject" }, "Reject with passkey");
  const decide = async (how) => {
    approve.disabled = reject.disabled = true;
    try {
      const assertion = await signed(c, how);
      const done = await api("POST", `/changes/${encodeURIComponent(c.id)}/${how}`, { digest: c.digest, assertion });
      say(`${c.id}: ${how}d by you; now ${done.state}`);
      go(location.hash || "#/changes");
    } catch (e) {
      say(`${c.id}: ${e.message}`, true);
      approve.disabled = reject.disabled = false;
    }
  };
  approve.addEventListener("click", () => decide("approve"));
  reject.addEventListener("click", () => decide("reject"));
  return [approve, reject];
}

/** The admin's passkey assertion over this change's id, the digest shown and the
 * decision (any passkey of theirs: the browser offers those of this site). */
async function signed(c, how) {
  if (!supported()) throw new Error("this browser cannot use passkeys here (WebAuthn needs https, or http://localhost)");
  const challenge = await changeChallenge(c.id, c.digest, how);
  try {
    return await get({ challenge, userVerification: "required", timeout: 120000, allowCredentials: [] });
  } catch (e) {
    throw new Error(`not signed: ${why(e)}`);
  }
}

function canceller(c, api, go, say) {
  const cancel = h("button", { type: "button", class: "cancel danger" }, "Cancel this change");
  cancel.addEventListener("click", async () => {
    cancel.disabled = true;
    try {
      const done = await api("POST", `/changes/${encodeURIComponent(c.id)}/cancel`);
      say(`${c.id}: cancelled by you; now ${done.state}`);
      go(location.hash || "#/changes");
    } catch (e) {
      say(`${c.id}: ${e.message}`, true);
      cancel.disabled = false;
    }
  });
  return cancel;
}
