//! `/sessions/:id`: one session — its live state, actions, events, the commands its shell ran,
//! and the review form.

use crate::router::use_params;
use breakglass_shared::access::Action;
use breakglass_shared::api::ReviewRequest;
use breakglass_shared::session::{short_id, Verdict};
use breakglass_shared::validate;
use leptos::prelude::*;
use leptos::task::spawn_local;
use uuid::Uuid;

use crate::api;
use crate::auth::use_auth;
use crate::components::breadcrumb::{steps_to_pod, Breadcrumb};
use crate::components::commands::Commands;
use crate::components::common::{dynv, focus_soon};
use crate::components::session_panel::{live_detail, SessionPanel};
use crate::components::spec::SpecCard;
use crate::format::session_label;
use crate::live::use_live;
use crate::title::set_title;

/// A session's page.
#[component]
pub fn SessionPage() -> impl IntoView {
    let params = use_params();
    let id = Memo::new(move |_| params.get("id").and_then(|s| Uuid::parse_str(&s).ok()));
    move || {
        match id.get() {
        Some(id) => view! { <SessionView id=id/> }.into_any(),
        None => view! {
            <p class="notice notice-error" role="alert">"This is not a session address (session ids are UUIDs)."</p>
        }
        .into_any(),
    }
    }
}

#[component]
fn SessionView(id: Uuid) -> impl IntoView {
    set_title(&format!("Session {}", short_id(&id)));
    let auth = use_auth();
    let (_, session) = live_detail(id);
    let reviewable = Memo::new(move |_| {
        session.with(|s| s.as_ref().is_some_and(|s| auth.may(s, Action::Review)))
    });
    // For those who may read the recording, once there is one.
    let evidence = Memo::new(move |_| {
        session.with(|s| {
            s.as_ref()
                .is_some_and(|s| s.recording.is_some() && auth.may(s, Action::ReadRecording))
        })
    });
    // Apart from the session, so only a newly stored recording lists the commands again.
    let stored = Memo::new(move |_| session.with(|s| s.as_ref().and_then(|s| s.recording.clone())));
    view! {
        <Breadcrumb steps=Signal::derive(move || session.with(|s| steps_to_pod(s.as_ref()))) current=session_label(id)/>
        <h1 class="page-title">
            {dynv(move || session.get().map(|s| format!("{}/{} in {}", s.namespace, s.pod, s.environment)))}
            <span class="muted small">{format!(" {}", session_label(id))}</span>
        </h1>
        <SessionPanel id=id with_events=true on_session_page=true/>
        <SpecCard session=session/>
        <Show when=move || evidence.get()>
            <Commands id=id recording=stored/>
            <section class="card" aria-labelledby="evidence-title">
                <h2 id="evidence-title">"Recording and evidence"</h2>
                <Retention id=id/>
                <p class="evidence-line">
                    <crate::components::player::EvidenceLink id=id/>
                    <span class="muted small">" The row, its events, the approved spec, the recording and its transparency-log entry, with a VERIFY.md an auditor follows offline."</span>
                </p>
            </section>
        </Show>
        <Show when=move || reviewable.get()>
            <ReviewForm id=id/>
        </Show>
    }
}

/// The recording's lock, as the store reports it now: what retention an auditor can rely on.
#[component]
fn Retention(
    /// The session.
    id: Uuid,
) -> impl IntoView {
    let lock = crate::fetch::fetch(move || async move { api::recording_retention(id).await });
    move || {
        lock.get().map(|r| {
            let text = match r {
                Err(e) => format!("The store could not say how it keeps the recording: {}", e.message),
                Ok(r) => match (&r.mode, r.retain_until) {
                    (Some(mode), Some(until)) => format!(
                        "Locked ({mode}) until {}{}, as the store ({}) reports it.",
                        crate::format::timestamp(until),
                        if r.legal_hold { ", and under a legal hold" } else { "" },
                        r.store
                    ),
                    _ if !r.lockable => format!(
                        "Not locked: the recordings are in a {}, which keeps no locks (production records to a bucket with Object Lock).",
                        r.store
                    ),
                    _ => format!(
                        "Not locked: the store ({}) reports no lock on this version{}. Check the bucket's default retention (breakglass-server doctor --bucket).",
                        r.store,
                        if r.legal_hold { ", only a legal hold" } else { "" }
                    ),
                },
            };
            view! { <p data-testid="recording-retention">{text}</p> }
        })
    }
}

/// Records a review of a finished session.
#[component]
fn ReviewForm(
    /// The session.
    id: Uuid,
) -> impl IntoView {
    let live = use_live();
    // No verdict is assumed: the reviewer picks one.
    let verdict = RwSignal::new(None::<Verdict>);
    let notes = RwSignal::new(String::new());
    // The field at fault (`verdict` or `notes`) and what to do.
    let error = RwSignal::new(None::<(&'static str, String)>);
    let busy = RwSignal::new(false);
    let submit = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        let Some(picked) = verdict.get_untracked() else {
            error.set(Some(("verdict", "Choose a verdict first.".into())));
            return;
        };
        let req = ReviewRequest {
            verdict: picked,
            notes: notes.get_untracked().trim().to_string(),
        };
        if let Err(e) = validate::review_notes(req.verdict, &req.notes) {
            error.set(Some(("notes", format!("Notes {}", e.message))));
            return;
        }
        busy.set(true);
        error.set(None);
        spawn_local(async move {
            match api::review(id, &req).await {
                Ok(s) => {
                    live.upsert(s);
                    // The form goes away with the review it recorded: focus the review.
                    focus_soon(vec!["[data-testid=session-review]".into()]);
                }
                Err(e) => {
                    let field = if e.field.as_deref() == Some("verdict") {
                        "verdict"
                    } else {
                        "notes"
                    };
                    error.try_set(Some((field, e.message)));
                }
            }
            // The form goes away with the review it recorded: only `try_` writes here.
            busy.try_set(false);
        });
    };
    let pick = move |v: Verdict| {
        verdict.set(Some(v));
        if error.get_untracked().is_some_and(|(f, _)| f == "verdict") {
            error.set(None);
        }
    };
    let error_on = move |field: &'static str| move || error.get().filter(|(f, _)| *f == field);
    let invalid = move |field: &'static str| {
        move || {
            if error_on(field)().is_some() {
                "true"
            } else {
                "false"
            }
        }
    };
    view! {
        <form class="card review-form" on:submit=submit aria-labelledby="review-title">
            <h2 id="review-title">"Review"</h2>
            <Watched id=id/>
            <fieldset class="field" aria-invalid=invalid("verdict")
                aria-describedby=move || error_on("verdict")().map(|_| "review-verdict-error")>
                <legend>"Verdict"</legend>
                <label class="choice"><input type="radio" name="verdict" value="ok" on:change=move |_| pick(Verdict::Ok)/>" No concerns: the access was justified and proportionate"</label>
                <label class="choice"><input type="radio" name="verdict" value="concern" on:change=move |_| pick(Verdict::Concern)/>" Concern: someone should follow up"</label>
                {dynv(move || error_on("verdict")().map(|(_, m)| view! { <p class="field-error" id="review-verdict-error" role="alert">{m}</p> }))}
            </fieldset>
            <div class="field">
                <label for="review-notes">"Notes "
                    <span class="muted">{move || if verdict.get() == Some(Verdict::Concern) { "(required for a concern: what to follow up, and why)" } else { "(optional)" }}</span>
                </label>
                <textarea id="review-notes" rows="3" bind:value=notes
                    aria-invalid=invalid("notes")
                    aria-describedby=move || error_on("notes")().map(|_| "review-notes-error")></textarea>
            </div>
            {dynv(move || error_on("notes")().map(|(_, m)| view! { <p class="field-error" id="review-notes-error" role="alert">{m}</p> }))}
            <button type="submit" class="primary" disabled=busy>"Record review"</button>
        </form>
    }
}

/// Whether the reviewer has played the recording in this browser, and how much of it, with a
/// link to it: a verdict on a recording nobody watched is worth little.
#[component]
fn Watched(
    /// The session.
    id: Uuid,
) -> impl IntoView {
    let seen = crate::components::player::watched::load(id).filter(|w| w.seconds() > 0.0);
    let sentence = match &seen {
        None => "You have not played the recording in this browser yet: watch it, then record what you found.".to_string(),
        Some(w) => format!(
            "You have played {}% of the recording in this browser ({} of {}).",
            (w.share() * 100.0).floor(),
            crate::format::clock(w.seconds()),
            crate::format::clock(w.total)
        ),
    };
    let class = if seen.as_ref().is_some_and(|w| w.share() >= 0.99) {
        "watched watched-all"
    } else {
        "watched watched-part"
    };
    view! {
        <p class=class data-testid="review-watched">
            {sentence} " " <a href=api::links::recording(id, None)>"Open the recording"</a>
        </p>
    }
}
