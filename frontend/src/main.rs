//! Entry point: mount the [`App`](app::App) on `<body>`. Everything else lives in modules.

mod api;
mod app;

fn main() {
    console_error_panic_hook::set_once();
    leptos::mount::mount_to_body(app::App);
}
