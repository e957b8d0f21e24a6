// The approver page: paste a token, see what waits for your group, approve or reject.
// Everything the service returns is shown with textContent (a memo or a recipient is
// data, never markup); the token lives in this tab's sessionStorage only.
"use strict";
(() => {
  const KEY = "chainkeys.token";
  const $ = (id) => document.getElementById(id);
  let me = null;

  const token = () => sessionStorage.getItem(KEY);

  async function call(method, path, body) {
    const init = {
      method, cache: "no-store", credentials: "omit", referrerPolicy: "no-referrer",
      headers: { Authorization: token() },
    };
    if (body !== undefined) {
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    let response;
    try {
      response = await fetch(path, init);
    } catch {
      throw Object.assign(new Error("the service cannot be reached"), { status: 0 });
    }
    let json;
    try {
      json = await response.json();
    } catch {
      throw Object.assign(new Error(`HTTP ${response.status}`), { status: response.status });
    }
    if (!json.success) {
      throw Object.assign(new Error(json.message || `HTTP ${response.status}`),
        { status: response.status, code: json.code });
    }
    return json.data;
  }

  function say(text, error = false) {
    $("message").textContent = text;
    $("message").className = error ? "error" : "";
  }

  function signedIn(on) {
    $("board").hidden = !on;
    $("token").hidden = on;
    $("use").hidden = on;
    $("forget").hidden = !on;
    document.querySelector("label[for=token]").hidden = on;
  }

  async function start() {
    if (!token()) {
      signedIn(false);
      return;
    }
    try {
      me = await call("GET", "/tokens/self");
    } catch (e) {
      if (e.status === 401) sessionStorage.removeItem(KEY);
      signedIn(false);
      $("who").textContent = `That token was not accepted: ${e.message}`;
      return;
    }
    const role = me.group
      ? `approver in group ${me.group}`
      : "not an approver: you see the requests this token made";
    $("who").textContent = `${me.label || "(no label)"} of tenant ${me.tenant}, ${role}`;
    signedIn(true);
    await load();
  }

  async function load() {
    const state = $("state").value;
    const query = new URLSearchParams({ limit: "100" });
    if (state) query.set("state", state);
    try {
      const data = await call("GET", `/approvals?${query}`);
      render(data.approvals);
      say(`${data.approvals.length} shown at ${new Date().toLocaleTimeString()}`);
    } catch (e) {
      say(e.message, true);
    }
  }

  const amounts = (list) => (list && list.length
    ? list.map((a) => `${a.amount} ${a.denom}`).join(", ") : "—");

  function fact(dl, term, value, warn = false) {
    const dt = document.createElement("dt");
    dt.textContent = term;
    const dd = document.createElement("dd");
    dd.textContent = value;
    if (warn) dd.className = "warn";
    dl.append(dt, dd);
  }

  function render(approvals) {
    const list = $("approvals");
    list.replaceChildren();
    $("empty").hidden = approvals.length > 0;
    for (const a of approvals) list.append(card(a));
  }

  function card(a) {
    const node = $("card").content.firstElementChild.cloneNode(true);
    const s = a.summary || {};
    node.dataset.id = a.id;
    node.querySelector(".state").textContent = a.state;
    node.querySelector(".state").classList.add(a.state);
    node.querySelector(".what").textContent = `${a.family} ${a.kind} from ${a.account}`;
    const dl = node.querySelector(".facts");
    fact(dl, "request", a.id);
    fact(dl, "network", [s.network, s.chain_id].filter(Boolean).join(" · ") || "—");
    fact(dl, "fee", s.fee === null ? "unknown" : amounts(s.fee), s.fee === null);
    if (s.memo) fact(dl, "memo", s.memo);
    fact(dl, "digest", a.digest);
    fact(dl, "needs", `${a.required} of ${a.group}`);
    fact(dl, "expires", a.expires_at);
    if (a.reason) fact(dl, "reason", a.reason, true);
    const body = node.querySelector(".items tbody");
    for (const item of s.items || []) {
      const row = body.insertRow();
      const recipient = item.recipient + (item.change ? " (change)" : "");
      const cells = [item.type, recipient, amounts(item.amounts), item.memo || ""];
      for (const text of cells) row.insertCell().textContent = text;
      if (item.decoded === false) {
        row.className = "warn";
        row.cells[0].textContent += " (not decoded)";
      }
    }
    const votes = (a.votes || []).map((v) => `${v.label} ${v.decision}d` + (v.reason ? ` (${v.reason})` : ""));
    node.querySelector(".votes").textContent = `Votes: ${votes.length ? votes.join("; ") : "none yet"}`;
    const mayVote = a.state === "pending" && me && me.scopes.includes("approve");
    node.querySelector(".actions").hidden = !mayVote;
    node.querySelector(".approve").addEventListener("click", () => decide(a, "approve", node));
    node.querySelector(".reject").addEventListener("click", () => decide(a, "reject", node));
    return node;
  }

  async function decide(a, how, node) {
    const body = how === "approve"
      ? { digest: a.digest } // the digest shown on this card: a changed request is refused
      : { reason: node.querySelector(".reason").value.trim() || undefined };
    for (const b of node.querySelectorAll("button")) b.disabled = true;
    try {
      const done = await call("POST", `/approvals/${encodeURIComponent(a.id)}/${how}`, body);
      await load();
      say(`${a.id}: ${how === "approve" ? "approved by you" : "rejected"}; now ${done.state}`);
    } catch (e) {
      say(`${a.id}: ${e.message}`, true);
      for (const b of node.querySelectorAll("button")) b.disabled = false;
    }
  }

  $("use").addEventListener("click", () => {
    const value = $("token").value.trim();
    $("token").value = "";
    if (!value) return;
    sessionStorage.setItem(KEY, value.startsWith("Bearer ") ? value.slice(7) : value);
    start();
  });
  $("token").addEventListener("keydown", (e) => { if (e.key === "Enter") $("use").click(); });
  $("forget").addEventListener("click", () => {
    sessionStorage.removeItem(KEY);
    me = null;
    $("approvals").replaceChildren();
    $("who").textContent = "Token forgotten. Paste an approve token to start.";
    signedIn(false);
  });
  $("refresh").addEventListener("click", load);
  $("state").addEventListener("change", load);
  start();
})();
