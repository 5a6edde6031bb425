//! DESIGN.md section 13's two browser figures: `page-weight` (the first page's bytes over the
//! wire as the server sends them, against a Leptos + xterm hello page built and weighed the
//! same way in the same run: `frontend/hello/`) and `player-seek` (a seek anywhere in a long
//! cast until xterm shows it, against replaying from the start). Needs the built frontend
//! (`BREAKGLASS_STATIC_DIR`, default `frontend/dist`), the frontend toolchain
//! (`scripts/install-tools.sh`, for the hello page), Chromium with chromedriver and the test
//! control plane; `BENCHMARKS.md` has the method.
#![allow(clippy::unwrap_used)]

#[path = "frontend/cast.rs"]
mod cast;
#[path = "frontend/seek.rs"]
mod seek;
#[path = "frontend/weight.rs"]
mod weight;

use breakglass_e2e::bench;
use breakglass_e2e::browser::{frontend_dist, ChromeDriver};

#[tokio::main]
async fn main() {
    let dist = frontend_dist().unwrap();
    let driver = ChromeDriver::start().await.unwrap();
    // `BENCH_ONLY=weight` or `BENCH_ONLY=seek`: one of the two.
    if bench::part("weight") {
        weight::run(&dist, &driver).await;
    }
    if bench::part("seek") {
        seek::run(&dist, &driver).await;
    }
}
