//! The approved spec on a session's page: what activation will create (a summary, the objects
//! as YAML), what the cluster said on a dry run, and the hash the approval binds. Shown where
//! decisions are taken, so an approver approves objects, not a sentence.

use breakglass_shared::session::SessionSpec;
use breakglass_shared::{Session, SessionState};
use leptos::prelude::*;

use crate::components::common::dynv;

/// The spec card of a session, or nothing for a request made before specs existed.
#[component]
pub fn SpecCard(
    /// The session, kept current by the page.
    session: Memo<Option<Session>>,
) -> impl IntoView {
    // The spec never changes after the request: rebuilt only when it appears, or when the
    // session moves past the point where its objects were to be created.
    let spec = Memo::new(move |_| {
        session.with(|s| {
            s.as_ref().and_then(|s| {
                let title = match s.state {
                    SessionState::PendingApproval | SessionState::Approved => {
                        "What activation will create"
                    }
                    SessionState::Denied | SessionState::Expired | SessionState::Withdrawn => {
                        "What activation would have created"
                    }
                    _ => "The approved spec: what activation creates",
                };
                s.spec.clone().map(|sp| (sp, title))
            })
        })
    });
    dynv(move || {
        spec.get()
            .map(|(sp, title)| view! { <SpecView sp=sp title=title/> })
    })
}

#[component]
fn SpecView(
    /// The spec shown.
    sp: SessionSpec,
    /// The card's heading, by where the session stands.
    title: &'static str,
) -> impl IntoView {
    let sum = sp.summary.clone();
    let (verdict_class, verdict) = match sp.dry_run.admitted {
        Some(true) => (
            "spec-verdict spec-admitted",
            "The cluster would admit the grant (dry run)",
        ),
        Some(false) => (
            "spec-verdict spec-refused",
            "The cluster would refuse it (dry run): activation will fail",
        ),
        None => (
            "spec-verdict spec-unchecked",
            "The cluster could not be asked (dry run)",
        ),
    };
    let access = match (&sum.target_container, sum.process_access) {
        (Some(c), true) => format!("sees the processes of {c} (SYS_PTRACE)"),
        (Some(c), false) => format!("beside {c}"),
        (None, _) => "no process access".to_string(),
    };
    let yaml = sp
        .yaml()
        .unwrap_or_else(|| "The stored document is not readable.".into());
    view! {
        <section class="card spec" aria-labelledby="spec-title" data-testid="session-spec">
            <h2 id="spec-title">{title}</h2>
            <p class=verdict_class data-testid="spec-verdict">{verdict}</p>
            <ul class="spec-lines">
                {sp.dry_run.lines.iter().map(|l| view! { <li>{l.clone()}</li> }).collect_view()}
            </ul>
            <dl class="facts">
                <dt>"Creates"</dt><dd>{format!("a grant, then {}", sum.creates)}</dd>
                <dt>"Debug image"</dt><dd><code class="spec-image">{sum.image.clone()}</code></dd>
                <dt>"Role"</dt><dd><code>{sum.role.clone()}</code>" bound to "<code>{sum.subject.clone()}</code></dd>
                <dt>"Process access"</dt><dd>{access}</dd>
                <dt>"Privileged"</dt><dd>{if sum.privileged { "yes: the policies refuse this" } else { "no, and no privilege escalation" }}</dd>
                <dt>"Time to live"</dt><dd>{format!("{} min", sum.ttl_minutes)}</dd>
                <dt>"Pod UID"</dt><dd><code>{sum.pod_uid.clone()}</code></dd>
                <dt>"Spec SHA-256"</dt>
                <dd><code data-testid="spec-sha256" title=sp.sha256.clone()>{sp.sha256.clone()}</code></dd>
            </dl>
            <p class="muted small">"Approving approves exactly these objects: activation renders them again and refuses to go on if anything differs (the image pin, the pod, the server's identity)."</p>
            <details class="spec-yaml">
                <summary>"The objects, as YAML"</summary>
                // Focusable, so the keyboard can scroll it.
                <pre data-testid="spec-yaml" tabindex="0" aria-label="The objects, as YAML">{yaml}</pre>
            </details>
        </section>
    }
}
