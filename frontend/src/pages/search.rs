//! `/recordings/search?q=WORDS`: the sessions whose recordings showed some words (on the screen,
//! or as a command the shell ran), newest first, each with its first moments as links into the
//! player. The query lives in the address, so a search is a link someone else can open and the
//! back button returns to the previous one. The server searches only the recordings the reader
//! may read, and only ended ones once indexed (`pending` counts those waiting).

use breakglass_shared::search::{
    query_words, HitKind, SearchHit, SearchResults, SessionHits, DEFAULT_SESSIONS, MAX_SESSIONS,
};
use leptos::prelude::*;
use uuid::Uuid;

use crate::api::{self, links, ApiError};
use crate::components::common::{dynv, ErrorNotice};
use crate::fetch::fetch;
use crate::format;
use crate::router::use_location;
use crate::title::set_title;

/// The query field's id (its label's `for`; what a test types into).
const INPUT_ID: &str = "recording-search";
/// The id of the message under the field when the query is not one.
const ERROR_ID: &str = "recording-search-error";
/// The id of the field's hint.
const HINT_ID: &str = "recording-search-hint";

/// A search the address asks for.
#[derive(Clone, Debug, PartialEq)]
struct Asked {
    /// The query as typed.
    q: String,
    /// The most sessions to list (`?limit=`); the server's default without one.
    limit: Option<u32>,
}

/// What the page shows under the form.
#[derive(Clone, Debug, PartialEq)]
enum Shown {
    /// No search asked yet.
    Idle,
    /// The address's search has no answer yet.
    Searching,
    /// The query is not one; the message is about the field.
    Invalid(String),
    /// Anything else that failed.
    Failed(ApiError),
    /// The answer to `Asked`.
    Found(Asked, SearchResults),
}

/// What a search came to: its answer, or why there is none.
async fn search(asked: &Asked) -> Shown {
    // The server's own check, made here first: an address that holds no words is answered
    // without a request, with the very message the server would give.
    if let Err(e) = query_words(&asked.q) {
        return Shown::Invalid(e.message);
    }
    match api::search_recordings(&asked.q, asked.limit).await {
        Ok(found) => Shown::Found(asked.clone(), found),
        Err(e) if e.field.as_deref() == Some("q") => Shown::Invalid(e.message),
        Err(e) => Shown::Failed(e),
    }
}

/// The recording search page.
#[component]
pub fn SearchPage() -> impl IntoView {
    let loc = use_location();
    let asked = Memo::new(move |_| {
        loc.query("q").map(|q| Asked {
            q,
            limit: loc.query("limit").and_then(|l| l.parse().ok()),
        })
    });
    // Each answer with the search it answers: one for an older address is not shown.
    let answer = fetch(move || {
        let now = asked.get();
        async move {
            let shown = match &now {
                Some(a) => search(a).await,
                None => Shown::Idle,
            };
            Ok::<_, ApiError>((now, shown))
        }
    });
    let shown = Memo::new(move |_| {
        let now = asked.get();
        match answer.get() {
            Some(Ok((a, shown))) if a == now => shown,
            Some(Err(e)) => Shown::Failed(e),
            _ if now.is_none() => Shown::Idle,
            _ => Shown::Searching,
        }
    });
    // The title names the search, so the browser's history tells searches apart.
    Effect::new(move |_| match asked.get() {
        Some(a) => set_title(&format!("“{}” · Search recordings", a.q)),
        None => set_title("Search recordings"),
    });
    view! {
        <h1 class="page-title">"Search recordings"</h1>
        <p class="muted">
            "What ended sessions showed on their screens and the commands their shells ran, in the recordings you may read."
        </p>
        <SearchForm asked=asked shown=shown refetch=Callback::new(move |()| answer.refetch())/>
        <p class="recsearch-status" role="status" aria-live="polite" data-testid="recording-search-status">
            {dynv(move || match shown.get() {
                Shown::Searching => view! {
                    <span class="spinner" aria-hidden="true"></span>
                    "Searching…"
                }
                    .into_any(),
                Shown::Found(a, found) => format::found_summary(found.sessions.len(), &a.q).into_any(),
                _ => ().into_any(),
            })}
        </p>
        <div id="recording-search-results" class="recsearch-results"
            aria-busy=move || (shown.get() == Shown::Searching).then_some("true")>
            {dynv(move || match shown.get() {
                Shown::Failed(e) => {
                    view! { <ErrorNotice error=e context="Could not search the recordings"/> }.into_any()
                }
                Shown::Found(a, found) => view! { <Results asked=a found=found/> }.into_any(),
                _ => ().into_any(),
            })}
        </div>
    }
}

/// The query's form. Submitting goes to the search's address (a new history entry); the page
/// follows the address, so typing alone changes nothing.
#[component]
fn SearchForm(
    /// The search of the address, whose query the field shows.
    asked: Memo<Option<Asked>>,
    /// What the page shows: a query refused is said beside the field.
    shown: Memo<Shown>,
    /// Asks the server again (the same query submitted again: the address does not change).
    refetch: Callback<()>,
) -> impl IntoView {
    let loc = use_location();
    let input = NodeRef::<leptos::html::Input>::new();
    let draft = RwSignal::new(asked.with_untracked(|a| a.as_ref().map(|a| a.q.clone())));
    // What a submit found wrong before any request; the address's own search has its own.
    let refused = RwSignal::new(None::<String>);
    // The back and forward buttons bring another query: the field shows it, as typed then.
    Effect::new(move |before: Option<Option<Asked>>| {
        let now = asked.get();
        if before.is_some() {
            draft.set(now.as_ref().map(|a| a.q.clone()));
            refused.set(None);
        }
        now
    });
    let error = Memo::new(move |_| {
        refused.get().or_else(|| match shown.get() {
            Shown::Invalid(m) => Some(format::field_message(&m)),
            _ => None,
        })
    });
    let submit = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        let text = draft.get_untracked().unwrap_or_default().trim().to_string();
        if let Err(e) = query_words(&text) {
            // The text stays as typed, to be mended where it is.
            refused.set(Some(format::field_message(&e.message)));
            if let Some(el) = input.get_untracked() {
                let _ = el.focus();
            }
            return;
        }
        refused.set(None);
        // A new search lists the default number of sessions again.
        if asked.with_untracked(|a| a.as_ref().is_some_and(|a| a.q == text && a.limit.is_none())) {
            refetch.run(());
        } else {
            loc.navigate(&links::recording_search_for(&text, None));
        }
    };
    let described = move || {
        if error.with(Option::is_some) {
            format!("{ERROR_ID} {HINT_ID}")
        } else {
            HINT_ID.to_string()
        }
    };
    view! {
        <form class="card recsearch-form" role="search" aria-label="Recordings" on:submit=submit>
            <div class="field">
                <label for=INPUT_ID>"Words to find"</label>
                <div class="recsearch-row">
                    <input type="search" id=INPUT_ID name="q" node_ref=input autocomplete="off"
                        spellcheck="false"
                        prop:value=move || draft.get().unwrap_or_default()
                        on:input=move |ev| draft.set(Some(event_target_value(&ev)))
                        aria-invalid=move || if error.with(Option::is_some) { "true" } else { "false" }
                        aria-describedby=described/>
                    <button type="submit" class="primary">"Search"</button>
                </div>
                {dynv(move || error.get().map(|m| view! {
                    <p class="field-error" id=ERROR_ID role="alert">{m}</p>
                }))}
                <p class="hint" id=HINT_ID>
                    "A line matches when it holds every word, in any order, whole or as the beginning of a longer one: "
                    <code>"get pods kube-system"</code>
                    "."
                </p>
            </div>
        </form>
    }
}

/// A search's answer: the note about recordings not searched yet, then the sessions found, or
/// what to try when there are none.
#[component]
fn Results(
    /// The search answered.
    asked: Asked,
    /// Its answer.
    found: SearchResults,
) -> impl IntoView {
    let pending = format::pending_note(found.pending).map(|n| {
        view! { <p class="notice notice-warn" data-testid="recording-search-pending">{n}</p> }
    });
    if found.sessions.is_empty() {
        return view! {
            {pending}
            <p class="hint" data-testid="recording-search-empty">
                "Try fewer words, or the first letters of a word. Only ended sessions are searched, once their recordings are indexed, and only those you may read: your own, and those of environments where you approve."
            </p>
        }
        .into_any();
    }
    // A full page may not be all there is: offer the most the server lists.
    let limit = asked.limit.unwrap_or(DEFAULT_SESSIONS);
    let more = (found.sessions.len() >= limit as usize && limit < MAX_SESSIONS).then(|| {
        view! {
            <p>
                <a href=links::recording_search_for(&asked.q, Some(MAX_SESSIONS))>
                    {format!("Show up to {MAX_SESSIONS} sessions")}
                </a>
            </p>
        }
    });
    let words = found.words;
    view! {
        {pending}
        <ol class="recsearch-sessions">
            {found
                .sessions
                .into_iter()
                .map(|s| view! { <SessionFound found=s words=words.clone()/> })
                .collect_view()}
        </ol>
        {more}
    }
    .into_any()
}

/// One session found: which pod, whose, when, then the moments its recording showed the
/// words, each a link into the player.
#[component]
fn SessionFound(
    /// The session and its moments.
    found: SessionHits,
    /// The words searched for (as the server matched them), marked in each line.
    words: Vec<String>,
) -> impl IntoView {
    let s = found.session;
    let id = s.id;
    let started = format::timestamp(s.active_at.unwrap_or(s.created_at));
    let hits = found
        .hits
        .into_iter()
        .map(|h| view! { <HitRow id=id hit=h words=words.clone()/> })
        .collect_view();
    view! {
        <li class="card recsearch-session" data-session=id.to_string()>
            <h2 class="recsearch-session-title">
                <a href=links::session(id)>
                    {format!("{}/{} in {}", s.namespace, s.pod, s.environment)}
                    <span class="muted small">{format!(" · {}", format::session_label(id))}</span>
                </a>
            </h2>
            <p class="muted small">{format!("requested by {} · started {started}", s.requester)}</p>
            <p class="recsearch-reason">{s.reason}</p>
            <ul class="recsearch-hits">{hits}</ul>
            {format::more_moments(found.more).map(|m| view! { <p class="muted small recsearch-more">{m}</p> })}
        </li>
    }
}

/// One moment found: when (in recording time, as the player's clock says it), whether a command
/// or a screen line, and the line with the words marked; a link that opens the player there.
#[component]
fn HitRow(
    /// The session.
    id: Uuid,
    /// The moment.
    hit: SearchHit,
    /// The words to mark.
    words: Vec<String>,
) -> impl IntoView {
    // Built here rather than taken from the hit's `link`: the app's links all come from
    // `links`, and this one opens at or just after the moment (as the command list's do), so
    // the line is already on the screen. The time shown is the one the player's clock shows
    // there.
    let href = links::recording_at_event(id, hit.at);
    let at = (hit.at.max(0.0) * 10.0).ceil() / 10.0;
    let kind = match hit.kind {
        HitKind::Command => "command",
        HitKind::Screen => "screen",
    };
    let line = format::marked(&hit.text, &words)
        .into_iter()
        .map(|(text, mark)| {
            let text = text.to_string();
            if mark {
                view! { <mark>{text}</mark> }.into_any()
            } else {
                text.into_any()
            }
        })
        .collect_view();
    view! {
        <li>
            <a class="recsearch-hit" href=href data-kind=kind>
                <span class="recsearch-time">{format::clock(at)}</span>
                " "
                <span class="badge recsearch-kind">{kind}</span>
                " "
                <code class="recsearch-line">{line}</code>
            </a>
        </li>
    }
}
