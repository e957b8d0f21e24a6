// WebAuthn in its JSON forms, as the API speaks it (py_webauthn's options_to_json in,
// PublicKeyCredential.toJSON() out). Browsers that lack the JSON helpers get the same
// conversion done here: base64url for every binary field, nothing else changed.

const b64 = {
  decode(text) {
    const s = text.replace(/-/g, "+").replace(/_/g, "/");
    return Uint8Array.from(atob(s + "===".slice((s.length + 3) % 4)), (c) => c.charCodeAt(0)).buffer;
  },
  encode(buffer) {
    let s = "";
    for (const byte of new Uint8Array(buffer)) s += String.fromCharCode(byte);
    return btoa(s).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  },
};

export const supported = () => typeof window.PublicKeyCredential === "function" && window.isSecureContext;

const descriptors = (list) => (list || []).map((d) => ({ ...d, id: b64.decode(d.id) }));

function creationOptions(json) {
  if (PublicKeyCredential.parseCreationOptionsFromJSON) return PublicKeyCredential.parseCreationOptionsFromJSON(json);
  return { ...json, challenge: b64.decode(json.challenge), user: { ...json.user, id: b64.decode(json.user.id) },
    excludeCredentials: descriptors(json.excludeCredentials) };
}

function requestOptions(json) {
  if (PublicKeyCredential.parseRequestOptionsFromJSON) return PublicKeyCredential.parseRequestOptionsFromJSON(json);
  return { ...json, challenge: b64.decode(json.challenge), allowCredentials: descriptors(json.allowCredentials) };
}

function toJSON(credential) {
  if (typeof credential.toJSON === "function") return credential.toJSON();
  const r = credential.response;
  const response = { clientDataJSON: b64.encode(r.clientDataJSON) };
  if (r.attestationObject) {
    response.attestationObject = b64.encode(r.attestationObject);
    response.transports = r.getTransports ? r.getTransports() : [];
  } else {
    response.authenticatorData = b64.encode(r.authenticatorData);
    response.signature = b64.encode(r.signature);
    if (r.userHandle) response.userHandle = b64.encode(r.userHandle);
  }
  return { id: credential.id, rawId: b64.encode(credential.rawId), type: credential.type,
    authenticatorAttachment: credential.authenticatorAttachment || undefined,
    clientExtensionResults: credential.getClientExtensionResults(), response };
}

/** Why a passkey cannot be made or used on this page when its address is not the host
 * passkeys are bound to (the RP id: CHAINKEYS_PUBLIC_URL's host), in words that say
 * where to go; null when it is. Said before the browser's prompt, whose own refusal
 * ("SecurityError") names neither address. Browsers never bind a passkey to an IP
 * address, so a console opened at http://127.0.0.1 must be opened at localhost. */
export function wrongPlace(rpId, here = location.hostname) {
  if (!rpId || here === rpId || here.endsWith(`.${rpId}`)) return null;
  const ip = /^[0-9.]+$/.test(here) || here.includes(":") || here.startsWith("[");
  const hint = ip ? ` (browsers never allow passkeys on an IP address such as ${here}: use a name, such as localhost)` : "";
  return `this page is at ${here}, but passkeys here are bound to ${rpId} (CHAINKEYS_PUBLIC_URL): open the console at ${rpId}${hint}`;
}

function atTheRightPlace(rpId) {
  const wrong = wrongPlace(rpId);
  if (wrong) throw Object.assign(new Error(wrong), { name: "WrongPlace" });
}

/** A new passkey for creation options: the registration response JSON. */
export async function create(options) {
  atTheRightPlace(options.rp && options.rp.id);
  return toJSON(await navigator.credentials.create({ publicKey: creationOptions(options) }));
}

/** An assertion for request options: the authentication response JSON. */
export async function get(options) {
  atTheRightPlace(options.rpId);
  return toJSON(await navigator.credentials.get({ publicKey: requestOptions(options) }));
}

/** A summary's canonical JSON: keys sorted, no whitespace (the server's
 * approvals/proofs.py `canonical`; TextEncoder makes it UTF-8). */
export function canonical(value) {
  if (Array.isArray(value)) return `[${value.map(canonical).join(",")}]`;
  if (value && typeof value === "object") {
    return `{${Object.keys(value).sort().map((k) => `${JSON.stringify(k)}:${canonical(value[k])}`).join(",")}}`;
  }
  return JSON.stringify(value === undefined ? null : value);
}

const hex = (buffer) => [...new Uint8Array(buffer)].map((b) => b.toString(16).padStart(2, "0")).join("");

/** The challenge of a vote, base64url: SHA-256("chainkeys approval v2" || id || digest
 * || hex SHA-256(canonical summary JSON) || decision), computed here from what the
 * page shows, so a passkey signs the summary a person read. */
export async function voteChallenge(id, digest, summary, decision) {
  const utf8 = new TextEncoder();
  const shown = hex(await crypto.subtle.digest("SHA-256", utf8.encode(canonical(summary))));
  const parts = utf8.encode(`chainkeys approval v2${id}${digest}${shown}${decision}`);
  return b64.encode(await crypto.subtle.digest("SHA-256", parts));
}

/** The challenge of an admin's vote on a governance change, base64url: SHA-256("chainkeys
 * change v1" || id || digest || decision) (approvals/proofs.py `change_challenge`). */
export async function changeChallenge(id, digest, decision) {
  const parts = new TextEncoder().encode(`chainkeys change v1${id}${digest}${decision}`);
  return b64.encode(await crypto.subtle.digest("SHA-256", parts));
}

/** What a person reads when the browser's ceremony ends without a credential. */
export function why(e) {
  if (e && e.name === "NotAllowedError") return "the passkey prompt was cancelled or timed out";
  if (e && e.name === "InvalidStateError") return "this passkey is enrolled already";
  if (e && e.name === "SecurityError") return "this page's address is not the one passkeys are bound to (CHAINKEYS_PUBLIC_URL; browsers refuse passkeys on an IP address such as 127.0.0.1: open the console at localhost)";
  return e && e.message ? e.message : String(e);
}
