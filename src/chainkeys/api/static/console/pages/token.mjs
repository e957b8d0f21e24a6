// Token: who am I. Never the token itself (the service keeps only a keyed hash).
import { facts, h, heading, untrusted, when } from "../dom.mjs";

export async function token({ me }) {
  return h("section", {}, heading("This token"),
    facts([
      ["Tenant", untrusted(me.tenant)],
      ["Label", me.label ? untrusted(me.label) : "(none)"],
      ["Id", h("code", {}, me.id)],
      ["Scopes", me.scopes.join(", ")],
      ["Families", me.families ? me.families.join(", ") : "every family"],
      ["Approver group", me.group ? untrusted(me.group) : "none"],
      ["Created", when(me.created_ms)],
      ["Expires", me.expires_ms ? when(me.expires_ms) : "never"],
    ]),
    h("p", { class: "hint" }, "Tokens are made and revoked by an operator (chainkeys token create / revoke)."));
}
