//! The session's terminal: xterm.js attached to the relay's WebSocket with binary frames
//! (`shared::terminal`), fitted to its box, resize frames on every size change, a heartbeat, and
//! reconnection with backoff after a network blip while the session is active. It shows who
//! watches the terminal live and, in a moderated session, that input is paused until an
//! approver watches (the server holds keystrokes back meanwhile).
//!
//! The box takes the window's free height below its top (all of the window in full screen), so
//! the prompt on the bottom row is on screen without scrolling; the page's layout and the
//! window are watched, and each new size reaches the pod as a resize frame.

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
use crate::components::term_socket::{every_heartbeat, reopen_later, Handlers, JsHandler, Link};
use crate::live::backoff;
use crate::xterm;

/// Written into the terminal when the server starts holding input back, so the pause is seen
/// where the person is typing (the notice above the terminal can be out of their eye line).
const PAUSED_LINE: &str = "\r\n\x1b[33m[break-glass] input paused: this session is moderated; what you type reaches the pod only while an approver watches\x1b[0m\r\n";

/// Written into the terminal when input flows again.
const RESUMED_LINE: &str =
    "\r\n\x1b[32m[break-glass] input resumed: an approver is watching\x1b[0m\r\n";

/// Space kept below the box when it is sized to the window, in CSS pixels.
const BOTTOM_GAP: f64 = 16.0;

/// The smallest box, in CSS pixels (about a dozen rows): below that the page scrolls instead.
const MIN_BOX: f64 = 220.0;

/// What to do after the socket closed with `code`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AfterClose {
    /// Try again (network blip, server restart, relay hiccup).
    Reconnect,
    /// Stop, and say why.
    Stop(&'static str),
}

/// Decides whether a close is final (the session is over, or this tab may not attach).
pub fn after_close(code: u16) -> AfterClose {
    match code {
        close::SESSION_ENDED => AfterClose::Stop("the session ended"),
        close::NOT_REQUESTER => AfterClose::Stop("only the requester may type in this session"),
        close::UNAUTHENTICATED => AfterClose::Stop("you are signed out; sign in again"),
        close::NOT_ACTIVE => AfterClose::Stop("the session is not active"),
        close::NOT_FOUND => AfterClose::Stop("no such session"),
        close::BAD_FRAME => {
            AfterClose::Stop("the terminal protocol failed (a bug; reload the page)")
        }
        close::TAKEN_OVER => AfterClose::Stop("the terminal was opened in another tab or window"),
        close::REVOKED => AfterClose::Stop("your access to this terminal was taken back"),
        1000 => AfterClose::Stop("closed"),
        _ => AfterClose::Reconnect,
    }
}

/// Connection state shown above the terminal.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Conn {
    Loading,
    Connecting,
    Connected,
    Retrying { attempt: u32, secs: u64 },
    Closed(String),
    Failed(String),
}

/// What the socket tells the page, besides the screen.
#[derive(Clone, Copy)]
struct Shown {
    conn: RwSignal<Conn>,
    /// The server's last status message.
    status: RwSignal<Option<String>>,
    /// Who watches the terminal live now.
    watchers: RwSignal<Vec<String>>,
    /// A moderated session's input held back (no approver watches).
    paused: RwSignal<bool>,
}

/// Everything that must live as long as the terminal, freed on unmount.
struct Inner {
    /// Where xterm is opened (its size is what the fit addon fills).
    el: web_sys::Element,
    /// The box around it, sized to the window.
    bx: web_sys::HtmlElement,
    /// Full screen: the box fills the window.
    full: Cell<bool>,
    /// The window's `resize` listener, removed on unmount.
    on_window: RefCell<Option<JsHandler>>,
    term: xterm::Terminal,
    fit: xterm::FitAddon,
    link: Link,
    attempt: Cell<u32>,
    stopped: Cell<bool>,
    keep: RefCell<Vec<Box<dyn std::any::Any>>>,
    subs: RefCell<Vec<xterm::Disposable>>,
    observers: RefCell<Vec<web_sys::ResizeObserver>>,
}

impl Inner {
    /// Gives the box the window's free height below its top (below the status line in full
    /// screen, where the box's top is the window's).
    fn size_box(&self) {
        let Some((w, window_height)) = window_and_height() else {
            return;
        };
        let scrolled = if self.full.get() {
            0.0
        } else {
            w.scroll_y().unwrap_or(0.0)
        };
        let top = self.bx.get_bounding_client_rect().top() + scrolled;
        let height = format!(
            "{}px",
            (window_height - top - BOTTOM_GAP).max(MIN_BOX).floor()
        );
        let style = self.bx.style();
        if style.get_property_value("height").ok().as_deref() != Some(height.as_str()) {
            let _ = style.set_property("height", &height);
        }
    }

    /// Scrolls the page so the box's bottom (the prompt) is in the window, when it is not.
    fn reveal(&self) {
        let Some((_, window_height)) = window_and_height() else {
            return;
        };
        if self.bx.get_bounding_client_rect().bottom() > window_height {
            self.bx.scroll_into_view_with_bool(false);
        }
    }

    fn dispose(&self) {
        self.stopped.set(true);
        self.link.close();
        for o in self.observers.borrow_mut().drain(..) {
            o.disconnect();
        }
        if let (Some(w), Some(f)) = (web_sys::window(), self.on_window.borrow_mut().take()) {
            let _ = w.remove_event_listener_with_callback("resize", f.as_ref().unchecked_ref());
        }
        for s in self.subs.borrow_mut().drain(..) {
            s.dispose();
        }
        self.term.dispose();
        self.keep.borrow_mut().clear();
    }
}

/// The window and its height in CSS pixels.
fn window_and_height() -> Option<(web_sys::Window, f64)> {
    let w = web_sys::window()?;
    let height = w.inner_height().ok()?.as_f64()?;
    Some((w, height))
}

/// The live terminal of session `session_id` (only for its requester, while active).
#[component]
pub fn Terminal(
    /// The session.
    session_id: Uuid,
    /// Whether the session is active (reconnects stop when it is not).
    #[prop(into)]
    active: Signal<bool>,
    /// Once the session is over: why, as a sentence. The terminal keeps its screen and
    /// scrollback, with a note on top saying so and linking to the recording.
    #[prop(into)]
    ended: Signal<Option<String>>,
) -> impl IntoView {
    let shown = Shown {
        conn: RwSignal::new(Conn::Loading),
        status: RwSignal::new(None),
        watchers: RwSignal::new(Vec::new()),
        paused: RwSignal::new(false),
    };
    let Shown {
        conn,
        status: server_status,
        watchers,
        paused,
    } = shown;
    // Who watches and the pause are the server's word on the open socket: not shown while
    // there is none (connecting, closed), when they may be stale.
    let connected = move || conn.with(|c| *c == Conn::Connected);
    // The reader put the end note away to see the whole screen.
    let overlay_closed = RwSignal::new(false);
    let full = RwSignal::new(false);
    let holder: SendWrapper<Rc<RefCell<Option<Rc<Inner>>>>> =
        SendWrapper::new(Rc::new(RefCell::new(None)));
    let node = NodeRef::<Div>::new();
    let box_node = NodeRef::<Div>::new();

    let h = holder.clone();
    node.on_load(move |el| {
        let h = h.clone();
        spawn_local(async move {
            if let Err(e) = xterm::load().await {
                conn.set(Conn::Failed(e));
                return;
            }
            let Some(bx) = box_node.get_untracked() else {
                return;
            };
            let inner = Rc::new(mount(&el, bx.into()));
            *h.borrow_mut() = Some(inner.clone());
            connect(inner, session_id, shown, active);
        });
    });

    // The session left Active: stop reconnecting and close.
    let h = holder.clone();
    Effect::new(move |_| {
        if !active.get() {
            if let Some(inner) = h.borrow().as_ref() {
                inner.stopped.set(true);
                inner.link.close();
                conn.set(Conn::Closed("the session is no longer active".into()));
            }
        }
    });

    // Full screen on and off: the box is sized again (once the class is applied) and keeps
    // the keyboard. Escape stays with the terminal (editors use it); the button leaves.
    let h = holder.clone();
    Effect::new(move |prev: Option<bool>| {
        let now = full.get();
        if prev.is_some_and(|p| p != now) {
            if let Some(inner) = h.borrow().as_ref() {
                inner.full.set(now);
                let i = Rc::downgrade(inner);
                request_animation_frame(move || {
                    if let Some(i) = i.upgrade() {
                        i.size_box();
                        i.term.focus();
                    }
                });
            }
        }
        now
    });

    let h = holder;
    on_cleanup(move || {
        if let Some(inner) = h.borrow_mut().take() {
            inner.dispose();
        }
    });

    view! {
        <div class=move || if full.get() { "terminal-wrap term-full" } else { "terminal-wrap" } data-testid="terminal">
            <div class="terminal-bar">
            <div class="terminal-status" role="status" aria-live="polite">
                {dynv(move || match conn.get() {
                    Conn::Loading => "Loading the terminal…".to_string(),
                    Conn::Connecting => "Connecting…".to_string(),
                    Conn::Connected => "Connected: only you can type here; everything is recorded.".to_string(),
                    Conn::Retrying { attempt, secs } => format!("Connection lost; reconnecting in {secs} s (attempt {attempt})…"),
                    Conn::Closed(why) => format!("Terminal closed: {why}."),
                    Conn::Failed(why) => format!("Terminal unavailable: {why}."),
                })}
                // While paused the notice below says what the server's message would.
                {dynv(move || server_status.get().filter(|_| ended.with(Option::is_none) && !paused.get()).map(|m| view! { <span class="muted">" · " {m}</span> }))}
            </div>
            <div class="term-watchers" role="status" aria-live="polite">
                {dynv(move || {
                    let names = watchers.get();
                    (connected() && !names.is_empty()).then(|| view! {
                        <span data-testid="terminal-watchers">{format!("Watching: {}", names.join(", "))}</span>
                    })
                })}
            </div>
            <button type="button" class="term-full-toggle" data-testid="terminal-full-screen"
                aria-pressed=move || if full.get() { "true" } else { "false" }
                on:click=move |_| full.update(|f| *f = !*f)>"Full screen"</button>
            </div>
            {dynv(move || ended.get().filter(|_| !overlay_closed.get()).map(|why| view! {
                <div class="term-overlay" role="status" data-testid="terminal-ended">
                    <strong>"This session is over. "</strong> {why} " "
                    <a href=api::links::recording(session_id, None)>"Watch the recording"</a>
                    <button type="button" class="overlay-close" aria-label="Hide this note"
                        on:click=move |_| overlay_closed.set(true)>"Hide"</button>
                </div>
            }))}
            <div role="status" aria-live="polite">
                {dynv(move || (connected() && paused.get()).then(|| view! {
                    <p class="notice notice-warn term-paused" data-testid="input-paused">
                        <strong>"Input paused. "</strong>
                        "This session is moderated: what you type reaches the pod only while an approver watches it live, and is dropped meanwhile. Typing works again as soon as one watches."
                    </p>
                }))}
            </div>
            <div class="term-box" node_ref=box_node>
                <div class="term-screen" node_ref=node aria-label="Terminal"></div>
            </div>
        </div>
    }
}

/// Creates the xterm in `el` (inside the box `bx`), sizes the box and fits the terminal to it.
fn mount(el: &web_sys::HtmlDivElement, bx: web_sys::HtmlElement) -> Inner {
    let term = xterm::Terminal::create(&xterm::Options {
        read_only: false,
        size: None,
        scrollback: 5000,
    });
    let fit = term.fit_addon();
    term.open(el);
    let inner = Inner {
        el: el.clone().into(),
        bx,
        full: Cell::new(false),
        on_window: RefCell::new(None),
        term,
        fit,
        link: Link::default(),
        attempt: Cell::new(0),
        stopped: Cell::new(false),
        keep: RefCell::new(vec![]),
        subs: RefCell::new(vec![]),
        observers: RefCell::new(vec![]),
    };
    inner.size_box();
    inner.fit.fit();
    inner
}

/// Wires input, resize and the socket (called once after [`mount`]).
fn connect(inner: Rc<Inner>, id: Uuid, shown: Shown, active: Signal<bool>) {
    // Keystrokes and pastes -> data frames.
    let i = Rc::downgrade(&inner);
    let on_data = Closure::<dyn FnMut(String)>::new(move |s: String| {
        if let Some(i) = i.upgrade() {
            i.link.send(&Frame::Data(s.as_bytes()));
        }
    });
    let i = Rc::downgrade(&inner);
    let on_resize = Closure::<dyn FnMut(xterm::Dimensions)>::new(move |d: xterm::Dimensions| {
        if let Some(i) = i.upgrade() {
            i.link.send(&Frame::Resize {
                cols: d.cols().max(1),
                rows: d.rows().max(1),
            });
        }
    });
    inner.subs.borrow_mut().push(inner.term.on_data(&on_data));
    inner
        .subs
        .borrow_mut()
        .push(inner.term.on_resize(&on_resize));
    inner.keep.borrow_mut().push(Box::new(on_data));
    inner.keep.borrow_mut().push(Box::new(on_resize));

    // Fit to the box whenever it changes size.
    let i = Rc::downgrade(&inner);
    let on_box = Closure::<dyn FnMut(JsValue)>::new(move |_| {
        if let Some(i) = i.upgrade() {
            i.fit.fit();
        }
    });
    // Size the box again when the window or the page's layout above it changes (a frame
    // later: sizing inside a resize observer's callback would be seen as a loop).
    let i = Rc::downgrade(&inner);
    let relayout = Closure::<dyn FnMut(JsValue)>::new(move |_| {
        let i = i.clone();
        request_animation_frame(move || {
            if let Some(i) = i.upgrade() {
                i.size_box();
            }
        });
    });
    let observe = |cb: &JsHandler, target: Option<web_sys::Element>| {
        let (Some(target), Ok(o)) = (
            target,
            web_sys::ResizeObserver::new(cb.as_ref().unchecked_ref()),
        ) else {
            return;
        };
        o.observe(&target);
        inner.observers.borrow_mut().push(o);
    };
    observe(&on_box, Some(inner.el.clone()));
    observe(
        &relayout,
        web_sys::window()
            .and_then(|w| w.document())
            .and_then(|d| d.body())
            .map(Into::into),
    );
    if let Some(w) = web_sys::window() {
        let _ = w.add_event_listener_with_callback("resize", relayout.as_ref().unchecked_ref());
    }
    inner.keep.borrow_mut().push(Box::new(on_box));
    *inner.on_window.borrow_mut() = Some(relayout);

    let i = Rc::downgrade(&inner);
    if let Some(guard) = every_heartbeat(move || {
        if let Some(i) = i.upgrade() {
            i.link.send(&Frame::Heartbeat);
        }
    }) {
        inner.keep.borrow_mut().push(Box::new(guard));
    }

    open_socket(inner, id, shown, active);
}

/// Opens the socket (again) and wires it to the terminal and to what the page shows.
fn open_socket(inner: Rc<Inner>, id: Uuid, shown: Shown, active: Signal<bool>) {
    let conn = shown.conn;
    if inner.stopped.get() {
        return;
    }
    conn.set(Conn::Connecting);
    let ws = match api::open_terminal(id) {
        Ok(ws) => ws,
        Err(e) => {
            conn.set(Conn::Failed(e.message));
            return;
        }
    };
    let i = Rc::downgrade(&inner);
    let on_open = Box::new(move || {
        let Some(i) = i.upgrade() else { return };
        i.attempt.set(0);
        conn.set(Conn::Connected);
        let (cols, rows) = (i.term.cols().max(1), i.term.rows().max(1));
        i.link.send(&Frame::Resize { cols, rows });
        i.reveal();
        i.term.focus();
    });
    let i = Rc::downgrade(&inner);
    let on_output = Box::new(move |bytes: &js_sys::Uint8Array| {
        if let Some(i) = i.upgrade() {
            i.term.write_bytes(bytes);
        }
    });
    let i = Rc::downgrade(&inner);
    let on_frame = Box::new(move |frame: Frame<'_>| {
        let (Some(i), Frame::Status(s)) = (i.upgrade(), frame) else {
            return;
        };
        // A line in the terminal on each change only (a reconnect that finds the session
        // still paused adds none).
        if s.paused != shown.paused.get_untracked() {
            i.term
                .write_str(if s.paused { PAUSED_LINE } else { RESUMED_LINE });
            shown.paused.set(s.paused);
        }
        shown.watchers.set(s.watchers);
        shown.status.set(Some(s.message));
    });
    let weak = Rc::downgrade(&inner);
    let on_close = Box::new(move |code: u16, reason: String| {
        let Some(i) = weak.upgrade() else { return };
        if i.stopped.get() {
            return;
        }
        match after_close(code) {
            AfterClose::Stop(why) => {
                i.stopped.set(true);
                let why = if reason.is_empty() {
                    why.to_string()
                } else {
                    format!("{why} ({reason})")
                };
                conn.set(Conn::Closed(why));
            }
            AfterClose::Reconnect if !active.get_untracked() => {
                conn.set(Conn::Closed("the session is no longer active".into()));
            }
            AfterClose::Reconnect => {
                let attempt = i.attempt.get() + 1;
                i.attempt.set(attempt);
                let delay = backoff(attempt);
                conn.set(Conn::Retrying {
                    attempt,
                    secs: delay.as_secs().max(1),
                });
                reopen_later(weak.clone(), delay, move |i| {
                    open_socket(i, id, shown, active);
                });
            }
        }
    });
    inner.link.replace(
        ws,
        Handlers {
            on_open,
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
    fn closes_that_end_for_good() {
        assert_eq!(after_close(1006), AfterClose::Reconnect, "network blip");
        assert_eq!(after_close(1011), AfterClose::Reconnect, "server error");
        assert_eq!(after_close(close::RELAY_ERROR), AfterClose::Reconnect);
        assert!(matches!(
            after_close(close::SESSION_ENDED),
            AfterClose::Stop(_)
        ));
        assert!(matches!(
            after_close(close::TAKEN_OVER),
            AfterClose::Stop(_)
        ));
        assert!(matches!(
            after_close(close::NOT_REQUESTER),
            AfterClose::Stop(_)
        ));
    }

    #[test]
    fn frames_on_the_wire() {
        assert_eq!(Frame::Data(b"ls\r").encode(), vec![0, b'l', b's', b'\r']);
        assert_eq!(
            Frame::Resize {
                cols: 120,
                rows: 40
            }
            .encode(),
            vec![1, 0, 120, 0, 40]
        );
        assert_eq!(Frame::Heartbeat.encode(), vec![2]);
    }
}
