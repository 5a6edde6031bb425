//! The buttons that change a session — approve, deny (with a reason), break the glass, end or
//! withdraw, terminate — shown only to those allowed, with inline confirmation where it matters.

use breakglass_shared::access::Action as Rule;
use breakglass_shared::validate;
use breakglass_shared::{Session, SessionState};
use leptos::prelude::*;
use leptos::task::spawn_local;
use uuid::Uuid;

use crate::api::{self, Action, ApiError};
use crate::app::use_auth;
use crate::components::common::dynv;
use crate::live::{use_live, Live};

#[derive(Clone, Copy, PartialEq, Eq)]
enum Step {
    Idle,
    Denying,
    Confirm(Action),
}

/// Runs `action` on session `id`, feeding the result into the live feed.
fn run(
    live: Live,
    id: Uuid,
    action: Action,
    busy: RwSignal<bool>,
    error: RwSignal<Option<ApiError>>,
) {
    busy.set(true);
    error.set(None);
    spawn_local(async move {
        match api::act(id, action).await {
            Ok(s) => live.upsert(s),
            Err(e) => error.set(Some(e)),
        }
        busy.set(false);
    });
}

/// What the signed-in user may do to `session`, as buttons.
#[component]
pub fn SessionActions(
    /// The session (its current version).
    session: Session,
    /// Show End/Withdraw for the requester (off in compact lists where the panel has it).
    #[prop(optional)]
    with_end: bool,
) -> impl IntoView {
    let auth = use_auth();
    let live = use_live();
    let id = session.id;
    let state = session.state;
    let busy = RwSignal::new(false);
    let error = RwSignal::new(None::<ApiError>);
    let step = RwSignal::new(Step::Idle);
    let deny_reason = RwSignal::new(String::new());
    let deny_error = RwSignal::new(None::<String>);

    let pending = state == SessionState::PendingApproval;
    let may_approve = auth.may(&session, Rule::Approve);
    let may_break = auth.may(&session, Rule::BreakGlass);
    let mine = auth.is_requester(&session);
    // The requester is offered End rather than Terminate on their own session.
    let may_terminate = !mine && auth.may(&session, Rule::Terminate);
    let may_end = with_end && auth.may(&session, Rule::End);
    let end_label = if pending { "Withdraw" } else { "End session" };
    let who = format!(
        "{}'s request for {}/{}",
        session.requester, session.namespace, session.pod
    );

    let submit_deny = move || {
        let reason = deny_reason.get_untracked();
        if let Err(e) = validate::note("reason", &reason, true) {
            deny_error.set(Some(format!("A reason {}", e.message)));
            return;
        }
        deny_error.set(None);
        busy.set(true);
        spawn_local(async move {
            match api::deny(id, reason.trim()).await {
                Ok(s) => {
                    step.set(Step::Idle);
                    live.upsert(s);
                }
                Err(e) => deny_error.set(Some(e.message)),
            }
            busy.set(false);
        });
    };

    let deny_id = format!("deny-{id}");
    view! {
        <div class="actions" role="group" aria-label=format!("Actions on {who}")>
            {dynv(move || match step.get() {
                Step::Idle => view! {
                    {may_approve.then(|| view! {
                        <button class="primary" disabled=busy data-action="approve"
                            on:click=move |_| run(live, id, Action::Approve, busy, error)>
                            "Approve"
                        </button>
                        <button disabled=busy data-action="deny" on:click=move |_| step.set(Step::Denying)>
                            "Deny…"
                        </button>
                    })}
                    {may_break.then(|| view! {
                        <button class="danger" disabled=busy data-action="break-glass"
                            title="Activate without a second person (recorded, review required)"
                            on:click=move |_| step.set(Step::Confirm(Action::BreakGlass))>
                            "Break the glass…"
                        </button>
                    })}
                    {may_end.then(|| view! {
                        <button disabled=busy data-action="end"
                            on:click=move |_| run(live, id, Action::End, busy, error)>
                            {end_label}
                        </button>
                    })}
                    {may_terminate.then(|| view! {
                        <button class="danger" disabled=busy data-action="terminate"
                            on:click=move |_| step.set(Step::Confirm(Action::Terminate))>
                            "Terminate…"
                        </button>
                    })}
                }
                    .into_any(),
                Step::Confirm(action) => {
                    let question = match action {
                        Action::BreakGlass => "Break the glass? You activate this without a second person; a review becomes mandatory.",
                        _ => "Terminate this session now? The terminal closes for its requester.",
                    };
                    view! {
                        <span class="confirm" role="alert">{question}</span>
                        <button class="danger" disabled=busy data-action="confirm"
                            on:click=move |_| { step.set(Step::Idle); run(live, id, action, busy, error) }>
                            "Yes, " {action.verb()}
                        </button>
                        <button disabled=busy on:click=move |_| step.set(Step::Idle)>"Cancel"</button>
                    }
                        .into_any()
                }
                Step::Denying => {
                    let deny_id = deny_id.clone();
                    let err_id = format!("{deny_id}-error");
                    // Keyboard users land in the reason field.
                    let field = NodeRef::<leptos::html::Textarea>::new();
                    field.on_load(|el| {
                        let _ = el.focus();
                    });
                    view! {
                        <form class="deny-form" on:submit=move |ev| { ev.prevent_default(); submit_deny() }>
                            <label for=deny_id.clone()>"Why deny? (shown to " {session.requester.clone()} ")"</label>
                            <textarea
                                id=deny_id.clone()
                                rows="2"
                                node_ref=field
                                aria-invalid=move || deny_error.get().is_some().to_string()
                                aria-describedby=err_id.clone()
                                bind:value=deny_reason
                                on:input=move |_| deny_error.set(None)
                            ></textarea>
                            {move || deny_error.get().map(|m| view! { <p class="field-error" id=err_id.clone() role="alert">{m}</p> })}
                            <div class="row">
                                <button type="submit" class="danger" disabled=busy data-action="confirm-deny">"Deny"</button>
                                <button type="button" disabled=busy on:click=move |_| step.set(Step::Idle)>"Cancel"</button>
                            </div>
                        </form>
                    }
                        .into_any()
                }
            })}
            {dynv(move || error.get().map(|e| view! { <p class="field-error" role="alert">{e.message}</p> }))}
        </div>
    }
}
