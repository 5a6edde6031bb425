//! The live event stream (`GET /events`, server-sent events).

use breakglass_shared::api::SessionChange;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;

use super::{url, ApiError};

/// What the live stream reports.
pub enum StreamEvent {
    /// The stream is (again) connected.
    Open,
    /// A session changed.
    Session(Box<SessionChange>),
    /// We missed events: reload lists.
    Lagged,
    /// The locks in force changed: read the environments (and their locks) again.
    Locks,
    /// The connection broke; `closed` when the browser will not retry by itself.
    Error {
        /// The browser gave up (e.g. 401); the caller reconnects later.
        closed: bool,
    },
}

/// An open `GET /events` stream; closed when dropped.
pub struct EventStream {
    source: web_sys::EventSource,
    _handlers: Vec<Closure<dyn FnMut(web_sys::Event)>>,
}

impl Drop for EventStream {
    fn drop(&mut self) {
        self.source.close();
    }
}

/// Opens the live event stream; `on_event` gets every event.
pub fn open_events(on_event: impl Fn(StreamEvent) + 'static) -> Result<EventStream, ApiError> {
    let source = web_sys::EventSource::new(&url("/events"))
        .map_err(|e| ApiError::network("open the live stream", format!("{e:?}")))?;
    let on_event = std::rc::Rc::new(on_event);
    let mut handlers = Vec::new();
    let mut listen = |name: &str, f: Box<dyn FnMut(web_sys::Event)>| {
        let closure = Closure::wrap(f);
        let _ = source.add_event_listener_with_callback(name, closure.as_ref().unchecked_ref());
        handlers.push(closure);
    };
    let cb = on_event.clone();
    listen("open", Box::new(move |_| cb(StreamEvent::Open)));
    let cb = on_event.clone();
    listen(
        "session",
        Box::new(move |e| {
            let Some(data) = e
                .dyn_ref::<web_sys::MessageEvent>()
                .and_then(|m| m.data().as_string())
            else {
                return;
            };
            match serde_json::from_str::<SessionChange>(&data) {
                Ok(change) => cb(StreamEvent::Session(Box::new(change))),
                // A shape we cannot read: treat it like a gap and reload.
                Err(_) => cb(StreamEvent::Lagged),
            }
        }),
    );
    let cb = on_event.clone();
    listen("lagged", Box::new(move |_| cb(StreamEvent::Lagged)));
    let cb = on_event.clone();
    listen("locks", Box::new(move |_| cb(StreamEvent::Locks)));
    let cb = on_event;
    let src = source.clone();
    listen(
        "error",
        Box::new(move |_| {
            cb(StreamEvent::Error {
                closed: src.ready_state() == web_sys::EventSource::CLOSED,
            });
        }),
    );
    Ok(EventStream {
        source,
        _handlers: handlers,
    })
}
