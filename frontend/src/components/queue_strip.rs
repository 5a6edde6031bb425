//! The queue strip: requests waiting for approval across environments (or one), oldest first,
//! with approve and deny inline for those allowed. Kept current by the live feed.

use breakglass_shared::api::{ListQuery, MAX_PAGE};
use breakglass_shared::{Session, SessionState};
use leptos::prelude::*;

use crate::api::{self, links, ApiError};
use crate::auth::use_auth;
use crate::components::actions::{Decision, Decisions, DenyDrafts, SessionActions};
use crate::components::common::{dynv, Age, Empty, ErrorNotice, Loading, TierBadge};
use crate::components::extension::ExtensionBox;
use crate::fetch::fetch;
use crate::format;
use crate::live::{use_clock, use_live};

/// Sessions matching `query` (fetched again whenever the live feed had a gap), merged with the
/// live feed and filtered by `keep`, newest first.
pub fn live_list(
    query: ListQuery,
    keep: impl Fn(&Session) -> bool + Send + Sync + 'static,
) -> Memo<Option<Result<Vec<Session>, ApiError>>> {
    let live = use_live();
    let res = fetch(move || {
        live.epoch.track();
        let q = query.clone();
        async move { api::list_sessions(&q).await }
    });
    Memo::new(move |_| {
        res.get()
            .map(|r| r.map(|page| live.merged(&page.items, &keep)))
    })
}

/// Renders the loading, error and empty states of a [`live_list`]; `children` shows the rest.
#[component]
pub fn ListStates(
    /// The list.
    list: Memo<Option<Result<Vec<Session>, ApiError>>>,
    /// What is loading.
    #[prop(into)]
    loading: String,
    /// The empty state's sentence.
    #[prop(into)]
    empty: String,
    /// The list itself (rendered while there are items).
    children: ChildrenFn,
) -> impl IntoView {
    move || match list.get() {
        None => view! { <Loading label=loading.clone()/> }.into_any(),
        Some(Err(e)) => view! { <ErrorNotice error=e/> }.into_any(),
        Some(Ok(v)) if v.is_empty() => view! { <Empty text=empty.clone()/> }.into_any(),
        Some(Ok(_)) => children().into_any(),
    }
}

/// Whether `s` waits for the signed-in user's decision (they may approve it, and it is not
/// theirs).
fn waits_for_me(auth: crate::auth::Auth, s: &Session) -> bool {
    s.state == SessionState::PendingApproval
        && !auth.is_requester(s)
        && auth.may(s, breakglass_shared::access::Action::Approve)
}

/// Keeps the count of requests waiting for the signed-in user's decision in the page title, so a
/// background tab says there is work, and tells of each new one with a desktop notification
/// while the tab is out of sight (once the person allowed them: [`NotifyMe`]).
pub fn count_waiting_for_me() {
    let auth = use_auth();
    let list = live_list(
        ListQuery {
            state: Some(SessionState::PendingApproval),
            awaiting_me: Some(true),
            limit: Some(MAX_PAGE),
            ..Default::default()
        },
        move |s| waits_for_me(auth, s),
    );
    let location = crate::router::use_location();
    // The requests seen waiting so far; `None` until the first list, which tells nothing (the
    // person opened the app and sees them).
    let seen = StoredValue::new(None::<std::collections::HashSet<uuid::Uuid>>);
    Effect::new(move |_| {
        let Some(Ok(v)) = list.get() else { return };
        crate::title::set_waiting_count(v.len());
        let before = seen.get_value();
        if let Some(before) = &before {
            if crate::desktop::hidden() {
                for s in v.iter().filter(|s| !before.contains(&s.id)) {
                    crate::desktop::tell(
                        location,
                        &format!("{} asks to debug {}/{}", s.requester, s.environment, s.pod),
                        &s.reason,
                        &links::session(s.id),
                        &s.id.to_string(),
                    );
                }
            }
        }
        seen.set_value(Some(v.iter().map(|s| s.id).collect()));
    });
    on_cleanup(|| crate::title::set_waiting_count(0));
}

/// "Notify me": asks the browser for desktop notifications (on this click only) for an
/// approver; says when they are on, or blocked.
#[component]
pub fn NotifyMe() -> impl IntoView {
    use web_sys::NotificationPermission as P;
    let auth = use_auth();
    let state = RwSignal::new(crate::desktop::permission());
    let approver = move || {
        auth.me
            .with(|m| m.environments.iter().any(|e| e.permissions.approve))
    };
    let ask = move |_| {
        leptos::task::spawn_local(async move { state.set(crate::desktop::ask().await) });
    };
    move || {
        if !approver() || !crate::desktop::supported() {
            return None;
        }
        Some(match state.get() {
            P::Default => view! {
                <button class="link-button" data-testid="notify-me" on:click=ask
                    title="A desktop notification when a request starts waiting for you while this tab is in the background">
                    "Notify me"
                </button>
            }
            .into_any(),
            P::Granted => view! { <span class="muted" data-testid="notify-on">"Notifications on"</span> }.into_any(),
            _ => view! {
                <span class="muted" title="Allow notifications for this site in the browser's settings">
                    "Notifications blocked"
                </span>
            }
            .into_any(),
        })
    }
}

/// Requests waiting for approval.
#[component]
pub fn QueueStrip(
    /// Only this environment (all visible ones when absent).
    #[prop(optional, into)]
    environment: Option<String>,
    /// Wall-display size.
    #[prop(optional)]
    big: bool,
    /// Heading level 2 text.
    #[prop(optional, into)]
    title: Option<String>,
    /// Only the requests the signed-in user may decide ("needs my decision").
    #[prop(optional)]
    for_me: bool,
) -> impl IntoView {
    let env = environment.clone();
    let auth = use_auth();
    let list = live_list(
        ListQuery {
            environment: environment.clone(),
            state: Some(SessionState::PendingApproval),
            awaiting_me: for_me.then_some(true),
            limit: Some(MAX_PAGE),
            ..Default::default()
        },
        move |s| {
            s.state == SessionState::PendingApproval
                && env.as_ref().is_none_or(|e| *e == s.environment)
                && (!for_me || waits_for_me(auth, s))
        },
    );
    let empty = if for_me {
        "Nothing is waiting for your decision."
    } else {
        "Nothing is waiting for approval."
    };
    // The queue is served oldest first: the longest wait is the most urgent.
    let live = use_live();
    let drafts = use_context::<DenyDrafts>();
    let held_env = environment.clone();
    let shown = Memo::new(move |_| {
        list.get().map(|r| {
            r.map(|mut v| {
                v.reverse();
                // A request someone else decided while the reader types a deny reason stays,
                // so the form can say so and the text is kept.
                for id in drafts.map(|d| d.ids()).unwrap_or_default() {
                    if !v.iter().any(|s| s.id == id) {
                        let held = live
                            .get(id)
                            .filter(|s| held_env.as_ref().is_none_or(|e| *e == s.environment));
                        if let Some(s) = held {
                            v.insert(0, s);
                        }
                    }
                }
                v
            })
        })
    });
    let count = move || {
        list.get()
            .and_then(Result::ok)
            .map(|v| v.len())
            .filter(|n| *n > 0)
    };
    // Running sessions whose more time waits for a decision the reader may give.
    let ext_env = environment.clone();
    let extensions = live_list(
        ListQuery {
            environment: environment.clone(),
            state: Some(SessionState::Active),
            limit: Some(MAX_PAGE),
            ..Default::default()
        },
        move |s| {
            s.extensions.pending.is_some()
                && ext_env.as_ref().is_none_or(|e| *e == s.environment)
                && auth.may(s, breakglass_shared::access::Action::ApproveExtension)
        },
    );
    let asked = Memo::new(move |_| extensions.get().and_then(Result::ok).unwrap_or_default());
    let heading_id = format!("queue-{}", environment.as_deref().unwrap_or("all"));
    let labelled_by = heading_id.clone();
    // An approved or denied request leaves the queue: what was decided is said here instead.
    let decided = RwSignal::new(None::<Decision>);
    provide_context(Decisions(decided));
    view! {
        <section
            class=if big { "queue-strip queue-strip-big" } else { "queue-strip card" }
            aria-labelledby=labelled_by
            data-testid="queue-strip"
        >
            <h2 id=heading_id>
                {title.unwrap_or_else(|| "Waiting for approval".into())}
                {dynv(move || count().map(|n| view! { <span class="count" aria-label=format!("{n} waiting")>{n}</span> }))}
            </h2>
            {dynv(move || decided.get().map(|d| view! {
                <p class="notice notice-ok decision" role="status" tabindex="-1"
                    data-decision=d.id.to_string() data-testid="decision-note">
                    {d.text} " "
                    <a href=links::session(d.id)>"Open it"</a>
                    " "
                    <button class="link-button" on:click=move |_| decided.set(None)>"Dismiss"</button>
                </p>
            }))}
            <ListStates list=shown loading="Loading the queue…" empty=empty>
                <ul class="queue">
                    <For
                        each=move || shown.get().and_then(Result::ok).unwrap_or_default()
                        key=|s| (s.id, s.version)
                        children=move |s| view! { <QueueItem session=s big=big/> }
                    />
                </ul>
            </ListStates>
            {dynv(move || (!asked.get().is_empty()).then(|| view! {
                <h3>"More time asked"</h3>
                <ul class="queue">
                    <For
                        each=move || asked.get()
                        key=|s| (s.id, s.version)
                        children=move |s| view! {
                            <li class="queue-item" data-testid="extension-item" data-session=s.id.to_string()>
                                <div class="qi-where">
                                    <TierBadge tier=s.tier/>
                                    <strong>{s.environment.clone()}</strong>
                                    <a href=links::session(s.id) class="qi-pod">{format!("{}/{}", s.namespace, s.pod)}</a>
                                </div>
                                <ExtensionBox session=s.clone()/>
                            </li>
                        }
                    />
                </ul>
            }))}
        </section>
    }
}

/// Seconds of waiting after which a request's row turns amber, then red.
const WAIT_LONG: i64 = 5 * 60;
const WAIT_URGENT: i64 = 15 * 60;

/// One waiting request.
#[component]
fn QueueItem(
    /// The request.
    session: Session,
    /// Wall-display size.
    big: bool,
) -> impl IntoView {
    let auth = use_auth();
    let mine = auth.is_requester(&session);
    let s = session.clone();
    let clock = use_clock();
    let created = s.created_at;
    // The longer a request waits, the louder its row (the age next to it says the same in words).
    let class = move || {
        let waited = format::age_secs(created, clock.now_secs());
        let wait = if waited >= WAIT_URGENT {
            " qi-wait-urgent"
        } else if waited >= WAIT_LONG {
            " qi-wait-long"
        } else {
            ""
        };
        let size = if big { " queue-item-big" } else { "" };
        format!("queue-item{size}{wait}")
    };
    view! {
        <li class=class
            data-testid="queue-item" data-session=s.id.to_string()>
            <div class="qi-main">
                <div class="qi-where">
                    <TierBadge tier=s.tier/>
                    <strong>{s.environment.clone()}</strong>
                    <a href=links::session(s.id) class="qi-pod">{format!("{}/{}", s.namespace, s.pod)}</a>
                </div>
                <div class="qi-meta muted">
                    <span class="qi-requester">{format!("{}'s request", s.requester)}</span>
                    " · asked " <Age at=s.created_at/>
                    {format!(" · {} min · {}", s.duration_minutes, crate::format::mode_label(s.mode))}
                    {s.target_container.clone().map(|c| format!(" · sees {c}"))}
                </div>
                <p class="qi-reason">{s.reason.clone()}</p>
                {crate::format::approvals_line(&s).map(|line| view! { <p class="qi-approvals muted small" data-testid="approvals-count">{line}</p> })}
                // What approving approves, in one line; the whole spec is on the session's page.
                {s.spec.as_ref().map(|sp| {
                    let (class, verdict) = match sp.dry_run.admitted {
                        Some(true) => ("qi-spec muted small", "the cluster would admit it"),
                        Some(false) => ("qi-spec qi-spec-refused small", "the cluster would refuse it: see why"),
                        None => ("qi-spec muted small", "the cluster was not asked"),
                    };
                    view! {
                        <p class=class data-testid="queue-spec">
                            <a href=links::session(s.id)>{format!("spec {}", sp.short_sha256())}</a>
                            {format!(" · {} · {}", sp.summary.creates, verdict)}
                        </p>
                    }
                })}
                {s.ticket.clone().map(|t| view! {
                    <a class="qi-ticket" href=t.clone() target="_blank" rel="noopener noreferrer">{t.clone()}</a>
                })}
            </div>
            <div class="qi-actions">
                {mine.then(|| view! { <span class="muted">"your request"</span> })}
                <SessionActions session=session with_end=false/>
            </div>
        </li>
    }
}
