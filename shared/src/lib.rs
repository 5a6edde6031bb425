//! Types both the server and the browser app compile: the session model and its state machine,
//! input validation, API request/response bodies, the one error body, terminal relay frames and
//! asciicast records.
//!
//! Pure code: no clocks, no I/O, no randomness. Callers pass `now` and identifiers in, so every
//! rule here is deterministic and testable without a runtime.

pub mod access;
pub mod api;
pub mod commands;
pub mod error;
pub mod listing;
pub mod lock;
pub mod names;
pub mod notify;
pub mod ocsf;
pub mod permissions;
pub mod recording;
pub mod screen_text;
pub mod search;
pub mod session;
pub mod step_up;
pub mod terminal;
pub mod transition;
pub mod validate;

pub use error::{ErrorBody, ErrorCode};
pub use permissions::{Permission, PermissionSet};
pub use session::{
    Actor, EndReason, Mode, Session, SessionEvent, SessionState, Tier, TransitionError,
};
