//! More time for a running session, on its panel: the requester sees what is left to ask
//! (and what waits or was refused) and asks with a reason; on Flight an approver sees the ask
//! with its reason and approves or refuses it. The rules are the shared ones
//! (`Session::may`), so only what the server would accept is offered.

use breakglass_shared::access::Action;
use breakglass_shared::api::ExtendRequest;
use breakglass_shared::step_up::StepUpAction;
use breakglass_shared::validate;
use breakglass_shared::{Session, SessionState, Tier};
use leptos::prelude::*;
use leptos::task::spawn_local;

use crate::api;
use crate::auth::use_auth;
use crate::components::common::dynv;
use crate::components::kept::{on_toggle, Kept};
use crate::live::use_live;

/// `1 of 2 extensions used; up to 20 more minutes.`: what the requester can still ask.
pub fn extensions_left(s: &Session) -> String {
    let x = &s.extensions;
    let max = x.limits.max_count;
    if max == 0 {
        return "Sessions here cannot be extended.".into();
    }
    let used = x.granted.len();
    let room = x.room(s.duration_minutes);
    match (x.asks_left(), room) {
        (0, _) if x.pending.is_none() => format!("All {max} extensions used."),
        (_, 0) => "The session runs as long as sessions here may.".into(),
        _ => format!("{used} of {max} extensions used; up to {room} more minutes."),
    }
}

/// The extension box of running session `session` (nothing for others, or when it is not
/// running).
#[component]
pub fn ExtensionBox(
    /// The session (its current version).
    session: Session,
) -> impl IntoView {
    let auth = use_auth();
    if session.state != SessionState::Active {
        return None;
    }
    let mine = auth.is_requester(&session);
    let may_decide = auth.may(&session, Action::ApproveExtension);
    if !mine && !may_decide {
        return None;
    }
    let x = session.extensions.clone();
    let waiting = x.pending.clone().map(|ask| {
        let approvals = if ask.approvals.is_empty() {
            String::new()
        } else {
            let by: Vec<&str> = ask.approvals.iter().map(|a| a.by.as_str()).collect();
            format!(
                " ({} of {} approvals: {})",
                ask.approvals.len(),
                session.quorum.needed(),
                by.join(", ")
            )
        };
        let who = if mine {
            "You asked".to_string()
        } else {
            format!("{} asks", session.requester)
        };
        format!(
            "{who} for {} more minutes: “{}”{approvals}",
            ask.minutes, ask.reason
        )
    });
    let refused = x
        .denied
        .clone()
        .filter(|_| mine)
        .map(|d| format!("{} refused more time: “{}”", d.by, d.reason));
    let given: u32 = x.granted_minutes();
    let given = (given > 0).then(|| {
        view! { <p class="muted" data-testid="extension-given">{format!("Extended by {given} min.")}</p> }
    });
    let waiting = waiting.map(|line| view! { <p data-testid="extension-waiting">{line}</p> });
    let refused = refused
        .map(|line| view! { <p class="field-error" data-testid="extension-refused">{line}</p> });
    if mine {
        // Folded beside the time left: the terminal keeps the page's height. It opens by
        // itself once for each new ask waiting or refusal, and otherwise stays as the reader
        // left it when a live update rebuilds it (folded again, it must not reopen, and take
        // the terminal's rows, every time the recording stores a version).
        let news = match (&x.pending, &x.denied) {
            (Some(ask), _) => Some(format!("waiting {}", ask.at)),
            (None, Some(d)) => Some(format!("refused {}", d.at)),
            (None, None) => None,
        };
        let open = Kept::current().unfolded(session.id, "extension", news);
        return Some(
            view! {
                <details class="extension" data-testid="extension"
                    prop:open=move || open.get() on:toggle=on_toggle(open)>
                    <summary>"More time…"</summary>
                    {given}
                    {waiting}
                    {refused}
                    <AskForm session=session.clone()/>
                </details>
            }
            .into_any(),
        );
    }
    let decide = x
        .pending
        .is_some()
        .then(|| view! { <Decide session=session.clone()/> });
    Some(
        view! {
            <section class="extension" aria-label="More time" data-testid="extension">
                {given}
                {waiting}
                {decide}
            </section>
        }
        .into_any(),
    )
}

/// The requester's ask: minutes and a reason.
#[component]
fn AskForm(session: Session) -> impl IntoView {
    let auth = use_auth();
    let live = use_live();
    let id = session.id;
    let left = extensions_left(&session);
    let may = auth.may(&session, Action::Extend);
    let room = session.extensions.room(session.duration_minutes);
    // Kept: a live update of the session rebuilds this form while the reason is typed.
    let kept = Kept::current();
    let minutes = kept.text(id, "extension-minutes", || room.min(15).to_string());
    let reason = kept.text(id, "extension-reason", String::new);
    let busy = RwSignal::new(false);
    let error = RwSignal::new(None::<String>);
    let submit = move || {
        let req = ExtendRequest {
            minutes: minutes.get_untracked().trim().parse().unwrap_or(0),
            reason: reason.get_untracked().trim().to_string(),
        };
        if let Err(e) = req.validate() {
            let label = if e.field == "minutes" {
                "More minutes"
            } else {
                "Why"
            };
            error.set(Some(format!("{label}: {}", e.message)));
            return;
        }
        error.set(None);
        busy.set(true);
        spawn_local(async move {
            match api::extend(id, &req).await {
                Ok(s) => {
                    kept.forget(id, "extension-reason");
                    kept.forget(id, "extension-minutes");
                    live.upsert(s);
                }
                Err(e) => {
                    error.try_set(Some(e.message));
                }
            }
            busy.try_set(false);
        });
    };
    let hint = if session.tier == Tier::Flight {
        "An approver decides, as for the request."
    } else {
        "Given at once."
    };
    view! {
        <p class="muted" data-testid="extensions-left">{left}</p>
        {(may && room > 0).then(|| view! {
            <form class="extension-form row" data-testid="extension-form"
                on:submit=move |ev| { ev.prevent_default(); submit() }>
                <label for=format!("ext-min-{id}")>"More minutes"</label>
                <input id=format!("ext-min-{id}") type="number" min="1" max=room.to_string() inputmode="numeric"
                    prop:value=move || minutes.get()
                    on:input=move |ev| { minutes.set(event_target_value(&ev)); error.set(None); }/>
                <label for=format!("ext-why-{id}")>"Why"</label>
                <input id=format!("ext-why-{id}") type="text" minlength="10" maxlength="1000"
                    aria-invalid=move || error.get().is_some().to_string()
                    aria-describedby=format!("ext-error-{id} ext-hint-{id}")
                    prop:value=move || reason.get()
                    on:input=move |ev| { reason.set(event_target_value(&ev)); error.set(None); }/>
                <button type="submit" disabled=busy data-action="extend">"Ask for more time"</button>
                <p class="muted" id=format!("ext-hint-{id}")>{hint}</p>
                {dynv(move || error.get().map(|m| view! { <p class="field-error" id=format!("ext-error-{id}") role="alert">{m}</p> }))}
            </form>
        })}
    }
}

/// An approver's decision on the waiting ask: approve, or refuse with a reason.
#[component]
fn Decide(session: Session) -> impl IntoView {
    let live = use_live();
    let id = session.id;
    let step_up = use_auth()
        .env(&session.environment)
        .is_some_and(|e| e.step_up);
    let kept = Kept::current();
    let reason = kept.text(id, "extension-refusal", String::new);
    let busy = RwSignal::new(false);
    let error = RwSignal::new(None::<String>);
    let approve = move |_| {
        busy.set(true);
        error.set(None);
        spawn_local(async move {
            let answer = api::confirm(step_up, StepUpAction::ApproveExtension, id).await;
            let done = match answer {
                Ok(answer) => api::approve_extension(id, answer.as_deref()).await,
                Err(e) => Err(e),
            };
            match done {
                Ok(s) => live.upsert(s),
                Err(e) => {
                    error.try_set(Some(e.message));
                }
            }
            busy.try_set(false);
        });
    };
    let refuse = move || {
        let why = reason.get_untracked();
        if let Err(e) = validate::note("reason", &why, true) {
            error.set(Some(format!("A reason {}", e.message)));
            return;
        }
        busy.set(true);
        error.set(None);
        spawn_local(async move {
            match api::deny_extension(id, why.trim()).await {
                Ok(s) => {
                    kept.forget(id, "extension-refusal");
                    live.upsert(s);
                }
                Err(e) => {
                    error.try_set(Some(e.message));
                }
            }
            busy.try_set(false);
        });
    };
    view! {
        <form class="extension-decide row" data-testid="extension-decide"
            on:submit=move |ev| { ev.prevent_default(); refuse() }>
            <button type="button" class="primary" disabled=busy data-action="approve-extension" on:click=approve>
                "Approve more time"
            </button>
            <label for=format!("ext-refuse-{id}")>"Or refuse, because"</label>
            <input id=format!("ext-refuse-{id}") type="text"
                aria-describedby=format!("ext-decide-error-{id}")
                prop:value=move || reason.get()
                on:input=move |ev| { reason.set(event_target_value(&ev)); error.set(None); }/>
            <button type="submit" class="danger" disabled=busy data-action="deny-extension">"Refuse"</button>
            {dynv(move || error.get().map(|m| view! { <p class="field-error" id=format!("ext-decide-error-{id}") role="alert">{m}</p> }))}
        </form>
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use breakglass_shared::session::{Extension, ExtensionLimits};

    #[test]
    fn what_is_left_to_ask_is_said_in_words() {
        let mut s = crate::fixtures::session(1, SessionState::Active, 3);
        s.extensions.limits = ExtensionLimits {
            max_count: 2,
            max_total_minutes: 60,
        };
        assert_eq!(
            extensions_left(&s),
            "0 of 2 extensions used; up to 30 more minutes."
        );
        for _ in 0..2 {
            s.extensions.granted.push(Extension {
                minutes: 5,
                reason: "the dump is still running".into(),
                asked_at: s.created_at,
                granted_at: s.created_at,
                approvals: vec![],
            });
        }
        assert_eq!(extensions_left(&s), "All 2 extensions used.");
        s.extensions.limits.max_count = 0;
        assert_eq!(extensions_left(&s), "Sessions here cannot be extended.");
    }
}
