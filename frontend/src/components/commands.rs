//! A session's commands: each command line its shell ran, from the recording's `$ ` markers,
//! in order, with its moment in the recording and a link that opens the player there.

use breakglass_shared::session::RecordingRef;
use leptos::prelude::*;
use uuid::Uuid;

use crate::api::{self, links, ApiError};
use crate::cast::{self, Command};
use crate::components::common::{dynv, Empty, ErrorNotice, Loading};
use crate::fetch::fetch;
use crate::format;

/// What the section shows besides its rows. It changes only from one kind to another, so a
/// new answer of the same kind keeps the list, and a link focused in it, in place.
#[derive(Clone, PartialEq)]
enum Shown {
    Loading,
    Failed(ApiError),
    Empty,
    Rows,
}

/// The commands the shell ran in session `id`, in the order it ran them, each a link into
/// the recording at its moment. For those who may read the recording, once there is one.
#[component]
pub fn Commands(
    /// The session.
    id: Uuid,
    /// The session's stored recording, as its row names it. Each new version (a running
    /// session stores one with each segment) is read again, so the list follows the shell
    /// without polling.
    #[prop(into)]
    recording: Signal<Option<RecordingRef>>,
) -> impl IntoView {
    let list = fetch(move || {
        recording.track();
        async move {
            let bytes = api::recording(id).await?;
            cast::commands(&String::from_utf8_lossy(&bytes)).map_err(|e| ApiError {
                status: None,
                code: None,
                message: e.to_string(),
                field: None,
            })
        }
    });
    let shown = Memo::new(move |_| match list.get() {
        None => Shown::Loading,
        Some(Err(e)) => Shown::Failed(e),
        Some(Ok(c)) if c.is_empty() => Shown::Empty,
        Some(Ok(_)) => Shown::Rows,
    });
    let rows = Memo::new(move |_| list.get().and_then(Result::ok).unwrap_or_default());
    view! {
        <section class="card commands" aria-labelledby="commands-title" data-testid="commands">
            <h2 id="commands-title">"Commands"</h2>
            {dynv(move || match shown.get() {
                Shown::Loading => view! { <Loading label="Loading the commands…"/> }.into_any(),
                Shown::Failed(e) => {
                    view! { <ErrorNotice error=e context="Could not list the commands"/> }.into_any()
                }
                Shown::Empty => {
                    view! { <Empty text="No commands recorded (the shell's prompt did not mark them)"/> }
                        .into_any()
                }
                Shown::Rows => view! {
                    <ol class="command-list">
                        // Keyed by place and line: a recording only grows, so the rows already
                        // shown keep their elements when it is read again.
                        <For
                            each=move || rows.get().into_iter().enumerate()
                            key=|(i, c)| (*i, c.line.clone())
                            children=move |(_, c)| view! { <CommandRow id=id command=c/> }
                        />
                    </ol>
                }
                    .into_any(),
            })}
        </section>
    }
}

/// One command as one link: when it ran, in recording time as the player's clock says it, and
/// its line.
#[component]
fn CommandRow(
    /// The session.
    id: Uuid,
    /// The command.
    command: Command,
) -> impl IntoView {
    // The moment the link opens (rounded up to the tenth, as the link is), so the time read
    // here is the one the player's clock shows there.
    let at = (command.time.max(0.0) * 10.0).ceil() / 10.0;
    view! {
        <li>
            <a class="command-link" href=links::recording_at_event(id, command.time)>
                <span class="command-time">{format::clock(at)}</span>
                " "
                <code class="command-line">"$ "{command.line}</code>
            </a>
        </li>
    }
}
