//! Whether what is played is what was recorded: the badge, the checks behind it, and the
//! download of the `.cast` itself.

use breakglass_shared::recording::VerifyResult;
use leptos::prelude::*;
use uuid::Uuid;
use wasm_bindgen_futures::JsFuture;

use super::state::PlayerState;
use crate::api;
use crate::cast::{CastIndex, KEYFRAME_BYTES};
use crate::components::common::dynv;
use crate::components::session_panel::live_detail;
use crate::fetch::Fetch;

/// What the integrity badge says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Integrity {
    /// The bytes played hash to the hash on record, and the server's checks pass.
    Verified,
    /// Something differs; what.
    Mismatch(String),
    /// The session is still running: the recording grows.
    InProgress,
    /// Cannot tell; why.
    Unknown(String),
}

/// Decides the badge from the hash of the played bytes, the hash on the session row, whether
/// the session is finished, and the server's verification (`Ok(passed)`, or why it is missing).
pub fn integrity(
    played: Option<&str>,
    on_record: Option<&str>,
    finished: bool,
    server: Option<Result<bool, String>>,
) -> Integrity {
    if !finished {
        return Integrity::InProgress;
    }
    if let Some(Ok(false)) = server {
        return Integrity::Mismatch("the server's integrity checks failed".into());
    }
    match (played, on_record) {
        (Some(p), Some(r)) if p.eq_ignore_ascii_case(r) => match server {
            Some(Err(why)) => Integrity::Unknown(format!(
                "the hash matches the record, but the server's checks are unavailable: {why}"
            )),
            _ => Integrity::Verified,
        },
        (Some(_), Some(_)) => {
            Integrity::Mismatch("what you are watching differs from the hash on record".into())
        }
        (_, None) => Integrity::Unknown("no hash is on record for this session".into()),
        (None, _) => Integrity::Unknown("this browser could not hash the recording".into()),
    }
}

/// SHA-256 of `bytes` in hex, by the browser (None where SubtleCrypto is unavailable).
pub async fn sha256_hex(bytes: &[u8]) -> Option<String> {
    let subtle = web_sys::window()?.crypto().ok()?.subtle();
    let promise = subtle.digest_with_str_and_u8_array("SHA-256", bytes).ok()?;
    let digest = JsFuture::from(promise).await.ok()?;
    let digest = js_sys::Uint8Array::new(&digest).to_vec();
    Some(digest.iter().map(|b| format!("{b:02x}")).collect())
}

/// The badge: verified, not verified, in progress or unverified; short of verified, the reason
/// is shown next to it.
#[component]
pub fn IntegrityBadge(
    /// The session (its state and the hash on record).
    id: Uuid,
    /// The server's verification of the stored recording.
    verify: Fetch<VerifyResult>,
    /// The player (the hash of what it plays).
    player: PlayerState,
) -> impl IntoView {
    let (_, session) = live_detail(id);
    let badge = move || {
        let s = session.get();
        let finished = s.as_ref().is_some_and(|s| s.state.is_final());
        let on_record = s
            .as_ref()
            .and_then(|s| s.recording.as_ref().map(|r| r.sha256.clone()));
        let server = verify.get().map(|r| r.map(|v| v.ok).map_err(|e| e.message));
        integrity(
            player.played_hash().as_deref(),
            on_record.as_deref(),
            finished,
            server,
        )
    };
    dynv(move || {
        let (class, text, title) = match badge() {
            Integrity::Verified => (
                "badge badge-ok",
                "Verified".to_string(),
                "The bytes played hash to the SHA-256 on record and the server's checks pass."
                    .to_string(),
            ),
            Integrity::Mismatch(why) => ("badge badge-bad", "Not verified".to_string(), why),
            Integrity::InProgress => (
                "badge",
                "In progress".to_string(),
                "The session is still running: the recording grows until it ends.".to_string(),
            ),
            Integrity::Unknown(why) => ("badge", "Unverified".to_string(), why),
        };
        // Anything short of verified says why on the page, not only in a tooltip.
        let why = (text != "Verified").then(|| title.clone());
        view! {
            <span class=class title=title data-testid="integrity">{text}</span>
            {why.map(|w| view! { <span class="muted small integrity-why" data-testid="integrity-why">{w}</span> })}
        }
    })
}

/// The link that downloads the recording as a `.cast` file.
#[component]
pub fn DownloadLink(
    /// The session.
    id: Uuid,
) -> impl IntoView {
    // Only where something was recorded: a session that never ran has no file.
    let (_, session) = live_detail(id);
    let recorded = move || session.with(|s| s.as_ref().is_some_and(|s| s.recording.is_some()));
    view! {
        <Show when=recorded>
            <a class="button-link" href=api::recording_download_url(id) download=format!("session-{id}.cast")>"Download .cast"</a>
            <EvidenceLink id=id/>
        </Show>
    }
}

/// The link that downloads the session's evidence bundle: a tar an auditor checks offline with
/// the commands of the VERIFY.md inside it.
#[component]
pub fn EvidenceLink(
    /// The session.
    id: Uuid,
) -> impl IntoView {
    view! {
        <a class="button-link" href=api::evidence_url(id) download=format!("evidence-{id}.tar")
            data-testid="evidence-download"
            title="The row, its events, the approved spec, the recording and its transparency-log entry, with a VERIFY.md to check them offline">
            "Download evidence (.tar)"
        </a>
    }
}

/// The server's checks, one per line, then what this browser saw: the index and the hash.
#[component]
pub fn ChecksDetail(
    /// The server's verification of the stored recording.
    verify: Fetch<VerifyResult>,
    /// The player (its index and hash).
    player: PlayerState,
) -> impl IntoView {
    let checks = move || {
        verify
            .get()
            .and_then(Result::ok)
            .map(|v| v.checks)
            .unwrap_or_default()
    };
    view! {
        <details class="checks-detail">
            <summary>"Integrity checks"</summary>
            <ul class="checks">
                {dynv(move || checks().into_iter().map(|c| {
                    let (class, icon) = match c.outcome.as_str() {
                        "pass" => ("check check-ok", "✓"),
                        "fail" => ("check check-bad", "✗"),
                        _ => ("check", "–"),
                    };
                    view! {
                        <li class=class>
                            <span class="check-icon" aria-hidden="true">{icon}</span>
                            <span class="check-name">{c.name}</span>
                            <span class="check-status">{c.outcome}</span>
                            <span class="muted small">{c.detail}</span>
                        </li>
                    }
                }).collect_view())}
            </ul>
            {dynv(move || verify.get().and_then(Result::err).map(|e| view! {
                <p class="muted small">"Server verification unavailable: " {e.message}</p>
            }))}
            {dynv(move || player.with_index(stats).map(|s| view! { <p class="muted small">{s}</p> }))}
            {dynv(move || player.played_hash().map(|h| view! {
                <p class="muted small">"SHA-256 of what you are watching: " <code>{h}</code></p>
            }))}
        </details>
    }
}

/// What the index holds, and what a seek costs at most.
fn stats(index: &CastIndex) -> String {
    format!(
        "{}{} events, {} KB of output, {} keyframes (seeks replay at most {} KB).",
        index
            .header()
            .title
            .as_ref()
            .map(|t| format!("“{t}”: "))
            .unwrap_or_default(),
        index.events().len(),
        index.output_bytes() / 1024,
        index.keyframe_count(),
        KEYFRAME_BYTES / 1024
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integrity_badge() {
        let server_ok = Some(Ok(true));
        assert_eq!(
            integrity(Some("AB"), Some("ab"), true, server_ok.clone()),
            Integrity::Verified
        );
        assert_eq!(
            integrity(Some("ab"), Some("ab"), false, server_ok.clone()),
            Integrity::InProgress
        );
        assert!(matches!(
            integrity(Some("ab"), Some("cd"), true, server_ok),
            Integrity::Mismatch(_)
        ));
        assert!(matches!(
            integrity(Some("ab"), Some("ab"), true, Some(Ok(false))),
            Integrity::Mismatch(_)
        ));
        assert!(matches!(
            integrity(Some("ab"), Some("ab"), true, Some(Err("404".into()))),
            Integrity::Unknown(_)
        ));
        assert!(matches!(
            integrity(None, Some("ab"), true, None),
            Integrity::Unknown(_)
        ));
        assert!(matches!(
            integrity(Some("ab"), None, true, None),
            Integrity::Unknown(_)
        ));
    }
}
