//! The browser's own notifications: an approver who clicked "Notify me" is told of a request
//! that starts waiting for them while the app's tab is in the background. Permission is asked
//! for only on that click, as browsers require and people expect.

use web_sys::{Notification, NotificationOptions, NotificationPermission};

/// Whether this browser has notifications at all.
pub fn supported() -> bool {
    web_sys::window()
        .and_then(|w| js_sys::Reflect::has(&w, &"Notification".into()).ok())
        .unwrap_or(false)
}

/// `default` (not asked yet), `granted` or `denied`.
pub fn permission() -> NotificationPermission {
    if supported() {
        Notification::permission()
    } else {
        NotificationPermission::Denied
    }
}

/// Asks for permission (call from a click); the answer.
pub async fn ask() -> NotificationPermission {
    let Ok(promise) = Notification::request_permission() else {
        return permission();
    };
    let _ = wasm_bindgen_futures::JsFuture::from(promise).await;
    permission()
}

/// Whether the app's tab is out of sight (a notification is for then only).
pub fn hidden() -> bool {
    web_sys::window()
        .and_then(|w| w.document())
        .is_some_and(|d| d.hidden())
}

/// Shows `title` with `body`; a click brings the tab forward on `link` (an app path, opened
/// through the router at `location`). `tag`
/// keeps one notification per request.
pub fn tell(location: crate::router::Location, title: &str, body: &str, link: &str, tag: &str) {
    if permission() != NotificationPermission::Granted {
        return;
    }
    let options = NotificationOptions::new();
    options.set_body(body);
    options.set_tag(tag);
    let Ok(n) = Notification::new_with_options(title, &options) else {
        return;
    };
    let link = link.to_string();
    let click = wasm_bindgen::closure::Closure::<dyn Fn()>::new(move || {
        if let Some(w) = web_sys::window() {
            let _ = w.focus();
            location.navigate(&link);
        }
    });
    n.set_onclick(Some(wasm_bindgen::JsCast::unchecked_ref(click.as_ref())));
    // The notification owns its handler for as long as the page lives.
    click.forget();
}
