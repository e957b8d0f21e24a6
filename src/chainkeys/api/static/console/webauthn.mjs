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

/** A new passkey for creation options: the registration response JSON. */
export async function create(options) {
  return toJSON(await navigator.credentials.create({ publicKey: creationOptions(options) }));
}

/** An assertion for request options: the authentication response JSON. */
export async function get(options) {
  return toJSON(await navigator.credentials.get({ publicKey: requestOptions(options) }));
}

/** What a person reads when the browser's ceremony ends without a credential. */
export function why(e) {
  if (e && e.name === "NotAllowedError") return "the passkey prompt was cancelled or timed out";
  if (e && e.name === "InvalidStateError") return "this passkey is enrolled already";
  if (e && e.name === "SecurityError") return "this page's address is not the one passkeys are bound to (CHAINKEYS_PUBLIC_URL)";
  return e && e.message ? e.message : String(e);
}
