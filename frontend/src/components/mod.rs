//! Reusable components, which the pages compose.

pub mod actions;
pub mod breadcrumb;
pub mod chunk;
pub mod commands;
pub mod common;
pub mod debug_form;
pub mod env_lock;
pub mod extension;
pub mod guardrails;
pub mod kept;
pub mod lazy;
pub mod player;
pub mod queue_strip;
pub mod session_card;
pub mod session_list;
pub mod session_panel;
pub mod spec;
pub mod term_socket;
pub mod terminal;
pub mod watch;
