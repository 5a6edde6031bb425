//! Entry point: mount the [`App`](app::App) on `<body>`. Everything else lives in modules,
//! each importing only those below it: [`app`] (shell and route table) over [`pages`] over
//! [`components`]; under them [`router`] (addresses, links, parameters), [`auth`] (who is
//! signed in), [`title`] (the document title), [`live`] (the live feed and clock), [`fetch`]
//! (API answers as signals), [`api`] (every URL, fetch, SSE and WebSocket), [`cast`] (the
//! player's index), [`xterm`] (bindings) and [`format`] (text for people).

mod api;
mod app;
mod auth;
mod cast;
mod components;
mod desktop;
mod fetch;
#[cfg(test)]
mod fixtures;
mod format;
mod live;
mod pages;
mod router;
mod title;
mod webauthn;
mod xterm;

fn main() {
    console_error_panic_hook::set_once();
    leptos::mount::mount_to_body(app::App);
}
