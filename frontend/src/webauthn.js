// The browser's WebAuthn calls for the security-key ceremonies. The server speaks JSON with
// binary fields in unpadded base64url; the browser wants ArrayBuffers in and gives them out.
// Nothing else happens here: what to ask for and what the answer is for are the Rust side's.

function bytes(text) {
  const b64 = text.replace(/-/g, "+").replace(/_/g, "/");
  const padded = b64 + "===".slice((b64.length + 3) % 4);
  return Uint8Array.from(atob(padded), (c) => c.charCodeAt(0));
}

function text(buffer) {
  let s = "";
  for (const b of new Uint8Array(buffer)) {
    s += String.fromCharCode(b);
  }
  return btoa(s).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

export async function createCredential(optionsJson) {
  const o = JSON.parse(optionsJson).publicKey;
  o.challenge = bytes(o.challenge);
  o.user.id = bytes(o.user.id);
  (o.excludeCredentials || []).forEach((c) => { c.id = bytes(c.id); });
  const cred = await navigator.credentials.create({ publicKey: o });
  return JSON.stringify({
    id: cred.id,
    rawId: text(cred.rawId),
    type: cred.type,
    response: {
      attestationObject: text(cred.response.attestationObject),
      clientDataJSON: text(cred.response.clientDataJSON),
      transports: cred.response.getTransports ? cred.response.getTransports() : [],
    },
    extensions: cred.getClientExtensionResults(),
  });
}

export async function getAssertion(optionsJson) {
  const o = JSON.parse(optionsJson).publicKey;
  o.challenge = bytes(o.challenge);
  (o.allowCredentials || []).forEach((c) => { c.id = bytes(c.id); });
  const cred = await navigator.credentials.get({ publicKey: o });
  const r = cred.response;
  return JSON.stringify({
    id: cred.id,
    rawId: text(cred.rawId),
    type: cred.type,
    response: {
      authenticatorData: text(r.authenticatorData),
      clientDataJSON: text(r.clientDataJSON),
      signature: text(r.signature),
      userHandle: r.userHandle ? text(r.userHandle) : null,
    },
    extensions: cred.getClientExtensionResults(),
  });
}
