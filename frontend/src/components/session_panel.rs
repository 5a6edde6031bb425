//! A session's live state: waiting for approval (and who can approve), activating, active with
//! time left and the terminal, ended with the reason; with the actions the user may take.

use breakglass_shared::access::Action;
use breakglass_shared::api::SessionDetail;
use breakglass_shared::{Session, SessionState, Tier};
use leptos::prelude::*;
use uuid::Uuid;

use crate::api::{self, links};
use crate::app::use_auth;
use crate::components::actions::SessionActions;
use crate::components::common::{dynv, Age, ErrorNotice, Loading, StateBadge, TimeLeft};
use crate::components::terminal::Terminal;
use crate::fetch::{fetch, Fetch};
use crate::format;
use crate::live::use_live;

/// A session's detail, kept current: fetched once, then each newer version from the live feed
/// is shown at once and the detail (events, approvers) fetched again.
pub fn live_detail(id: Uuid) -> (Fetch<SessionDetail>, Memo<Option<Session>>) {
    let live = use_live();
    let detail = fetch(move || async move { api::session(id).await });
    let session = Memo::new(move |_| {
        let fetched = detail.get().and_then(Result::ok).map(|d| d.session);
        match (fetched, live.get(id)) {
            (Some(f), Some(l)) if l.version > f.version => Some(l),
            (Some(f), _) => Some(f),
            (None, l) => l,
        }
    });
    // A newer version than the detail's: fetch the events and approvers again.
    Effect::new(move |_| {
        let newest = live.get(id).map(|s| s.version);
        let have = detail
            .get_untracked()
            .and_then(Result::ok)
            .map(|d| d.session.version);
        if let (Some(n), Some(h)) = (newest, have) {
            if n > h {
                detail.refetch();
            }
        }
    });
    (detail, session)
}

/// The state of session `id`, live, with its actions and (for its requester) the terminal.
#[component]
pub fn SessionPanel(
    /// The session.
    id: Uuid,
    /// Show the event history below.
    #[prop(optional)]
    with_events: bool,
    /// Rendered on the session's own page (no link to it).
    #[prop(optional)]
    on_session_page: bool,
) -> impl IntoView {
    let auth = use_auth();
    let (detail, session) = live_detail(id);
    let approvers = move || {
        detail
            .get()
            .and_then(Result::ok)
            .map(|d| d.approvers)
            .unwrap_or_default()
    };
    let active = Signal::derive(move || {
        session.with(|s| s.as_ref().is_some_and(|s| s.state == SessionState::Active))
    });
    // The terminal stays mounted while the session is active (state changes do not rebuild it).
    let terminal_for_me = Memo::new(move |_| {
        session.with(|s| s.as_ref().is_some_and(|s| auth.may(s, Action::UseTerminal)))
    });

    view! {
        <section class="session-panel card" aria-labelledby=format!("panel-{id}") data-testid="session-panel"
            data-state=move || session.with(|s| s.as_ref().map(|s| s.state.as_str()).unwrap_or_default())>
            {dynv(move || match (detail.get(), session.get()) {
                (Some(Err(e)), None) => view! { <ErrorNotice error=e context="Could not load the session"/> }.into_any(),
                (_, None) => view! { <Loading label="Loading the session…"/> }.into_any(),
                (_, Some(s)) => view! { <StateView session=s approvers=approvers() id=id on_session_page=on_session_page/> }.into_any(),
            })}
            <Show when=move || terminal_for_me.get()>
                <Terminal session_id=id active=active/>
            </Show>
            {dynv(move || {
                session.get().filter(|s| s.state == SessionState::Active && !auth.is_requester(s)).map(|s| view! {
                    <p class="muted">{format!("Only {} can type in this terminal; the recording is available once it ends.", s.requester)}</p>
                })
            })}
            {dynv(move || with_events.then(|| view! { <Events detail=detail/> }))}
        </section>
    }
}

#[component]
fn StateView(
    session: Session,
    approvers: Vec<String>,
    id: Uuid,
    on_session_page: bool,
) -> impl IntoView {
    let auth = use_auth();
    let s = session.clone();
    let mine = auth.is_requester(&s);
    let waiting = s.state == SessionState::PendingApproval;
    let active = s.state == SessionState::Active;
    let headline = match s.state {
        SessionState::PendingApproval if mine => "Waiting for approval".to_string(),
        SessionState::PendingApproval => format!("{} is waiting for approval", s.requester),
        SessionState::Approved if s.tier == Tier::Flight => "Approved".to_string(),
        SessionState::Approved => "Approved automatically (Ground)".to_string(),
        SessionState::Activating => "Activating".to_string(),
        SessionState::Active => "Active".to_string(),
        SessionState::Ending => "Ending".to_string(),
        _ => format!("Session {}", format::state_label(s.state)),
    };
    view! {
        <header class="panel-head">
            <h3 id=format!("panel-{id}") data-testid="session-headline">{headline}</h3>
            <StateBadge state=s.state/>
            {(s.state == SessionState::Active).then_some(s.expires_at).flatten().map(|until| view! { <TimeLeft until=until/> })}
        </header>
        {(!waiting).then(|| view! { <p class="outcome" data-testid="session-outcome">{format::outcome(&s)}</p> })}
        {waiting.then(|| view! {
            <p class="approvers" data-testid="approvers">
                {if approvers.is_empty() {
                    "Nobody else holds approve rights here: ask an admin to break the glass.".to_string()
                } else {
                    format!("Can approve: {}", approvers.join(", "))
                }}
            </p>
        })}
        {matches!(s.state, SessionState::Approved | SessionState::Activating).then(|| view! {
            <p class="muted small"><span class="spinner" aria-hidden="true"></span>
                "The debug container is being prepared; the terminal opens here when it runs."</p>
        })}
        <div class="panel-actions">
            <SessionActions session=session with_end=true/>
            {s.active_at.is_some().then(|| view! {
                <a class="button-link" href=links::recording(id, None)>"Recording"</a>
            })}
            {(!on_session_page).then(|| view! { <a class="button-link" href=links::session(id)>"Session page"</a> })}
        </div>
        {if active {
            // The terminal is what matters now: the details fold away.
            view! {
                <details class="facts-detail">
                    <summary>"Session details"</summary>
                    <Facts s=s.clone()/>
                </details>
            }
                .into_any()
        } else {
            view! { <Facts s=s.clone()/> }.into_any()
        }}
    }
}

/// What was asked, by whom, and who decided.
#[component]
fn Facts(
    /// The session.
    s: Session,
) -> impl IntoView {
    view! {
        <dl class="facts">
            <dt>"Pod"</dt>
            <dd><a href=links::pod(&s.environment, &s.namespace, &s.pod)>{format!("{}/{}/{}", s.environment, s.namespace, s.pod)}</a></dd>
            <dt>"Requested by"</dt><dd>{s.requester.clone()} " · " <Age at=s.created_at/></dd>
            <dt>"Mode"</dt><dd>{s.mode.as_str()}{s.target_container.clone().map(|c| format!(", sees the processes of {c}"))}</dd>
            <dt>"Duration"</dt><dd>{format!("{} min", s.duration_minutes)}</dd>
            <dt>"Reason"</dt><dd class="reason">{s.reason.clone()}</dd>
            {s.ticket.clone().map(|t| view! {
                <dt>"Ticket"</dt><dd><a href=t.clone() target="_blank" rel="noopener noreferrer">{t.clone()}</a></dd>
            })}
            {s.approver.clone().filter(|_| s.state != SessionState::Denied).map(|a| view! { <dt>"Approved by"</dt><dd>{a}</dd> })}
            {s.glass_broken_by.clone().map(|a| view! { <dt>"Glass broken by"</dt><dd class="glass">{a}</dd> })}
            {s.review.clone().map(|r| view! {
                <dt>"Review"</dt><dd>{format!("{} by {}", r.verdict.as_str(), r.reviewer)}{(!r.notes.is_empty()).then(|| format!(": {}", r.notes))}</dd>
            })}
        </dl>
    }
}

#[component]
fn Events(detail: Fetch<SessionDetail>) -> impl IntoView {
    view! {
        <details class="events">
            <summary>"Event history"</summary>
            {dynv(move || match detail.get() {
                None => view! { <Loading label="Loading events…"/> }.into_any(),
                Some(Err(e)) => view! { <ErrorNotice error=e/> }.into_any(),
                Some(Ok(d)) => view! {
                    <ol class="event-list">
                        {d.events.into_iter().map(|e| view! {
                            <li>
                                <time datetime=format::timestamp(e.at)>{format::timestamp(e.at)}</time>
                                " " <strong>{e.actor}</strong> " " <span>{e.kind}</span> " "
                                {e.from_state.map(|f| format!("{} → ", f.as_str()))}
                                {e.to_state.as_str()}
                                {e.detail.map(|d| view! { <span class="muted">" — " {d}</span> })}
                            </li>
                        }).collect_view()}
                    </ol>
                }
                    .into_any(),
            })}
        </details>
    }
}
