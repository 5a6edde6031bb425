//! The buttons that change a session — approve, deny (with a reason), break the glass, end or
//! withdraw, terminate — shown only to those allowed, with inline confirmation where it matters.
//!
//! [`SessionActions`] shows one of three steps: the buttons, a question, or the deny form.
//! Which one is not its own state: it is read from [`DenyDrafts`] and [`PendingConfirms`],
//! which the steps write, so a view rebuilt for a newer version shows the same step.

use breakglass_shared::access::Action as Rule;
use breakglass_shared::step_up::StepUpAction;
use breakglass_shared::{Mode, Session, SessionState};
use leptos::prelude::*;
use leptos::task::spawn_local;
use uuid::Uuid;

use crate::api::{self, Action, ApiError};
use crate::auth::use_auth;
use crate::components::common::{dynv, focus_soon};
use crate::live::Live;

mod buttons;
mod confirm;
mod deny;
mod state;

pub use state::{Decision, Decisions, DenyDrafts, PendingConfirms};

use buttons::Buttons;
use confirm::Confirm;
use deny::DenyForm;

/// Which step the actions of one session are at.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Step {
    Idle,
    Denying,
    Confirm(Action),
}

/// What every step of one session's actions shares: the session, the feed its changes go
/// into, and the request in flight.
#[derive(Clone, Copy)]
struct Ctx {
    id: Uuid,
    live: Live,
    busy: RwSignal<bool>,
    error: RwSignal<Option<ApiError>>,
    decisions: Option<Decisions>,
    /// `alice's request for shop/web-1`, for the sentences saying what was done.
    who: StoredValue<String>,
    /// Its environment asks for a security key to approve, break the glass or terminate.
    step_up: bool,
    /// End may also recycle the pod (live mode, where the tier allows it).
    recycle_offered: bool,
    /// The person ticked "recycle the pod" in End's question.
    recycle: RwSignal<bool>,
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

impl Ctx {
    /// Runs `action` on the session, feeding the result into the live feed.
    fn run(self, action: Action) {
        let Ctx {
            id,
            live,
            busy,
            error,
            decisions,
            who,
            step_up,
            recycle_offered,
            recycle,
        } = self;
        busy.set(true);
        error.set(None);
        // Read now: the answer can take this component away (the item leaves the queue when
        // `live` hears of it), and with it everything it owns, so after the await only
        // `try_` writes touch its signals.
        let who = who.get_value();
        let key_action = match action {
            Action::Approve => Some(StepUpAction::Approve),
            Action::BreakGlass => Some(StepUpAction::BreakGlass),
            Action::Terminate => Some(StepUpAction::Terminate),
            Action::End => None,
        };
        spawn_local(async move {
            let answer = match key_action {
                Some(a) => api::confirm(step_up, a, id).await,
                None => Ok(None),
            };
            let recycling = action == Action::End && recycle_offered && recycle.get_untracked();
            let done = match answer {
                Ok(_) if recycling => api::end_recycling(id).await,
                Ok(answer) => api::act(id, action, answer.as_deref()).await,
                Err(e) => Err(e),
            };
            match done {
                Ok(s) => {
                    live.upsert(s);
                    let text = match action {
                        Action::Approve => Some(format!("You approved {who}.")),
                        Action::BreakGlass => Some(format!("You broke the glass on {who}.")),
                        Action::End | Action::Terminate => None,
                    };
                    after_change(decisions, id, text);
                }
                Err(e) => {
                    error.try_set(Some(e));
                }
            }
            busy.try_set(false);
        });
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
    let id = session.id;
    let drafts = DenyDrafts::current();
    let confirms = PendingConfirms::current();
    // A reason was being typed when this request changed: the form stays, saying who decided.
    let overtaken =
        drafts.get_untracked(id).is_some() && session.state != SessionState::PendingApproval;
    let may_break = auth.may(&session, Rule::BreakGlass);
    let mine = auth.is_requester(&session);
    // The requester is offered End rather than Terminate on their own session.
    let may_terminate = !mine && auth.may(&session, Rule::Terminate);
    let may_end_live =
        with_end && auth.may(&session, Rule::End) && buttons::ends_a_live_session(session.state);
    let answerable = move |a: Action| match a {
        Action::BreakGlass => may_break,
        Action::Terminate => may_terminate,
        Action::End => may_end_live,
        // Approving is one click: a second person is already involved.
        Action::Approve => false,
    };
    // A question asked of an earlier version stays while its answer is still possible.
    if confirms.get_untracked(id).is_some_and(|a| !answerable(a)) {
        confirms.remove(id);
    }
    let step = Memo::new(move |_| {
        if drafts.contains(id) {
            Step::Denying
        } else {
            confirms
                .get(id)
                .filter(|a| answerable(*a))
                .map_or(Step::Idle, Step::Confirm)
        }
    });
    let ctx = Ctx {
        id,
        live: crate::live::use_live(),
        busy: RwSignal::new(false),
        error: RwSignal::new(None),
        decisions: use_context::<Decisions>(),
        who: StoredValue::new(format!(
            "{}'s request for {}/{}",
            session.requester, session.namespace, session.pod
        )),
        step_up: auth.env(&session.environment).is_some_and(|e| e.step_up),
        recycle_offered: session.mode == Mode::Live && session.tier.allows_recycle(),
        recycle: RwSignal::new(false),
    };
    let label = format!("Actions on {}", ctx.who.get_value());
    let buttons = buttons::Allowed {
        approve: auth.may(&session, Rule::Approve),
        break_glass: may_break,
        end: with_end && auth.may(&session, Rule::End),
        terminate: may_terminate,
    };
    let error = ctx.error;
    // Where a key is asked and the person has none, the buttons say how to get one first.
    let keyed = buttons.approve || buttons.break_glass || buttons.terminate;
    let no_key = (ctx.step_up && keyed && auth.security_keys() == 0).then(|| {
        view! {
            <p class="muted small" data-testid="needs-key">
                "Here, approving, breaking the glass and terminating need a security key. "
                <a href=crate::api::links::account()>"Add one on your account page"</a>"."
            </p>
        }
    });
    view! {
        <div class="actions" role="group" aria-label=label>
            {no_key}
            {dynv(move || match step.get() {
                Step::Idle => view! {
                    <Buttons ctx=ctx allowed=buttons state=session.state drafts=drafts confirms=confirms/>
                }
                    .into_any(),
                Step::Confirm(action) => view! { <Confirm ctx=ctx action=action confirms=confirms/> }.into_any(),
                Step::Denying => view! {
                    <DenyForm ctx=ctx session=session.clone() overtaken=overtaken drafts=drafts/>
                }
                    .into_any(),
            })}
            {dynv(move || error.get().map(|e| view! { <p class="field-error" role="alert">{e.message}</p> }))}
        </div>
    }
}
