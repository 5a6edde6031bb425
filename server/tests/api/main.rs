//! The HTTP API against the real router and real databases (SQLite and PostgreSQL).
#![allow(clippy::unwrap_used)]

#[path = "../common/mod.rs"]
mod common;

use axum::http::{Method, StatusCode};
use common::{request_body, servers, Caller};
use serde_json::{json, Value};

mod decisions;
mod documented;
mod lists;
use decisions::wait_state;
