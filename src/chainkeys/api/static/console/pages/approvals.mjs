// Approvals: what waits for this token's group (and the requests it made), with
// everything that decides where value goes: recipients, amounts in display units
// beside base units, the fee (or that it is unknown), memos, IBC channel, port and
// timeouts, a signed message as text or hex. Approve (on the digest shown) and
// reject are buttons: Tab and Enter work, nothing needs a mouse; once this token's
// person voted, the card says so instead. The token that made a pending request may
// cancel it (the API says so: `cancellable`). On a request whose rule asks for passkeys
// the vote is signed by the approver's passkey (the browser's prompt), and each vote
// says whether it carries a signature. Each card offers the approval as a download, to
// check with a verifier that does not trust this page or the service.
import { amounts, facts, h, heading, untrusted, when } from "../dom.mjs";
import { canonical, get, supported, voteChallenge, why } from "../webauthn.mjs";

const STATES = ["pending", "approved", "signed", "failed", "rejected", "expired", "cancelled"];

export async function approvals({ api, params, me, go, say }) {
  const state = STATES.includes(params.get("state")) ? params.get("state") : (params.has("state") ? "" : "pending");
  const query = new URLSearchParams({ limit: "100" });
  if (state) query.set("state", state);
  const data = await api("GET", `/approvals?${query}`);
  const role = me.group && me.scopes.includes("approve")
    ? `You approve for the group ${me.group}; you also see the requests this token made.`
    : "You see the requests this token made (an approve token of a group votes on them).";
  const filter = h("form", { class: "bar" },
    h("label", { for: "state" }, "State"),
    h("select", { id: "state" }, h("option", { value: "" }, "all"),
      STATES.map((s) => h("option", { value: s, selected: s === state }, s))));
  filter.querySelector("select").addEventListener("change", (e) => go(`#/approvals?state=${e.target.value}`));
  const list = h("ol", { id: "approvals", class: "cards" },
    data.approvals.map((a) => card(a, me, api, go, say)));
  return h("section", {}, heading("Approvals"), h("p", { class: "hint" }, role), filter,
    data.approvals.length ? list : h("p", { class: "empty" }, `No ${state || ""} request.`));
}

function item(i) {
  const rows = [
    ["Kind", untrusted(i.type)],
    ["To", i.recipient ? h("span", {}, untrusted(i.recipient), i.change ? " (change, back to the sender)" : "") : "—"],
    ["Amount", amounts(i.amounts)],
    ["Memo", i.memo !== undefined ? untrusted(i.memo) : undefined],
  ];
  if (i.ibc) {
    rows.push(["IBC channel", `${i.ibc.port} / ${i.ibc.channel}`],
      ["Timeout height", i.ibc.timeout_height || "none"],
      ["Timeout time", i.ibc.timeout_timestamp ? new Date(Number(BigInt(i.ibc.timeout_timestamp) / 1000000n)).toISOString() : "none"]);
  }
  if (i.decoded === false) rows.push(["Warning", "this part could not be decoded: approve only if you know what it is", { warn: true }]);
  return h("li", { class: i.decoded === false ? "item warn" : "item" }, facts(rows));
}

function message(m) {
  if (!m) return undefined;
  const cut = m.length > m.hex.length / 2 ? ` (first ${m.hex.length / 2} of ${m.length} bytes)` : "";
  return m.text !== undefined
    ? h("span", {}, h("pre", { class: "message" }, untrusted(m.text)), cut)
    : h("span", {}, h("code", { class: "hex" }, m.hex), ` (hex: not printable text)${cut}`);
}

/** Who a label names, as the service counts votes (approvals/service.py `person`): labels
 * that differ only in case or Unicode form are one person, with one vote. */
function person(label) {
  return (label || "").normalize("NFKC").toUpperCase().toLowerCase().trim();
}

function card(a, me, api, go, say) {
  const s = a.summary || {};
  const node = h("li", { class: "approval", dataset: { id: a.id } });
  const votes = (a.votes || []).map((v) => h("li", { class: v.signed ? "signed" : "unsigned" }, untrusted(v.label), ` ${v.decision}d`,
    v.signed ? ` (signed with ${v.signed === "passkey" ? "a passkey" : "a key"})` : (a.passkey ? " (not signed: not counted)" : ""),
    v.reason ? h("span", {}, ": ", untrusted(v.reason)) : ""));
  node.append(
    h("h2", {}, h("span", { class: `state ${a.state}` }, a.state), " ",
      `${a.family} ${a.kind} from `, untrusted(a.account)),
    facts([
      ["Request", h("code", {}, a.id)],
      ["Summary", a.summary_error ? untrusted(a.summary_error) : undefined, { warn: true }],
      ["Network", [s.network, s.chain_id].filter(Boolean).join(" · ") || "—"],
      ["Fee", s.fee === null ? "unknown (an input's amount is missing)" : amounts(s.fee), { warn: s.fee === null }],
      ["Memo", s.memo ? untrusted(s.memo) : undefined],
      ["Message", message(s.message)],
      ["Digest", h("code", {}, a.digest)],
      ["Needs", `${a.required} of ${a.group}${a.passkey ? ", each vote signed with a passkey or key" : ""}`],
      ["Expires", when(a.expires_at)],
      ["Reason", a.reason ? untrusted(a.reason) : undefined, { warn: true }],
    ]),
    h("ol", { class: "items", "aria-label": "What it does" }, (s.items || []).map(item)),
    h("div", { class: "votes" }, h("h3", {}, "Votes"), votes.length ? h("ul", {}, votes) : h("p", {}, "none yet")),
    download(a));
  const mayVote = a.state === "pending" && me.scopes.includes("approve") && me.group === a.group;
  const mine = (a.votes || []).find((v) => person(v.label) === person(me.label));
  if (mayVote && mine) {
    const approvals = a.votes.filter((v) => v.decision === "approve").length;
    node.append(h("p", { class: "voted" }, `You ${mine.decision}d this request`,
      mine.decision === "approve" ? `; it waits for ${a.required - approvals} more approval${a.required - approvals === 1 ? "" : "s"}.` : "."));
  } else if (mayVote) {
    const reason = h("input", { class: "reason", id: `reason-${a.id}`, maxlength: "500" });
    const approve = h("button", { type: "button", class: "approve" }, "Approve");
    const reject = h("button", { type: "button", class: "reject" }, "Reject");
    const decide = async (how) => {
      const body = how === "approve"
        ? { digest: a.digest } // the digest shown on this card: a changed request is refused
        : { reason: reason.value.trim() || undefined };
      approve.disabled = reject.disabled = true;
      try {
        if (a.passkey) body.assertion = await signed(a, how, api);
        const done = await api("POST", `/approvals/${encodeURIComponent(a.id)}/${how}`, body);
        say(`${a.id}: ${how === "approve" ? "approved by you" : "rejected"}; now ${done.state}`);
        go(location.hash || "#/approvals");
      } catch (e) {
        say(`${a.id}: ${e.message}`, true);
        approve.disabled = reject.disabled = false;
      }
    };
    approve.addEventListener("click", () => decide("approve"));
    reject.addEventListener("click", () => decide("reject"));
    node.append(h("div", { class: "actions" }, approve,
      h("label", { for: `reason-${a.id}` }, "Reason to reject (optional)"), reason, reject));
  }
  if (a.cancellable) node.append(canceller(a, api, go, say));
  return node;
}

/** The passkey's assertion over this request, the summary this card shows and the
 * decision: the challenge the API gives must be the one computed here from them. */
async function signed(a, how, api) {
  if (!supported()) throw new Error("this browser cannot use passkeys here (WebAuthn needs https, or http://localhost)");
  const options = await api("GET", `/approvals/${encodeURIComponent(a.id)}/challenge?decision=${how}`);
  const mine = await voteChallenge(a.id, a.digest, a.summary ?? null, how);
  if (options.challenge !== mine || canonical(options.summary ?? null) !== canonical(a.summary ?? null)) {
    throw new Error("not signed: the request changed since this page showed it; reload and look again");
  }
  delete options.summary; // not a WebAuthn option
  try {
    return await get(options);
  } catch (e) {
    throw new Error(`not signed: ${why(e)}`);
  }
}

/** The approval as `GET /approvals/{id}` gives it, to check away from this page:
 * `chainkeys approval verify FILE`, or the client packages' verifiers. */
function download(a) {
  const { cancellable, ...approval } = a; // the caller's own, not the approval's
  const link = h("button", { type: "button", class: "download" }, "Download to verify elsewhere");
  link.addEventListener("click", () => {
    const url = URL.createObjectURL(new Blob([JSON.stringify(approval, null, 1)], { type: "application/json" }));
    const save = h("a", { href: url, download: `${a.id}.json` });
    save.click();
    setTimeout(() => URL.revokeObjectURL(url), 10_000);
  });
  return h("p", { class: "verify hint" }, link,
    " then, on another machine, run ", h("code", {}, `chainkeys approval verify ${a.id}.json`),
    " or the client packages' verify_approval / verifyApproval: each decodes the raw request itself and names any difference from what this page shows.");
}

/** The requester's own pending request: withdraw it (nothing is signed, votes end). */
function canceller(a, api, go, say) {
  const cancel = h("button", { type: "button", class: "cancel" }, "Cancel this request");
  cancel.addEventListener("click", async () => {
    cancel.disabled = true;
    try {
      const done = await api("POST", `/approvals/${encodeURIComponent(a.id)}/cancel`);
      say(`${a.id}: cancelled by you; now ${done.state}`);
      go(location.hash || "#/approvals");
    } catch (e) {
      say(`${a.id}: ${e.message}`, true);
      cancel.disabled = false;
    }
  });
  return h("div", { class: "actions requester" },
    h("span", { class: "hint" }, "You made this request."), cancel);
}

