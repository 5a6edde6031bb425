//! The buttons that change a session — approve, deny (with a reason), break the glass, end or
//! withdraw, terminate — shown only to those allowed, with inline confirmation where it matters.

use breakglass_shared::access::Action as Rule;
use breakglass_shared::validate;
use breakglass_shared::{Session, SessionState};
use leptos::prelude::*;
use leptos::task::spawn_local;
use std::collections::BTreeMap;

use uuid::Uuid;

use crate::api::{self, Action, ApiError};
use crate::app::use_auth;
use crate::components::common::{dynv, focus_soon};
use crate::live::{use_live, Live};

/// A decision the signed-in user just made on a request, said where the request was (the
/// queue strip, whose item goes away), with a link to it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    /// The session decided on.
    pub id: Uuid,
    /// What happened, as a sentence.
    pub text: String,
}

/// Where a list that loses its decided items shows the last [`Decision`] (a context; absent
/// elsewhere, where the item stays and changes in place).
#[derive(Clone, Copy)]
pub struct Decisions(pub RwSignal<Option<Decision>>);

/// Deny reasons being typed, by session. They outlive the view of a request that changed
/// meanwhile (someone else decided it), so the text is not lost and the form can say why it
/// can no longer be sent.
#[derive(Clone, Copy)]
pub struct DenyDrafts(pub RwSignal<BTreeMap<Uuid, String>>);

impl DenyDrafts {
    /// Starts an empty set for the signed-in user's pages.
    pub fn provide() {
        provide_context(DenyDrafts(RwSignal::new(BTreeMap::new())));
    }

    /// The sessions with a reason being typed (tracked).
    pub fn ids(&self) -> Vec<Uuid> {
        self.0.with(|m| m.keys().copied().collect())
    }
}

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

/// Says what was decided where the list shows it, else keeps focus on the changed session.
fn after_change(decisions: Option<Decisions>, id: Uuid, decided: Option<String>) {
    match (decisions, decided) {
        (Some(Decisions(note)), Some(text)) => {
            note.set(Some(Decision { id, text }));
            focus_soon(vec![format!("[data-decision='{id}']")]);
        }
        _ => focus_soon(vec![
            format!("#panel-{id}"),
            format!("[data-session='{id}'] a"),
            "main h1".into(),
        ]),
    }
}

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
    who: String,
    decisions: Option<Decisions>,
) {
    busy.set(true);
    error.set(None);
    spawn_local(async move {
        match api::act(id, action).await {
            Ok(s) => {
                live.upsert(s);
                let text = match action {
                    Action::Approve => Some(format!("You approved {who}.")),
                    Action::BreakGlass => Some(format!("You broke the glass on {who}.")),
                    Action::End | Action::Terminate => None,
                };
                after_change(decisions, id, text);
            }
            Err(e) => error.set(Some(e)),
        }
        busy.set(false);
    });
}

/// Confirmations being asked (break the glass, terminate), by session. Like [`DenyDrafts`]
/// they outlive the view: a live update of the same session (its recording grew, a heartbeat)
/// rebuilds the buttons, and the question must not vanish under the reader's pointer.
#[derive(Clone, Copy)]
pub struct PendingConfirms(pub RwSignal<BTreeMap<Uuid, Action>>);

impl PendingConfirms {
    /// Starts an empty set for the signed-in user's pages.
    pub fn provide() {
        provide_context(PendingConfirms(RwSignal::new(BTreeMap::new())));
    }
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
    let drafts = use_context::<DenyDrafts>();
    let draft = drafts.and_then(|d| d.0.with_untracked(|m| m.get(&id).cloned()));
    // A reason was being typed when this request changed: the form stays, saying who decided.
    let overtaken = draft.is_some() && state != SessionState::PendingApproval;
    let may_break = auth.may(&session, Rule::BreakGlass);
    let mine = auth.is_requester(&session);
    // The requester is offered End rather than Terminate on their own session.
    let may_terminate = !mine && auth.may(&session, Rule::Terminate);
    let confirms = use_context::<PendingConfirms>();
    // A question asked of an earlier version stays while its answer is still possible.
    let asked = confirms
        .and_then(|c| c.0.with_untracked(|m| m.get(&id).copied()))
        .filter(|a| match a {
            Action::BreakGlass => may_break,
            Action::Terminate => may_terminate,
            _ => false,
        });
    let step = RwSignal::new(match (&draft, asked) {
        (Some(_), _) => Step::Denying,
        (None, Some(a)) => Step::Confirm(a),
        (None, None) => Step::Idle,
    });
    if let Some(PendingConfirms(all)) = confirms {
        Effect::new(move |_| {
            let now = match step.get() {
                Step::Confirm(a) => Some(a),
                _ => None,
            };
            if all.with_untracked(|m| m.get(&id).copied()) != now {
                all.update(|m| match now {
                    Some(a) => {
                        m.insert(id, a);
                    }
                    None => {
                        m.remove(&id);
                    }
                });
            }
        });
    }
    let deny_reason = RwSignal::new(draft.unwrap_or_default());
    let deny_error = RwSignal::new(None::<String>);
    if let Some(DenyDrafts(all)) = drafts {
        Effect::new(move |_| {
            let reason = deny_reason.get();
            let denying = step.get() == Step::Denying;
            let changed = all.with_untracked(|m| match m.get(&id) {
                Some(r) => !denying || *r != reason,
                None => denying,
            });
            if changed {
                all.update(|m| {
                    if denying {
                        m.insert(id, reason);
                    } else {
                        m.remove(&id);
                    }
                });
            }
        });
    }
    let decided_note = overtaken.then(|| decided_elsewhere(&session));

    let may_approve = auth.may(&session, Rule::Approve);
    let may_end = with_end && auth.may(&session, Rule::End);
    // Before the debug container exists, ending takes the request back.
    let end_label = if matches!(
        state,
        SessionState::PendingApproval | SessionState::Approved
    ) {
        "Withdraw request"
    } else {
        "End session"
    };
    let who = format!(
        "{}'s request for {}/{}",
        session.requester, session.namespace, session.pod
    );
    let decisions = use_context::<Decisions>();

    // Copy, so the submit closure stays Copy for the form and its button.
    let who_deny = StoredValue::new(who.clone());
    let submit_deny = move || {
        let reason = deny_reason.get_untracked();
        if let Err(e) = validate::note("reason", &reason, true) {
            deny_error.set(Some(format!("A reason {}", e.message)));
            return;
        }
        deny_error.set(None);
        busy.set(true);
        let who_deny = who_deny.get_value();
        spawn_local(async move {
            match api::deny(id, reason.trim()).await {
                Ok(s) => {
                    // Before the new version arrives, or the form would stay as overtaken.
                    if let Some(DenyDrafts(all)) = drafts {
                        all.update(|m| {
                            m.remove(&id);
                        });
                    }
                    step.set(Step::Idle);
                    live.upsert(s);
                    after_change(decisions, id, Some(format!("You denied {who_deny}.")));
                }
                Err(e) => deny_error.set(Some(e.message)),
            }
            busy.set(false);
        });
    };

    let deny_id = format!("deny-{id}");
    let label = format!("Actions on {who}");
    view! {
        <div class="actions" role="group" aria-label=label>
            {dynv(move || {
                let (who_a, who_c) = (who.clone(), who.clone());
                match step.get() {
                Step::Idle => view! {
                    {may_approve.then(|| view! {
                        <button class="primary" disabled=busy data-action="approve"
                            on:click=move |_| run(live, id, Action::Approve, busy, error, who_a.clone(), decisions)>
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
                            on:click=move |_| run(live, id, Action::End, busy, error, String::new(), decisions)>
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
                            on:click=move |_| { step.set(Step::Idle); run(live, id, action, busy, error, who_c.clone(), decisions) }>
                            "Yes, " {action.verb()}
                        </button>
                        <button disabled=busy data-action="cancel-confirm" on:click=move |_| step.set(Step::Idle)>"Cancel"</button>
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
                    let decided_note = decided_note.clone();
                    view! {
                        <form class="deny-form" on:submit=move |ev| { ev.prevent_default(); if !overtaken { submit_deny() } }>
                            {decided_note.map(|n| view! { <p class="notice" role="alert" data-testid="decided-elsewhere">{n}</p> })}
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
                                {(!overtaken).then(|| view! {
                                    <button type="submit" class="danger" disabled=busy data-action="confirm-deny">"Deny"</button>
                                })}
                                <button type="button" disabled=busy data-action="cancel-deny" on:click=move |_| {
                                        step.set(Step::Idle);
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
                        .into_any()
                }
            }})}
            {dynv(move || error.get().map(|e| view! { <p class="field-error" role="alert">{e.message}</p> }))}
        </div>
    }
}
