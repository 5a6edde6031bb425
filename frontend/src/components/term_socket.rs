//! The WebSocket side that the requester's terminal (`terminal.rs`) and a watcher's live view
//! (`watch.rs`) share: the socket in use and the handlers registered on it, the frames read
//! from it (output handed on without a copy into wasm), the close's code and reason, and the
//! heartbeat. What each does with a close (reconnect or stop, and the words) stays with it.

use std::cell::RefCell;
use std::time::Duration;

use breakglass_shared::terminal::{Frame, TAG_DATA};
use leptos::prelude::{set_interval_with_handle, IntervalHandle};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;

/// Time between heartbeats: well inside the idle timeouts of the proxies in front of the
/// server, so a quiet terminal's socket is not closed for silence.
pub const HEARTBEAT: Duration = Duration::from_secs(20);

/// A DOM event handler kept alive while registered.
pub type JsHandler = Closure<dyn FnMut(JsValue)>;

/// What the owner of a socket does with its events.
pub struct Handlers {
    /// The socket opened.
    pub on_open: Box<dyn FnMut()>,
    /// Terminal output: the payload of a data frame, a view into the message's own buffer
    /// (outside wasm memory, so xterm may parse it later).
    pub on_output: Box<dyn FnMut(&js_sys::Uint8Array)>,
    /// Every other frame that decodes (resize, status, heartbeat); the rest are skipped.
    pub on_frame: Box<dyn FnMut(Frame<'_>)>,
    /// The socket closed, with its code (1006 when the browser got no close frame) and the
    /// server's reason (empty when none).
    pub on_close: Box<dyn FnMut(u16, String)>,
}

/// The socket in use, if any, with the handlers registered on it (dropping a handler while
/// its socket can still call it would throw in the page).
#[derive(Default)]
pub struct Link {
    ws: RefCell<Option<web_sys::WebSocket>>,
    handlers: RefCell<Vec<JsHandler>>,
}

impl Link {
    /// Sends `frame` when the socket is open; otherwise drops it (a keystroke typed while
    /// reconnecting, a heartbeat between sockets).
    pub fn send(&self, frame: &Frame<'_>) {
        if let Some(ws) = self.ws.borrow().as_ref() {
            if ws.ready_state() == web_sys::WebSocket::OPEN {
                let _ = ws.send_with_u8_array(&frame.encode());
            }
        }
    }

    /// Closes the socket in use (code 1000) without running its close handler: the owner
    /// closing it knows why, and a handler would take it for a lost connection.
    pub fn close(&self) {
        if let Some(ws) = self.ws.borrow_mut().take() {
            ws.set_onopen(None);
            ws.set_onmessage(None);
            ws.set_onclose(None);
            let _ = ws.close_with_code(1000);
        }
        self.handlers.borrow_mut().clear();
    }

    /// Makes `ws` the socket in use with `handlers` wired to it; the previous one is closed
    /// as [`Link::close`] does. Never call it from inside one of the previous socket's
    /// handlers (its closure would be dropped while it runs): schedule it instead.
    pub fn replace(&self, ws: web_sys::WebSocket, handlers: Handlers) {
        let Handlers {
            mut on_open,
            on_output,
            on_frame,
            mut on_close,
        } = handlers;
        let open = JsHandler::new(move |_| on_open());
        let message = message_handler(on_output, on_frame);
        let close = JsHandler::new(move |e: JsValue| {
            let (code, reason) = close_of(&e);
            on_close(code, reason);
        });
        ws.set_onopen(Some(open.as_ref().unchecked_ref()));
        ws.set_onmessage(Some(message.as_ref().unchecked_ref()));
        ws.set_onclose(Some(close.as_ref().unchecked_ref()));
        self.close();
        *self.ws.borrow_mut() = Some(ws);
        *self.handlers.borrow_mut() = vec![open, message, close];
    }
}

/// Reads each binary message: output, the hot path, goes to `on_output` as a view of the
/// message's buffer (no copy into wasm and back); anything else is decoded for `on_frame`.
fn message_handler(
    mut on_output: Box<dyn FnMut(&js_sys::Uint8Array)>,
    mut on_frame: Box<dyn FnMut(Frame<'_>)>,
) -> JsHandler {
    JsHandler::new(move |e: JsValue| {
        let Ok(msg) = e.dyn_into::<web_sys::MessageEvent>() else {
            return;
        };
        let Ok(buf) = msg.data().dyn_into::<js_sys::ArrayBuffer>() else {
            return;
        };
        let bytes = js_sys::Uint8Array::new(&buf);
        if bytes.length() > 0 && bytes.get_index(0) == TAG_DATA {
            on_output(&bytes.subarray(1, bytes.length()));
            return;
        }
        if let Ok(frame) = Frame::decode(&bytes.to_vec()) {
            on_frame(frame);
        }
    })
}

/// The code and reason of a close event (1006 and no reason for anything else).
fn close_of(e: &JsValue) -> (u16, String) {
    e.dyn_ref::<web_sys::CloseEvent>()
        .map_or((1006, String::new()), |c| (c.code(), c.reason()))
}

/// Clears its interval when dropped.
pub struct IntervalGuard(IntervalHandle);

impl Drop for IntervalGuard {
    fn drop(&mut self) {
        self.0.clear();
    }
}

/// Runs `tick` every [`HEARTBEAT`] for as long as the returned guard is kept (`None` when the
/// browser refused the timer: the socket then does without).
pub fn every_heartbeat(tick: impl Fn() + 'static) -> Option<IntervalGuard> {
    set_interval_with_handle(tick, HEARTBEAT)
        .ok()
        .map(IntervalGuard)
}

/// Runs `reopen` with what `weak` points at after `delay`, outside the close handler that asks
/// for it (the new socket replaces that handler), unless the component is gone by then.
pub fn reopen_later<T: 'static>(
    weak: std::rc::Weak<T>,
    delay: Duration,
    reopen: impl FnOnce(std::rc::Rc<T>) + 'static,
) {
    leptos::prelude::set_timeout(
        move || {
            if let Some(it) = weak.upgrade() {
                reopen(it);
            }
        },
        delay,
    );
}
