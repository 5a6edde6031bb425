//! Client-side routing: the app's ten routes, links that navigate without reloading, and
//! the back and forward buttons. Which page each route shows is the shell's table
//! (`app.rs`); this module only matches addresses, so pages can read their parameters here
//! without importing what imports them.
//!
//! Why not `leptos_router`: with its matching and nested-route views, generic over every
//! route, it cost a tenth of the wasm (37 KB of the first page's brotli; frontend/README.md,
//! Size) for what this app uses of it, which is what follows. The behaviour kept from it: a click on a same-origin `<a href>`
//! (left button, no modifier key, no `target`, `download` or `rel="external"`) pushes a
//! history entry and renders the page in place, scrolled to the top (or to the element the
//! `#hash` names); the back and forward buttons render the page of the address they go to; a
//! page stays mounted while only its parameters or query change (it reacts to them), and is
//! built again when the route itself changes; a navigation link carries
//! `aria-current="page"` while its page (or, unless exact, a page under it) is shown.

use leptos::prelude::*;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;

/// Where the browser is: the path and the query (with its `?`, or empty).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
struct Url {
    path: String,
    search: String,
}

impl Url {
    fn current() -> Url {
        let loc = web_sys::window().map(|w| w.location());
        Url {
            path: loc
                .as_ref()
                .and_then(|l| l.pathname().ok())
                .unwrap_or_else(|| "/".into()),
            search: loc.and_then(|l| l.search().ok()).unwrap_or_default(),
        }
    }
}

/// The router's state (a context): the address shown.
#[derive(Clone, Copy)]
pub struct Location {
    url: RwSignal<Url>,
}

impl Location {
    /// The path, e.g. `/sessions/…` (tracked).
    pub fn pathname(&self) -> String {
        self.url.with(|u| u.path.clone())
    }

    /// The query with its `?`, or empty (tracked).
    pub fn search(&self) -> String {
        self.url.with(|u| u.search.clone())
    }

    /// Goes to `to` (a path with an optional query and hash) in the app, as a link click
    /// would.
    pub fn navigate(&self, to: &str) {
        go(self.url, to);
    }

    /// The value of `key` in the query, decoded (untracked: read when a page is built).
    pub fn query_untracked(&self, key: &str) -> Option<String> {
        query_value(&self.url.with_untracked(|u| u.search.clone()), key)
    }

    /// The value of `key` in the query, decoded (tracked: for a page whose query is its
    /// state, which stays mounted while the back and forward buttons change it).
    pub fn query(&self, key: &str) -> Option<String> {
        query_value(&self.search(), key)
    }
}

/// The value of `key` in `search` (`?a=1&b=2`), decoded as the browser does (`+` is a space).
fn query_value(search: &str, key: &str) -> Option<String> {
    web_sys::UrlSearchParams::new_with_str(search)
        .ok()
        .and_then(|q| q.get(key))
}

/// The router's location (panics outside [`provide_router`]'s owner, a programming error).
pub fn use_location() -> Location {
    expect_context::<Location>()
}

/// Starts routing: reads the address and follows link clicks and the history buttons for as
/// long as the current owner lives.
pub fn provide_router() {
    let url = RwSignal::new(Url::current());
    provide_context(Location { url });
    let click = window_event_listener(leptos::ev::click, move |ev| {
        if let Some(to) = link_target(&ev) {
            ev.prevent_default();
            go(url, &to);
        }
    });
    let popstate = window_event_listener(leptos::ev::popstate, move |_| {
        let now = Url::current();
        if url.with_untracked(|u| *u != now) {
            url.set(now);
        }
    });
    on_cleanup(move || {
        click.remove();
        popstate.remove();
    });
}

fn go(url: RwSignal<Url>, to: &str) {
    let Some(w) = web_sys::window() else { return };
    let current = Url::current();
    if let Ok(history) = w.history() {
        let here = format!("{}{}", current.path, current.search);
        // The same address again adds no history entry (as leptos_router did).
        if here != to {
            let _ = history.push_state_with_url(&JsValue::NULL, "", Some(to));
        }
    }
    let now = Url::current();
    if url.with_untracked(|u| *u != now) {
        url.set(now);
    }
    scroll_to_hash_or_top(&w);
}

fn scroll_to_hash_or_top(w: &web_sys::Window) {
    let hash = w.location().hash().unwrap_or_default();
    if let Some(id) = hash.strip_prefix('#').filter(|h| !h.is_empty()) {
        let id = js_sys::decode_uri_component(id)
            .ok()
            .and_then(|s| s.as_string())
            .unwrap_or_else(|| id.to_string());
        if let Some(el) = w.document().and_then(|d| d.get_element_by_id(&id)) {
            el.scroll_into_view();
            return;
        }
    }
    w.scroll_to_with_x_and_y(0.0, 0.0);
}

/// Where a click should take the app without reloading: the clicked link's path, query and
/// hash, or `None` when the browser should follow it itself.
fn link_target(ev: &web_sys::MouseEvent) -> Option<String> {
    if ev.default_prevented()
        || ev.button() != 0
        || ev.meta_key()
        || ev.alt_key()
        || ev.ctrl_key()
        || ev.shift_key()
    {
        return None;
    }
    let path = ev.composed_path();
    // The outermost anchor on the path, as leptos_router chose.
    let a = (0..path.length())
        .rev()
        .find_map(|i| path.get(i).dyn_into::<web_sys::HtmlAnchorElement>().ok())?;
    let rel = a.get_attribute("rel").unwrap_or_default();
    if !a.target().is_empty()
        || a.href().is_empty()
        || a.has_attribute("download")
        || rel.split([' ', '\t']).any(|p| p == "external")
    {
        return None;
    }
    let origin = web_sys::window()?.location().origin().ok()?;
    let to = web_sys::Url::new_with_base(&a.href(), &origin).ok()?;
    if to.origin() != origin {
        return None;
    }
    Some(format!("{}{}{}", to.pathname(), to.search(), to.hash()))
}

/// The app's routes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// `/`.
    Home,
    /// `/ops-wall`.
    OpsWall,
    /// `/account`.
    Account,
    /// `/deliveries`.
    Deliveries,
    /// `/recordings/search?q=WORDS`.
    RecordingSearch,
    /// `/env/:env`.
    Environment,
    /// `/env/:env/ns/:ns`.
    Namespace,
    /// `/env/:env/ns/:ns/pod/:pod`.
    Pod,
    /// `/sessions/:id`.
    Session,
    /// `/sessions/:id/recording`.
    Recording,
    /// Any other path.
    NotFound,
}

/// The route of `path` and its parameters (decoded), in the order the route names them.
fn route_of(path: &str) -> (Route, Vec<String>) {
    let segments: Vec<String> = path
        .split('/')
        .filter(|s| !s.is_empty())
        .map(decode)
        .collect();
    let s: Vec<&str> = segments.iter().map(String::as_str).collect();
    let route = match s.as_slice() {
        [] => Route::Home,
        ["ops-wall"] => Route::OpsWall,
        ["account"] => Route::Account,
        ["deliveries"] => Route::Deliveries,
        ["recordings", "search"] => Route::RecordingSearch,
        ["env", _] => Route::Environment,
        ["env", _, "ns", _] => Route::Namespace,
        ["env", _, "ns", _, "pod", _] => Route::Pod,
        ["sessions", _] => Route::Session,
        ["sessions", _, "recording"] => Route::Recording,
        _ => Route::NotFound,
    };
    let params = match route {
        Route::Environment | Route::Session | Route::Recording => vec![segments[1].clone()],
        Route::Namespace => vec![segments[1].clone(), segments[3].clone()],
        Route::Pod => vec![
            segments[1].clone(),
            segments[3].clone(),
            segments[5].clone(),
        ],
        _ => Vec::new(),
    };
    (route, params)
}

fn decode(segment: &str) -> String {
    #[cfg(target_arch = "wasm32")]
    {
        js_sys::decode_uri_component(segment)
            .ok()
            .and_then(|s| s.as_string())
            .unwrap_or_else(|| segment.to_string())
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        segment.to_string()
    }
}

/// The parameters of the route shown (a context): `env`, `ns`, `pod` or `id`.
#[derive(Clone, Copy)]
pub struct Params(Memo<(Route, Vec<String>)>);

impl Params {
    /// The parameter `name` of the route shown (tracked).
    pub fn get(&self, name: &str) -> Option<String> {
        self.0.with(|(route, p)| {
            let i = match (route, name) {
                (Route::Environment | Route::Namespace | Route::Pod, "env")
                | (Route::Session | Route::Recording, "id") => 0,
                (Route::Namespace | Route::Pod, "ns") => 1,
                (Route::Pod, "pod") => 2,
                _ => return None,
            };
            p.get(i).cloned()
        })
    }
}

/// The parameters of the route shown.
pub fn use_params() -> Params {
    expect_context::<Params>()
}

/// Matches the address shown against the routes and provides its [`Params`] to the pages
/// under the current owner. The route it returns changes only when the page must be built
/// again (not when only its parameters or query change).
pub fn provide_route() -> Memo<Route> {
    let loc = use_location();
    let matched = Memo::new(move |_| loc.url.with(|u| route_of(&u.path)));
    provide_context(Params(matched));
    Memo::new(move |_| matched.with(|(r, _)| *r))
}

/// A navigation link: `aria-current="page"` while its page is shown (`exact`: only then;
/// otherwise also on the pages under it).
#[component]
pub fn A(
    /// Where it goes.
    href: String,
    /// Active on its own page only.
    #[prop(optional)]
    exact: bool,
    /// The link's `class`.
    #[prop(optional, into)]
    class: Option<String>,
    children: Children,
) -> impl IntoView {
    let loc = use_location();
    let target = href.clone();
    let active = move || {
        loc.url
            .with(|u| is_active(&target, &u.path, exact))
            .then_some("page")
    };
    view! { <a href=href class=class aria-current=active>{children()}</a> }
}

/// Whether a link to `href` is active at `path`.
fn is_active(href: &str, path: &str, exact: bool) -> bool {
    let (href, path) = (href.trim_end_matches('/'), path.trim_end_matches('/'));
    href == path
        || (!exact
            && !href.is_empty()
            && path
                .strip_prefix(href)
                .is_some_and(|rest| rest.starts_with('/')))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_and_their_parameters() {
        assert_eq!(route_of("/"), (Route::Home, vec![]));
        assert_eq!(route_of("/ops-wall"), (Route::OpsWall, vec![]));
        assert_eq!(route_of("/account"), (Route::Account, vec![]));
        assert_eq!(route_of("/deliveries"), (Route::Deliveries, vec![]));
        assert_eq!(
            route_of("/recordings/search"),
            (Route::RecordingSearch, vec![])
        );
        assert_eq!(route_of("/recordings").0, Route::NotFound);
        assert_eq!(
            route_of("/env/prod"),
            (Route::Environment, vec!["prod".into()])
        );
        assert_eq!(
            route_of("/env/prod/ns/web/pod/api-1"),
            (
                Route::Pod,
                vec!["prod".into(), "web".into(), "api-1".into()]
            )
        );
        assert_eq!(
            route_of("/sessions/abc/recording"),
            (Route::Recording, vec!["abc".into()])
        );
        assert_eq!(
            route_of("/sessions/abc/"),
            (Route::Session, vec!["abc".into()])
        );
        assert_eq!(route_of("/nope").0, Route::NotFound);
        assert_eq!(route_of("/env/prod/ns").0, Route::NotFound);
    }

    #[test]
    fn active_links() {
        // The home link is active on the home page only, exact or not.
        assert!(is_active("/", "/", true));
        assert!(is_active("/", "/", false));
        assert!(!is_active("/", "/ops-wall", false));
        assert!(is_active("/ops-wall", "/ops-wall", false));
        assert!(is_active("/ops-wall", "/ops-wall/x", false));
        assert!(!is_active("/ops-wall", "/ops-wall/x", true));
        assert!(!is_active("/ops", "/ops-wall", false));
    }
}
