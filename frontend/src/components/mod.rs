//! Reusable components. Pages in [`crate::pages`] compose them.

pub mod actions;
pub mod common;
pub mod debug_form;
pub mod guardrails;
pub mod player;
pub mod queue_strip;
pub mod session_card;
pub mod session_list;
pub mod session_panel;
pub mod terminal;
