//! The deny step: the reason (shown to the requester), checked before it is sent; and, when
//! someone else decided the request meanwhile, who did, with the reason kept to copy.

use breakglass_shared::validate;
use breakglass_shared::{Session, SessionState};
use leptos::prelude::*;
use leptos::task::spawn_local;

use super::{after_change, Ctx, DenyDrafts};
use crate::api;
use crate::components::common::{dynv, focus_soon};

/// `carol approved this at 10:42`: who decided a request while the reader was denying it.
fn decided_elsewhere(s: &Session) -> String {
    let what = match (s.state, &s.glass_broken_by, &s.approver) {
        (SessionState::Denied, _, Some(by)) => format!("{by} denied this"),
        (SessionState::Withdrawn, _, _) => format!("{} withdrew this", s.requester),
        (SessionState::Expired, None, None) => "This expired".to_string(),
        (_, Some(by), _) => format!("{by} broke the glass on this"),
        (_, None, Some(by)) => format!("{by} approved this"),
        _ => "Someone else decided this".to_string(),
    };
    let at = s.decided_at.or(s.ending_at).or(s.finished_at).map(|at| {
        let d = js_sys::Date::new(&wasm_bindgen::JsValue::from_f64(
            at.unix_timestamp() as f64 * 1000.0,
        ));
        format!(" at {:02}:{:02}", d.get_hours(), d.get_minutes())
    });
    format!(
        "{what}{}. Your reason was not sent; it stays here so you can copy it.",
        at.unwrap_or_default()
    )
}

/// The deny form of one request. The reason is the draft in [`DenyDrafts`], typed into and
/// read back from there.
#[component]
pub(super) fn DenyForm(
    ctx: Ctx,
    /// The request.
    session: Session,
    /// Someone else decided it while the reason was typed: no Deny button, a note instead.
    overtaken: bool,
    drafts: DenyDrafts,
) -> impl IntoView {
    let Ctx {
        id,
        live,
        busy,
        decisions,
        who,
        ..
    } = ctx;
    let deny_error = RwSignal::new(None::<String>);
    let submit = move || {
        let reason = drafts.get_untracked(id).unwrap_or_default();
        if let Err(e) = validate::note("reason", &reason, true) {
            deny_error.set(Some(format!("A reason {}", e.message)));
            return;
        }
        deny_error.set(None);
        busy.set(true);
        let who = who.get_value();
        spawn_local(async move {
            match api::deny(id, reason.trim()).await {
                Ok(s) => {
                    // Before the new version arrives, or the form would stay as overtaken.
                    drafts.remove(id);
                    live.upsert(s);
                    after_change(decisions, id, Some(format!("You denied {who}.")));
                }
                Err(e) => {
                    // The form may be gone by now (see `Ctx::run`).
                    deny_error.try_set(Some(e.message));
                }
            }
            busy.try_set(false);
        });
    };
    let deny_id = format!("deny-{id}");
    let err_id = format!("{deny_id}-error");
    // Keyboard users land in the reason field.
    let field = NodeRef::<leptos::html::Textarea>::new();
    field.on_load(|el| {
        let _ = el.focus();
    });
    let decided_note = overtaken.then(|| decided_elsewhere(&session));
    view! {
        <form class="deny-form" on:submit=move |ev| { ev.prevent_default(); if !overtaken { submit() } }>
            {decided_note.map(|n| view! { <p class="notice" role="alert" data-testid="decided-elsewhere">{n}</p> })}
            <label for=deny_id.clone()>"Why deny? (shown to " {session.requester.clone()} ")"</label>
            <textarea
                id=deny_id
                rows="2"
                node_ref=field
                aria-invalid=move || deny_error.get().is_some().to_string()
                aria-describedby=err_id.clone()
                prop:value=move || drafts.get(id).unwrap_or_default()
                on:input=move |ev| {
                    drafts.set(id, event_target_value(&ev));
                    deny_error.set(None);
                }
            ></textarea>
            {dynv(move || deny_error.get().map(|m| view! { <p class="field-error" id=err_id.clone() role="alert">{m}</p> }))}
            <div class="row">
                {(!overtaken).then(|| view! {
                    <button type="submit" class="danger" disabled=busy data-action="confirm-deny">"Deny"</button>
                })}
                <button type="button" disabled=busy data-action="cancel-deny" on:click=move |_| {
                        drafts.remove(id);
                        if overtaken {
                            // The request leaves the list with the form.
                            focus_soon(vec!["#main".into()]);
                        }
                    }>
                    {if overtaken { "Close" } else { "Cancel" }}
                </button>
            </div>
        </form>
    }
}
