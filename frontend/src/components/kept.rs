//! What a person unfolded or typed in a session's view, kept by session and place. A live
//! update (the recording grew, a heartbeat, an approval) rebuilds the view from the session's
//! new version; a section the reader had opened, or a reason half typed, must not go with it.
//! The action buttons keep their own state the same way (`actions::DenyDrafts`,
//! `actions::PendingConfirms`); this is the one place for everything else.

use std::collections::BTreeMap;

use leptos::prelude::*;
use uuid::Uuid;

/// A place of a session's view: the session and the place's name.
type Place = (Uuid, &'static str);

/// The kept values of the signed-in user's pages, by place.
#[derive(Clone, Copy)]
pub struct Kept(StoredValue<Store>);

#[derive(Default)]
struct Store {
    values: BTreeMap<Place, String>,
    /// The text field last built for each place, with its default: a form sent is emptied
    /// in whichever view shows it now (the live update may have rebuilt it before the answer).
    fields: BTreeMap<Place, (RwSignal<String>, String)>,
    /// The news each section was last unfolded for (see [`Kept::unfolded`]).
    news: BTreeMap<Place, String>,
}

impl Kept {
    /// Starts an empty set for the signed-in user's pages.
    pub fn provide() {
        provide_context(Kept(StoredValue::new(Store::default())));
    }

    /// The pages' set, or (outside them) one of the calling view's own.
    pub fn current() -> Kept {
        use_context().unwrap_or_else(|| Kept(StoredValue::new(Store::default())))
    }

    /// A signal for the view being built, starting from what was kept for `place` of session
    /// `id` (or `default`), and keeping every value it is set to for the next build.
    pub fn text(
        self,
        id: Uuid,
        place: &'static str,
        default: impl FnOnce() -> String,
    ) -> RwSignal<String> {
        let default = default();
        let start = self
            .0
            .with_value(|m| m.values.get(&(id, place)).cloned())
            .unwrap_or_else(|| default.clone());
        let field = self.keep(id, place, RwSignal::new(start), String::clone);
        self.0.update_value(|m| {
            m.fields.insert((id, place), (field, default));
        });
        field
    }

    /// Whether the section `place` of session `id` is unfolded: [`Kept::text`] for a flag.
    /// `news` names what in it asks for attention now (an answer, a refusal): news not seen
    /// before unfolds it once; after that it stays as the reader leaves it, so a section the
    /// reader folded again is not reopened by every live update that shows the same news.
    pub fn unfolded(self, id: Uuid, place: &'static str, news: Option<String>) -> RwSignal<bool> {
        let (kept, fresh) = self.0.with_value(|m| {
            let kept = m.values.get(&(id, place)).is_some_and(|v| v == "true");
            let fresh = news
                .as_ref()
                .is_some_and(|n| m.news.get(&(id, place)) != Some(n));
            (kept, fresh)
        });
        if let Some(news) = news.filter(|_| fresh) {
            self.0.update_value(|m| {
                m.news.insert((id, place), news);
            });
        }
        self.keep(id, place, RwSignal::new(fresh || kept), bool::to_string)
    }

    /// A form was sent: the text field of `place` of session `id` goes back to its default,
    /// in the view shown now and in the next build.
    pub fn forget(self, id: Uuid, place: &'static str) {
        let shown = self.0.try_update_value(|m| {
            m.values.remove(&(id, place));
            m.fields.get(&(id, place)).cloned()
        });
        if let Some((field, default)) = shown.flatten() {
            field.try_set(default);
        }
    }

    fn keep<T: Send + Sync + 'static>(
        self,
        id: Uuid,
        place: &'static str,
        signal: RwSignal<T>,
        show: fn(&T) -> String,
    ) -> RwSignal<T> {
        let store = self.0;
        Effect::new(move |_| {
            let now = signal.with(show);
            store.update_value(|m| {
                m.values.insert((id, place), now);
            });
        });
        signal
    }
}

/// Keeps a `<details>` element's `open` in `flag` as the reader folds and unfolds it.
pub fn on_toggle(flag: RwSignal<bool>) -> impl Fn(web_sys::Event) + 'static {
    move |ev| {
        use wasm_bindgen::JsCast;
        if let Some(d) = ev
            .target()
            .and_then(|t| t.dyn_into::<web_sys::Element>().ok())
        {
            flag.set(d.has_attribute("open"));
        }
    }
}
