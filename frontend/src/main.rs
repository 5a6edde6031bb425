//! Entry point: mount the [`App`](app::App) on `<body>`. Everything else lives in modules:
//! [`app`] (shell and routes), [`pages`], [`components`], [`api`] (every URL, fetch, SSE and
//! WebSocket), [`live`] (the live feed and clock), [`fetch`] (API answers as signals), [`cast`] (the player's index), [`xterm`]
//! (bindings), [`format`] (text for people).

mod api;
mod app;
mod cast;
mod components;
mod fetch;
mod format;
mod live;
mod pages;
mod router;
mod xterm;

fn main() {
    console_error_panic_hook::set_once();
    leptos::mount::mount_to_body(app::App);
}
