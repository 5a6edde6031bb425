//! Who is signed in and what they may do: the [`Auth`] context the shell provides and every
//! page and component reads.

use breakglass_shared::access::Action;
use breakglass_shared::api::{EnvironmentInfo, WhoAmI};
use breakglass_shared::{PermissionSet, Session};
use leptos::prelude::*;

/// The signed-in user and what they may do (a context).
#[derive(Clone, Copy)]
pub struct Auth {
    /// The server's answer to `whoami` (replaced on sign-in and sign-out).
    pub me: RwSignal<WhoAmI>,
}

impl Auth {
    /// The user's name (tracked).
    pub fn user(&self) -> Option<String> {
        self.me.with(|m| m.user.as_ref().map(|u| u.name.clone()))
    }

    /// How many security keys the user registered (tracked).
    pub fn security_keys(&self) -> u32 {
        self.me
            .with(|m| m.user.as_ref().map_or(0, |u| u.security_keys))
    }

    /// An environment the user holds a permission in (tracked).
    pub fn env(&self, name: &str) -> Option<EnvironmentInfo> {
        self.me
            .with(|m| m.environments.iter().find(|e| e.name == name).cloned())
    }

    /// Whether the user is the requester of `s` (tracked).
    pub fn is_requester(&self, s: &Session) -> bool {
        self.user().is_some_and(|u| u == s.requester)
    }

    /// Whether the server would let the user do `action` to `s` now: the shared rule
    /// ([`Session::may`]) with the user's permissions in its environment (tracked).
    pub fn may(&self, s: &Session, action: Action) -> bool {
        let Some(user) = self.user() else {
            return false;
        };
        let permissions = self
            .env(&s.environment)
            .map_or(PermissionSet::NONE, |e| e.permissions);
        s.may(action, &user, &permissions).is_ok()
    }

    /// Whether the server would let the user watch `s`'s terminal live now: the shared rule
    /// ([`Session::may_watch`]) with the user's permissions in its environment and whether
    /// that environment lets auditors watch (tracked).
    pub fn may_watch(&self, s: &Session) -> bool {
        let Some(user) = self.user() else {
            return false;
        };
        let env = self.env(&s.environment);
        let permissions = env.as_ref().map_or(PermissionSet::NONE, |e| e.permissions);
        let auditors_watch = env.is_some_and(|e| e.auditors_watch);
        s.may_watch(&user, &permissions, auditors_watch).is_ok()
    }
}

/// The auth context (panics outside the shell, a programming error).
pub fn use_auth() -> Auth {
    expect_context::<Auth>()
}
