//! A session's live state: waiting for approval (and who can approve), activating, active with
//! time left and the terminal (or, for those who may watch it, its live view), ended with the
//! reason; with the actions the user may take.

use breakglass_shared::access::Action;
use breakglass_shared::api::SessionDetail;
use breakglass_shared::{Session, SessionState};
use leptos::prelude::*;
use uuid::Uuid;

use crate::api::{self, links};
use crate::auth::use_auth;
use crate::components::actions::SessionActions;
use crate::components::common::{
    dynv, focus_lost, refocus_if_lost, Age, ErrorNotice, Loading, TimeLeft,
};
use crate::components::lazy;
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
    // Separate from the session so a fetched detail (events, approvers) never rebuilds the
    // state view, which would drop the focus inside it.
    let approvers = Memo::new(move |_| {
        detail
            .get()
            .and_then(Result::ok)
            .map(|d| d.approvers)
            .unwrap_or_default()
    });
    let load_error = Memo::new(move |_| detail.get().and_then(Result::err));
    let has_session = Memo::new(move |_| session.with(Option::is_some));
    let state = Memo::new(move |_| session.with(|s| s.as_ref().map(|s| (s.state, s.version))));
    let active = Signal::derive(move || {
        session.with(|s| s.as_ref().is_some_and(|s| s.state == SessionState::Active))
    });
    // The terminal stays mounted while the session is active (state changes do not rebuild it).
    let terminal_for_me = Memo::new(move |_| {
        session.with(|s| s.as_ref().is_some_and(|s| auth.may(s, Action::UseTerminal)))
    });
    // Once shown, the terminal stays after the session ends: its screen is what the requester
    // was looking at. (Loaded after the end, there is nothing to keep.)
    let terminal_seen = Memo::new(move |prev: Option<&bool>| {
        prev.copied().unwrap_or(false) || terminal_for_me.get()
    });
    // Approvers and admins (auditors where the environment lets them) may watch the terminal
    // live while it runs; never its requester, who has the terminal itself.
    let may_watch =
        Memo::new(move |_| session.with(|s| s.as_ref().is_some_and(|s| auth.may_watch(s))));
    // The live view is open. Outside the state view, which each new version rebuilds: the
    // view and its socket stay while the session changes, and after it ends (its last screen
    // and why it closed) until put away.
    let watching = RwSignal::new(false);
    let requester = Memo::new(move |_| {
        session.with(|s| s.as_ref().map(|s| s.requester.clone()).unwrap_or_default())
    });
    let ended = Signal::derive(move || {
        session.with(|s| {
            s.as_ref()
                .filter(|s| s.state.is_final() || s.state == SessionState::Ending)
                .map(|s| match &s.end_reason {
                    Some(r) => format::end_reason(r, &s.requester),
                    None => format::outcome(s),
                })
        })
    });
    // What a screen reader hears when the state changes (not on the first render: a live
    // region speaks changes only).
    let announcement = Memo::new(move |_| {
        session.with(|s| {
            s.as_ref().map(|s| {
                format!(
                    "{}. {}",
                    format::headline(s, auth.is_requester(s)),
                    format::outcome(s)
                )
            })
        })
    });
    // Focus that was in the panel when a change rebuilt it goes to the new headline.
    let had_focus = RwSignal::new(false);
    Effect::new(move |prev: Option<Option<(SessionState, i64)>>| {
        let now = state.get();
        if prev.is_some_and(|p| p != now) && had_focus.get_untracked() && focus_lost() {
            refocus_if_lost(vec![format!("#panel-{id}")]);
        }
        now
    });
    let level = if on_session_page { 2 } else { 3 };

    view! {
        <section class="session-panel card" aria-labelledby=format!("panel-{id}") data-testid="session-panel"
            data-state=move || session.with(|s| s.as_ref().map(|s| s.state.as_str()).unwrap_or_default())
            data-version=move || session.with(|s| s.as_ref().map(|s| s.version.to_string()).unwrap_or_default())
            on:focusin=move |_| had_focus.set(true)
            on:focusout=move |ev| {
                use wasm_bindgen::JsCast;
                // Focus moving to another element outside the panel; a removed element has
                // no related target and keeps the flag.
                let outside = ev.related_target().and_then(|t| t.dyn_into::<web_sys::Node>().ok()).is_some_and(|n| {
                    ev.current_target()
                        .and_then(|c| c.dyn_into::<web_sys::Node>().ok())
                        .is_some_and(|panel| !panel.contains(Some(&n)))
                });
                if outside {
                    had_focus.set(false);
                }
            }>
            <p class="sr-only" role="status" aria-live="polite" aria-atomic="true" data-testid="panel-announcement">
                {move || announcement.get()}
            </p>
            {dynv(move || match session.get() {
                None => match load_error.get() {
                    Some(e) => view! { <ErrorNotice error=e context="Could not load the session"/> }.into_any(),
                    None => view! { <Loading label="Loading the session…"/> }.into_any(),
                },
                Some(s) => view! {
                    <StateView session=s approvers=approvers id=id level=level on_session_page=on_session_page
                        fold_facts=terminal_seen.get_untracked()/>
                }
                    .into_any(),
            })}
            <Show when=move || terminal_seen.get()>
                {lazy::terminal(id, active, ended)}
            </Show>
            {dynv(move || {
                session.get().filter(|s| s.state == SessionState::Active && !auth.is_requester(s)).map(|s| view! {
                    <p class="muted">{format!("Only {} can type in this terminal; the recording is available once it ends.", s.requester)}</p>
                })
            })}
            <Show when=move || may_watch.get() || watching.get()>
                <div class="watch-bar">
                    <button type="button"
                        data-action=move || if watching.get() { "stop-watching" } else { "watch" }
                        on:click=move |_| watching.update(|w| *w = !*w)>
                        {move || if watching.get() { "Stop watching" } else { "Watch live" }}
                    </button>
                </div>
            </Show>
            <Show when=move || watching.get()>
                {lazy::watch(id, requester.get_untracked(), active)}
            </Show>
            // Built once the session is there, not again with each version of it (the history
            // has its own fetch).
            <Show when=move || with_events && has_session.get()>
                <Events detail=detail/>
            </Show>
        </section>
    }
}

#[component]
fn StateView(
    session: Session,
    approvers: Memo<Vec<String>>,
    id: Uuid,
    level: u8,
    on_session_page: bool,
    fold_facts: bool,
) -> impl IntoView {
    let auth = use_auth();
    let s = session.clone();
    let mine = auth.is_requester(&s);
    let waiting = s.state == SessionState::PendingApproval;
    let active = s.state == SessionState::Active;
    let preparing = matches!(s.state, SessionState::Approved | SessionState::Activating);
    let headline = format::headline(&s, mine);
    let requester = s.requester.clone();
    let head_id = format!("panel-{id}");
    // Focusable from script only: where focus goes after a change made here.
    let heading = if level == 2 {
        view! { <h2 id=head_id tabindex="-1" data-testid="session-headline">{headline}</h2> }
            .into_any()
    } else {
        view! { <h3 id=head_id tabindex="-1" data-testid="session-headline">{headline}</h3> }
            .into_any()
    };
    // Navigation sits by the headline, away from the buttons that change the session: End is
    // never one slip of the pointer from a link.
    let links = (s.active_at.is_some() || !on_session_page).then(|| {
        view! {
            <nav class="panel-links" aria-label="This session's pages">
                {s.active_at.is_some().then(|| view! {
                    <a href=links::recording(id, None)>"Recording"</a>
                })}
                {(!on_session_page).then(|| view! { <a href=links::session(id)>"Session page"</a> })}
            </nav>
        }
    });
    let actions = view! {
        <div class="panel-actions">
            <SessionActions session=session with_end=true/>
        </div>
    };
    let (in_head, below) = if active {
        (Some(actions), None)
    } else {
        (None, Some(actions))
    };
    view! {
        <header class="panel-head">
            {heading}
            {links}
            {(s.state == SessionState::Active).then_some(s.expires_at).flatten().map(|until| view! { <TimeLeft until=until/> })}
            {in_head}
            <crate::components::extension::ExtensionBox session=s.clone()/>
        </header>
        // While active the terminal's own status says what the outcome would: the line goes,
        // and the actions move up into the headline's row, so the terminal sits higher.
        {(!active).then(|| view! {
            <p class="outcome" data-testid="session-outcome">
                {preparing.then(|| view! { <span class="spinner" aria-hidden="true"></span> })}
                {format::outcome(&s)}
            </p>
        })}
        {waiting.then(|| format::approvals_line(&s)).flatten().map(|line| view! {
            <p class="approvals" data-testid="approvals-count">{line}</p>
        })}
        {waiting.then(|| view! {
            <p class="approvers" data-testid="approvers">
                {move || {
                    // The requester never approves their own request.
                    let list: Vec<String> = approvers.get().into_iter().filter(|a| *a != requester).collect();
                    if list.is_empty() {
                        "Nobody else holds approve rights here: ask an admin to break the glass.".to_string()
                    } else {
                        format!("Can approve: {}", list.join(", "))
                    }
                }}
            </p>
        })}
        {below}
        {if active || fold_facts {
            // The terminal is what matters now (and stays after the end): the details fold away.
            let open = crate::components::kept::Kept::current().unfolded(id, "facts", None);
            view! {
                <details class="facts-detail" prop:open=move || open.get()
                    on:toggle=crate::components::kept::on_toggle(open)>
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
            <dt>"Mode"</dt><dd>{crate::format::mode_label(s.mode)}{s.target_container.clone().map(|c| format!(", sees the processes of {c}"))}</dd>
            <dt>"Duration"</dt><dd>{crate::format::duration_line(&s)}</dd>
            // In UTC, what a reviewer matches against the cluster's and the app's logs.
            {s.active_at.map(|at| view! {
                <dt>"Started"</dt><dd data-testid="session-started"><time datetime=crate::format::timestamp(at)>{crate::format::timestamp(at)}</time></dd>
            })}
            {s.finished_at.filter(|_| s.state.is_final()).map(|at| view! {
                <dt>"Ended"</dt><dd data-testid="session-ended"><time datetime=crate::format::timestamp(at)>{crate::format::timestamp(at)}</time></dd>
            })}
            {s.active_at.zip(s.finished_at.filter(|_| s.state.is_final())).map(|(from, to)| view! {
                <dt>"Time used"</dt><dd data-testid="session-time-used">{crate::format::time_used(from, to, s.duration_minutes)}</dd>
            })}
            <dt>"Reason"</dt><dd class="reason">{s.reason.clone()}</dd>
            {s.ticket.clone().map(|t| view! {
                <dt>"Ticket"</dt><dd><a href=t.clone() target="_blank" rel="noopener noreferrer">{t.clone()}</a></dd>
            })}
            {s.approver.clone().filter(|_| s.state != SessionState::Denied).map(|a| {
                // With a quorum, every approver, in order.
                let all = if s.approvals.len() > 1 {
                    s.approvals.iter().map(|x| x.by.clone()).collect::<Vec<_>>().join(", ")
                } else {
                    a
                };
                view! { <dt>"Approved by"</dt><dd>{all}</dd> }
            })}
            {s.glass_broken_by.clone().map(|a| view! { <dt>"Glass broken by"</dt><dd><span class="glass">{a}</span></dd> })}
            {s.review_deadline().map(|by| view! {
                <dt>"Review"</dt><dd><crate::components::session_list::ReviewDeadline by=by/></dd>
            })}
            {s.review.clone().map(|r| view! {
                <dt>"Review"</dt><dd data-testid="session-review" tabindex="-1">{crate::format::review_sentence(&r.reviewer, r.verdict)}{(!r.notes.is_empty()).then(|| format!(": “{}”", r.notes))}</dd>
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
                Some(Ok(d)) => {
                    let lines = format::folded_events(&d.events, &d.session.requester);
                    view! {
                        <ol class="event-list">
                            {lines.into_iter().map(|(i, line)| {
                                let at = d.events[i].at;
                                view! {
                                    <li>
                                        <time datetime=format::timestamp(at)>{format::timestamp(at)}</time>
                                        " " <span>{line}</span>
                                    </li>
                                }
                            }).collect_view()}
                        </ol>
                    }
                }
                    .into_any(),
            })}
        </details>
    }
}
