// Passkeys: an approver (or an admin) enrols a passkey with an operator's one-time code
// (chainkeys approver invite, or admin invite), sees their passkeys and script keys,
// and removes one. A rule that says "passkey": true counts a vote only signed by one of
// them; an admin's signs their votes on governance changes. Everything is a form
// or a button: Tab and Enter work, nothing needs a mouse.
import { h, heading, table, untrusted, when } from "../dom.mjs";
import { create, supported, why } from "../webauthn.mjs";

export async function passkeys({ api, go, say }) {
  const data = await api("GET", "/approvers/me/credentials");
  const code = h("input", { id: "enrol-code", name: "code", autocomplete: "off", spellcheck: "false", maxlength: "100", required: true });
  const submit = h("button", { type: "submit", id: "enrol" }, "Register a passkey");
  const form = h("form", { id: "enrol-form", class: "bar" },
    h("label", { for: "enrol-code" }, "Enrolment code"), code, submit);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const value = code.value.trim();
    if (!value) return;
    if (!supported()) return say("This browser cannot use passkeys here (WebAuthn needs https, or http://localhost).", true);
    submit.disabled = true;
    try {
      const options = await api("POST", "/approvers/me/credentials/options", { code: value });
      let credential;
      try {
        credential = await create(options);
      } catch (e) {
        throw new Error(`no passkey was made: ${why(e)}`);
      }
      const made = await api("POST", "/approvers/me/credentials", { code: value, credential });
      code.value = "";
      say(`Passkey ${made.id} enrolled: your votes can now be signed with it.`);
      go("#/passkeys");
    } catch (e) {
      say(e.message, true);
      submit.disabled = false;
    }
  });
  const rows = data.credentials.map((c) => {
    const remove = c.revoked_at ? "revoked" : h("button", { type: "button", class: "remove", dataset: { id: c.id } }, "Remove");
    if (!c.revoked_at) {
      remove.addEventListener("click", async () => {
        remove.disabled = true;
        try {
          await api("DELETE", `/approvers/me/credentials/${encodeURIComponent(c.id)}`);
          say(`${c.id} removed: its signatures count no more.`);
          go("#/passkeys");
        } catch (e) {
          say(e.message, true);
          remove.disabled = false;
        }
      });
    }
    return [h("code", {}, c.id), c.kind === "webauthn" ? "passkey" : `${c.kind} key`, untrusted(c.group),
      when(c.created_at), c.last_used_at ? when(c.last_used_at) : "never", remove];
  });
  return h("section", {}, heading("Passkeys"),
    h("p", { class: "hint" }, "Requests whose rule asks for passkeys count your vote only when your passkey (or an enrolled script key) signs it. ",
      "An admin's passkey signs their votes on the Changes page. ",
      "An operator gives you a one-time code (chainkeys approver invite, or chainkeys admin invite for an admin; valid 15 minutes)."),
    form,
    data.credentials.length
      ? table("Your passkeys and keys", ["Id", "Kind", "Group", "Enrolled", "Last used", ""], rows, { class: "list credentials" })
      : h("p", { class: "empty" }, "No passkey yet."));
}
