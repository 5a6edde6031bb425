//! A session's terminal watched live, read-only: what its requester's screen shows, then each
//! piece of output and each resize as it happens, from the server's watch socket
//! (`api::open_watch`), with who watches and whether a moderated session's input is paused.
//!
//! Read-only twice over: xterm takes no input (`disableStdin`), and nothing but heartbeats is
//! ever sent; the server drops whatever a watcher sends anyway. The terminal keeps the
//! requester's size (each resize frame sets it) rather than fitting its box: the requester's
//! programs lay their screen out for that size, and a reflowed copy would mislead.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use breakglass_shared::terminal::{close, Frame};
use leptos::html::Div;
use leptos::prelude::*;
use leptos::task::spawn_local;
use send_wrapper::SendWrapper;
use uuid::Uuid;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;

use crate::api;
use crate::components::common::dynv;
use crate::components::term_socket::{
    every_heartbeat, reopen_later, Handlers, IntervalGuard, Link,
};
use crate::live::backoff;
use crate::xterm;

/// How many times in a row the view opens its socket again after a close that says to (the
/// terminal moved to another server replica, the connection was lost) before it gives up
/// and shows why. A socket that serves frames starts the count again.
pub const MAX_RETRIES: u32 = 5;

/// The size the view has until the server sends the requester's (its first frame).
const FIRST_SIZE: (u16, u16) = (80, 24);

/// The status message the server sends with each change of who watches: the view's own line
/// already says it is watching, so it is not repeated.
const PLAIN_WATCHING: &str = "watching";

/// What the view does after its socket closed with a code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterWatchClose {
    /// Open the socket again after a short pause (at most [`MAX_RETRIES`] times); the words
    /// say why.
    Retry(&'static str),
    /// Stop, keeping the last screen, and say why.
    Stop(&'static str),
}

/// Decides whether a watch socket's close is final. The terminal moving to another replica
/// (`MOVED`) and a connection lost without a close frame are worth another try: the socket
/// that follows is served wherever the terminal is now.
pub fn after_watch_close(code: u16) -> AfterWatchClose {
    use AfterWatchClose::{Retry, Stop};
    match code {
        close::MOVED => Retry("the terminal moved to another server"),
        1001 | 1006 => Retry("the connection was lost"),
        close::SESSION_ENDED => Stop("the session ended"),
        close::NOT_ACTIVE => Stop("the session is not active"),
        close::NOT_FOUND => Stop("no such session"),
        close::NOT_WATCHER => Stop("you may not watch this session"),
        close::REVOKED => Stop("your right to watch this session was taken back"),
        close::RELAY_ERROR => Stop("the connection to the pod failed"),
        close::UNAUTHENTICATED => Stop("you are signed out; sign in again"),
        close::BAD_FRAME => Stop("the live view's protocol failed (a bug; reload the page)"),
        1000 => Stop("closed"),
        _ => Stop("the connection closed"),
    }
}

/// Where the view's connection is, as its status line says.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Phase {
    Loading,
    Connecting,
    /// The server serves frames.
    Watching,
    Retrying {
        why: &'static str,
        attempt: u32,
        secs: u64,
    },
    Closed(String),
    Failed(String),
}

/// What the socket tells the page, besides the screen.
#[derive(Clone, Copy)]
struct Shown {
    phase: RwSignal<Phase>,
    /// Who watches now (this viewer included).
    watchers: RwSignal<Vec<String>>,
    /// A moderated session's input held back (no approver watches).
    paused: RwSignal<bool>,
    /// The server's last status message, when it says more than that someone watches.
    message: RwSignal<Option<String>>,
}

/// Everything that must live as long as the view, freed on unmount.
struct Viewer {
    term: xterm::Terminal,
    link: Link,
    /// Sockets opened again since one last served frames.
    attempt: Cell<u32>,
    /// Closed for good: no more reconnects.
    stopped: Cell<bool>,
    heartbeat: RefCell<Option<IntervalGuard>>,
}

impl Viewer {
    fn dispose(&self) {
        self.stopped.set(true);
        self.link.close();
        self.heartbeat.borrow_mut().take();
        self.term.dispose();
    }
}

/// The live, read-only view of session `session_id`'s terminal, for someone who may watch it
/// (`Session::may_watch`). Mounting it opens the watch socket; unmounting it closes the socket
/// (how the page stops watching).
#[component]
pub fn Watch(
    /// The session watched.
    session_id: Uuid,
    /// Its requester, whose terminal it is (names the view for screen readers).
    #[prop(into)]
    requester: String,
    /// Whether the session is still active: once it is not, the view closes its socket and
    /// stops reconnecting, keeping the last screen.
    #[prop(into)]
    active: Signal<bool>,
) -> impl IntoView {
    let shown = Shown {
        phase: RwSignal::new(Phase::Loading),
        watchers: RwSignal::new(Vec::new()),
        paused: RwSignal::new(false),
        message: RwSignal::new(None),
    };
    let holder: SendWrapper<Rc<RefCell<Option<Rc<Viewer>>>>> =
        SendWrapper::new(Rc::new(RefCell::new(None)));
    // Unmounted: a view put away while xterm.js was still loading must not open its socket
    // afterwards (nothing would close it, and the requester would see a watcher who left).
    let gone = SendWrapper::new(Rc::new(Cell::new(false)));
    let node = NodeRef::<Div>::new();

    let (h, g) = (holder.clone(), gone.clone());
    node.on_load(move |el| {
        let (h, g) = (h.clone(), g.clone());
        spawn_local(async move {
            let loaded = xterm::load().await;
            if g.get() {
                return;
            }
            if let Err(e) = loaded {
                shown.phase.set(Phase::Failed(e));
                return;
            }
            let term = xterm::Terminal::create(&xterm::Options {
                read_only: true,
                size: Some(FIRST_SIZE),
                scrollback: 1000,
            });
            term.open(&el);
            let viewer = Rc::new(Viewer {
                term,
                link: Link::default(),
                attempt: Cell::new(0),
                stopped: Cell::new(false),
                heartbeat: RefCell::new(None),
            });
            // A heartbeat keeps proxies from closing a quiet socket; the server drops it.
            let v = Rc::downgrade(&viewer);
            *viewer.heartbeat.borrow_mut() = every_heartbeat(move || {
                if let Some(v) = v.upgrade() {
                    v.link.send(&Frame::Heartbeat);
                }
            });
            *h.borrow_mut() = Some(viewer.clone());
            open_socket(viewer, session_id, shown, active);
        });
    });

    // The session left Active: the server closes the socket too, but the page may hear first.
    let h = holder.clone();
    Effect::new(move |_| {
        if active.get() {
            return;
        }
        if let Some(v) = h.borrow().as_ref().filter(|v| !v.stopped.get()) {
            v.stopped.set(true);
            v.link.close();
            shown.phase.set(Phase::Closed("the session ended".into()));
        }
    });

    let h = holder;
    on_cleanup(move || {
        gone.set(true);
        if let Some(v) = h.borrow_mut().take() {
            v.dispose();
        }
    });

    let label = format!("Live view of {requester}'s terminal (read-only)");
    let whose = requester.clone();
    let watching = move || shown.phase.with(|p| *p == Phase::Watching);
    view! {
        <div class="watch" data-testid="watch">
            <div class="terminal-bar">
                <div class="terminal-status" role="status" aria-live="polite" data-testid="watch-status">
                    {dynv(move || match shown.phase.get() {
                        Phase::Loading => "Loading the live view…".to_string(),
                        Phase::Connecting => "Connecting…".to_string(),
                        Phase::Watching => format!("Watching live, read-only: nothing you type reaches {requester}'s terminal."),
                        Phase::Retrying { why, attempt, secs } => format!("Reconnecting in {secs} s ({why}; attempt {attempt} of {MAX_RETRIES})…"),
                        Phase::Closed(why) => format!("Live view closed: {why}."),
                        Phase::Failed(why) => format!("Live view unavailable: {why}."),
                    })}
                    {dynv(move || {
                        let names = shown.watchers.get();
                        (watching() && !names.is_empty()).then(|| view! {
                            <span data-testid="watch-watchers">{format!(" · Watching now: {}", names.join(", "))}</span>
                        })
                    })}
                    {dynv(move || (watching() && shown.paused.get()).then(|| view! {
                        <strong data-testid="watch-paused">{format!(" · {whose}'s input is paused until an approver watches")}</strong>
                    }))}
                    {dynv(move || shown.message.get().filter(|_| watching()).map(|m| view! { <span class="muted">" · " {m}</span> }))}
                </div>
            </div>
            // Focusable so that a keyboard scrolls it when the requester's terminal is wider
            // than this page.
            <div class="watch-box" node_ref=node role="region" tabindex="0" aria-label=label
                data-testid="watch-screen"></div>
        </div>
    }
}

/// Opens the watch socket (again) and wires it to the view.
fn open_socket(viewer: Rc<Viewer>, id: Uuid, shown: Shown, active: Signal<bool>) {
    if viewer.stopped.get() {
        return;
    }
    shown.phase.set(Phase::Connecting);
    let ws = match api::open_watch(id) {
        Ok(ws) => ws,
        Err(e) => {
            shown.phase.set(Phase::Failed(e.message));
            return;
        }
    };
    let v = Rc::downgrade(&viewer);
    let on_output = Box::new(move |bytes: &js_sys::Uint8Array| {
        if let Some(v) = v.upgrade() {
            v.term.write_bytes(bytes);
        }
    });
    let v = Rc::downgrade(&viewer);
    let on_frame = Box::new(move |frame: Frame<'_>| {
        let Some(v) = v.upgrade() else { return };
        match frame {
            Frame::Resize { cols, rows } => {
                // The first frame a served socket sends: it is watching now.
                v.attempt.set(0);
                if shown.phase.with_untracked(|p| *p != Phase::Watching) {
                    shown.phase.set(Phase::Watching);
                }
                // After what was written before it is parsed, at the size it was written for.
                let t = v.term.clone();
                let resize = Closure::once_into_js(move || t.resize(cols, rows));
                v.term.write_then("", resize.unchecked_ref());
            }
            Frame::Status(s) => {
                shown.watchers.set(s.watchers);
                shown.paused.set(s.paused);
                shown
                    .message
                    .set(Some(s.message).filter(|m| m != PLAIN_WATCHING && !m.is_empty()));
            }
            Frame::Data(_) | Frame::Heartbeat => {}
        }
    });
    let weak = Rc::downgrade(&viewer);
    let on_close = Box::new(move |code: u16, reason: String| {
        let Some(v) = weak.upgrade() else { return };
        if v.stopped.get() {
            return;
        }
        let with_reason = |why: &str| {
            if reason.is_empty() {
                why.to_string()
            } else {
                format!("{why} ({reason})")
            }
        };
        match after_watch_close(code) {
            AfterWatchClose::Stop(why) => {
                v.stopped.set(true);
                shown.phase.set(Phase::Closed(with_reason(why)));
            }
            AfterWatchClose::Retry(_) if !active.get_untracked() => {
                v.stopped.set(true);
                shown.phase.set(Phase::Closed("the session ended".into()));
            }
            AfterWatchClose::Retry(why) if v.attempt.get() >= MAX_RETRIES => {
                v.stopped.set(true);
                let gave_up = format!("{why}, and {MAX_RETRIES} attempts to reconnect failed");
                shown.phase.set(Phase::Closed(with_reason(&gave_up)));
            }
            AfterWatchClose::Retry(why) => {
                let attempt = v.attempt.get() + 1;
                v.attempt.set(attempt);
                let delay = backoff(attempt);
                shown.phase.set(Phase::Retrying {
                    why,
                    attempt,
                    secs: delay.as_secs().max(1),
                });
                reopen_later(weak.clone(), delay, move |v| {
                    open_socket(v, id, shown, active);
                });
            }
        }
    });
    viewer.link.replace(
        ws,
        Handlers {
            // Nothing to send: the first frames come from the server.
            on_open: Box::new(|| {}),
            on_output,
            on_frame,
            on_close,
        },
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moved_and_lost_retry_the_rest_stop() {
        assert!(matches!(
            after_watch_close(close::MOVED),
            AfterWatchClose::Retry(_)
        ));
        assert!(matches!(after_watch_close(1006), AfterWatchClose::Retry(_)));
        for code in [
            close::SESSION_ENDED,
            close::NOT_ACTIVE,
            close::NOT_FOUND,
            close::NOT_WATCHER,
            close::REVOKED,
            close::RELAY_ERROR,
            1000,
        ] {
            assert!(
                matches!(after_watch_close(code), AfterWatchClose::Stop(_)),
                "{code}"
            );
        }
    }
}
