//! What the action buttons remember beyond one view of a session: deny reasons being typed,
//! questions being asked, and the last decision made in a list that loses its decided items.
//! Keyed by session, so a view rebuilt for a newer version of the session picks up where the
//! last one was; each is the one place its state lives, read and written by the views.

use std::collections::BTreeMap;

use leptos::prelude::*;
use uuid::Uuid;

use crate::api::Action;

/// A decision the signed-in user just made on a request, said where the request was (the
/// queue strip, whose item goes away), with a link to it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    /// The session decided on.
    pub id: Uuid,
    /// What happened, as a sentence.
    pub text: String,
}

/// Where a list that loses its decided items shows the last [`Decision`] (a context; absent
/// elsewhere, where the item stays and changes in place).
#[derive(Clone, Copy)]
pub struct Decisions(pub RwSignal<Option<Decision>>);

/// Deny reasons being typed, by session: a session is being denied while it has an entry.
/// They outlive the view of a request that changed meanwhile (someone else decided it), so the
/// text is not lost and the form can say why it can no longer be sent.
#[derive(Clone, Copy)]
pub struct DenyDrafts(RwSignal<BTreeMap<Uuid, String>>);

impl DenyDrafts {
    /// Starts an empty set for the signed-in user's pages.
    pub fn provide() {
        provide_context(DenyDrafts(RwSignal::new(BTreeMap::new())));
    }

    /// The pages' set, or (outside them) one of the calling view's own.
    pub fn current() -> DenyDrafts {
        use_context().unwrap_or_else(|| DenyDrafts(RwSignal::new(BTreeMap::new())))
    }

    /// The sessions with a reason being typed (tracked).
    pub fn ids(&self) -> Vec<Uuid> {
        self.0.with(|m| m.keys().copied().collect())
    }

    /// The reason being typed for session `id`, if it is being denied (tracked).
    pub fn get(&self, id: Uuid) -> Option<String> {
        self.0.with(|m| m.get(&id).cloned())
    }

    /// Whether session `id` is being denied (tracked).
    pub fn contains(&self, id: Uuid) -> bool {
        self.0.with(|m| m.contains_key(&id))
    }

    /// The reason being typed for session `id` (untracked: read when a view is built).
    pub fn get_untracked(&self, id: Uuid) -> Option<String> {
        self.0.with_untracked(|m| m.get(&id).cloned())
    }

    /// Starts or goes on typing the reason for denying session `id`.
    pub fn set(&self, id: Uuid, reason: String) {
        self.0.update(|m| {
            m.insert(id, reason);
        });
    }

    /// Stops denying session `id` (sent, cancelled or closed).
    pub fn remove(&self, id: Uuid) {
        if self.0.with_untracked(|m| m.contains_key(&id)) {
            self.0.update(|m| {
                m.remove(&id);
            });
        }
    }
}

/// Confirmations being asked (break the glass, terminate), by session. Like [`DenyDrafts`]
/// they outlive the view: a live update of the same session (its recording grew, a heartbeat)
/// rebuilds the buttons, and the question must not vanish under the reader's pointer.
#[derive(Clone, Copy)]
pub struct PendingConfirms(RwSignal<BTreeMap<Uuid, Action>>);

impl PendingConfirms {
    /// Starts an empty set for the signed-in user's pages.
    pub fn provide() {
        provide_context(PendingConfirms(RwSignal::new(BTreeMap::new())));
    }

    /// The pages' set, or (outside them) one of the calling view's own.
    pub fn current() -> PendingConfirms {
        use_context().unwrap_or_else(|| PendingConfirms(RwSignal::new(BTreeMap::new())))
    }

    /// The action whose confirmation is being asked on session `id` (tracked).
    pub fn get(&self, id: Uuid) -> Option<Action> {
        self.0.with(|m| m.get(&id).copied())
    }

    /// The same, untracked (read when a view is built).
    pub fn get_untracked(&self, id: Uuid) -> Option<Action> {
        self.0.with_untracked(|m| m.get(&id).copied())
    }

    /// Asks to confirm `action` on session `id`.
    pub fn ask(&self, id: Uuid, action: Action) {
        self.0.update(|m| {
            m.insert(id, action);
        });
    }

    /// The question on session `id` was answered or withdrawn.
    pub fn remove(&self, id: Uuid) {
        if self.0.with_untracked(|m| m.contains_key(&id)) {
            self.0.update(|m| {
                m.remove(&id);
            });
        }
    }
}
