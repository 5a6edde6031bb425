//! The browser's security-key ceremonies (`webauthn.js`): registering a key and answering a
//! challenge. Each takes the server's options as JSON and gives back the browser's credential
//! as JSON, for the server to check.

use wasm_bindgen::prelude::*;

#[wasm_bindgen(module = "/src/webauthn.js")]
extern "C" {
    #[wasm_bindgen(catch, js_name = createCredential)]
    async fn create_credential(options: &str) -> Result<JsValue, JsValue>;
    #[wasm_bindgen(catch, js_name = getAssertion)]
    async fn get_assertion(options: &str) -> Result<JsValue, JsValue>;
}

/// What the browser said when a ceremony did not finish: the person cancelled, timed out, or
/// has no key the server knows.
fn why(e: JsValue) -> String {
    let name = js_sys::Reflect::get(&e, &"name".into())
        .ok()
        .and_then(|n| n.as_string())
        .unwrap_or_default();
    match name.as_str() {
        "NotAllowedError" => {
            "the security key was not used (cancelled, timed out, or not one of yours)".into()
        }
        "InvalidStateError" => "this key is registered already".into(),
        "SecurityError" => "this page's address cannot use security keys".into(),
        _ => e
            .as_string()
            .or_else(|| {
                js_sys::Reflect::get(&e, &"message".into())
                    .ok()
                    .and_then(|m| m.as_string())
            })
            .unwrap_or_else(|| "the browser could not use a security key".into()),
    }
}

/// Creates a credential for the server's registration `options` (JSON); the browser's
/// answer, JSON.
pub async fn create(options: &str) -> Result<String, String> {
    let v = create_credential(options).await.map_err(why)?;
    v.as_string().ok_or_else(|| "no credential".into())
}

/// Answers the server's challenge `options` (JSON) with one of the person's keys; the
/// assertion, JSON.
pub async fn assert(options: &str) -> Result<String, String> {
    let v = get_assertion(options).await.map_err(why)?;
    v.as_string().ok_or_else(|| "no assertion".into())
}
