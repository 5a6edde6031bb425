//! Links to the app's pages (router paths): every link a view renders is built here.

use uuid::Uuid;

use super::{encode, query_string};

/// Home: environments and the queue strip.
pub fn home() -> String {
    "/".into()
}

/// The wall display.
pub fn ops_wall() -> String {
    "/ops-wall".into()
}

/// The signed-in person's account page (their security keys).
pub fn account() -> String {
    "/account".into()
}

/// The admins' notification deliveries.
pub fn deliveries() -> String {
    "/deliveries".into()
}

/// The recording search, empty.
pub fn recording_search() -> String {
    "/recordings/search".into()
}

/// The recording search for `q` (as typed: the page and the server cut it into words), listing
/// at most `limit` sessions (the server's default without one).
pub fn recording_search_for(q: &str, limit: Option<u32>) -> String {
    format!(
        "{}{}",
        recording_search(),
        query_string(&[
            ("q", Some(q.into())),
            ("limit", limit.map(|l| l.to_string()))
        ])
    )
}

/// An environment's page.
pub fn environment(env: &str) -> String {
    format!("/env/{}", encode(env))
}

/// An environment's page with one namespace open.
pub fn namespace(env: &str, ns: &str) -> String {
    format!("/env/{}/ns/{}", encode(env), encode(ns))
}

/// A pod's Debug panel.
pub fn pod(env: &str, ns: &str, pod: &str) -> String {
    format!("/env/{}/ns/{}/pod/{}", encode(env), encode(ns), encode(pod))
}

/// A session's page.
pub fn session(id: Uuid) -> String {
    format!("/sessions/{id}")
}

/// A session's recording, optionally at a moment (seconds of recording time).
pub fn recording(id: Uuid, t: Option<f64>) -> String {
    match t {
        // Down to the tenth, never up: the clock shows whole seconds cut down, so the link
        // opens in the second the clock showed.
        Some(t) if t > 0.0 => format!(
            "/sessions/{id}/recording?t={}",
            crate::format::tenths((t * 10.0).floor() / 10.0)
        ),
        _ => format!("/sessions/{id}/recording"),
    }
}

/// A session's recording at an event of recording second `t` (a command's marker): rounded
/// up to the tenth where [`recording`] rounds down, so the player shows what the event
/// changed. A command's marker comes just before the output in which it ran, which may hold
/// the end of its line: the tenth below could show it half typed.
pub fn recording_at_event(id: Uuid, t: f64) -> String {
    // Half a tenth past the tenth above: `recording` cuts that down to exactly that tenth,
    // whatever the rounding of the division. `max` takes 0 over NaN.
    recording(id, Some(((t.max(0.0) * 10.0).ceil() + 0.5) / 10.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_links() {
        let id = Uuid::nil();
        assert_eq!(pod("prod", "shop", "web-1"), "/env/prod/ns/shop/pod/web-1");
        assert_eq!(
            recording_search_for("get pods -n a&b+c", None),
            "/recordings/search?q=get%20pods%20-n%20a%26b%2Bc"
        );
        assert_eq!(
            recording_search_for("ls", Some(50)),
            "/recordings/search?q=ls&limit=50"
        );
        assert_eq!(
            recording(id, Some(12.345)),
            format!("/sessions/{id}/recording?t=12.3")
        );
        // 3.97 s shows as 0:03: the link stays in that second.
        assert_eq!(
            recording(id, Some(3.97)),
            format!("/sessions/{id}/recording?t=3.9")
        );
        assert_eq!(
            recording(id, Some(0.0)),
            format!("/sessions/{id}/recording")
        );
        // An event's link opens at or just after it, never before.
        for (t, link) in [
            (7.96, "8"),
            (7.9, "7.9"),
            (7.91, "8"),
            (0.0, "0"),
            (59.99, "60"),
        ] {
            assert_eq!(
                recording_at_event(id, t),
                format!("/sessions/{id}/recording?t={link}"),
                "{t}"
            );
        }
    }
}
