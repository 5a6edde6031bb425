//! Rights taken back reach what is already open. A request is checked when it comes in, but a
//! terminal or a live-update stream stays open for hours: without this, a login ended at the
//! identity provider, by logout or by `logins revoke` would keep its shell in a production pod
//! until the session's time ran out.
//!
//! Every replica checks its own holds (`crate::holds`) once a second, and at once after a
//! logout here: each login behind them is read again the way a request reads it
//! (`auth::resolve_login`, which also asks the provider when its check is due), and what its
//! person may do now is compared with what they could when they opened it. A hold whose login
//! no longer lets anybody in, a terminal whose person no longer holds `request` in its
//! environment, and a stream whose person's environments changed are ended with a sentence
//! saying why; the sessions of a requester who lost `request` in an environment end
//! `Revoked`. The other replicas do the same for theirs, from the same database, so a right
//! taken away ends everything within two seconds wherever it is open.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Weak};
use std::time::Duration;

use axum_extra::extract::cookie::Key;

use breakglass_shared::lock::{blocking, Lock};
use breakglass_shared::{EndReason, PermissionSet, SessionEvent, SessionState};
use futures::StreamExt;
use uuid::Uuid;

use crate::auth::oidc::OidcProvider;
use crate::auth::{self, CurrentUser};
use crate::config::Config;
use crate::holds::{Held, Holder, Holds, Snapshot};
use crate::lifecycle::Lifecycle;
use crate::store::{ListFilter, Store};

/// How often each replica checks what is held open on it.
pub const EVERY: Duration = Duration::from_secs(1);

/// How many logins one pass reads at once.
const READS_AT_ONCE: usize = 16;

/// Every how many passes the running sessions whose requesters hold nothing open are looked
/// at: nobody is typing in them, so a few seconds more cost nothing, and the look reads every
/// running session's requester.
const IDLE_EVERY: u32 = 5;

/// What `name` with `groups` holds in each environment (those where they hold nothing left
/// out): what a hold remembers from its opening and the check compares with.
pub fn access_of(config: &Config, name: &str, groups: &[String]) -> Vec<(String, PermissionSet)> {
    config
        .environments
        .iter()
        .map(|e| (e.name.clone(), e.permissions_of(name, groups)))
        .filter(|(_, p)| p.any())
        .collect()
}

/// The holder a request of `user` opens something as.
pub fn holder_of(config: &Config, user: &CurrentUser) -> Holder {
    Holder {
        login: user.login,
        name: user.name.clone(),
        groups: user.groups.clone(),
        access: access_of(config, &user.name, &user.groups),
    }
}

/// Why a hold ends when its login no longer lets anybody in.
const SIGNED_OUT: &str =
    "your sign-in ended (signed out, ended by an administrator or the identity provider, or expired); sign in again";

/// What a check reads and ends.
pub struct Checker {
    /// The configuration permissions are read from.
    pub config: Arc<Config>,
    /// The cookie key (the CSRF token of a resolved login, and the tokens' seal).
    pub key: Key,
    /// The logins and the sessions.
    pub store: Arc<dyn Store>,
    /// The provider asked about an OIDC login when its check is due.
    pub oidc: OidcProvider,
    /// Where the sessions of a requester who lost access are ended.
    pub lifecycle: Arc<Lifecycle>,
    /// The replica's holds; the checker stops once they are gone with the context.
    pub holds: Weak<Holds>,
    /// Bumped when the locks in force differ from the last pass's (the live streams tell
    /// their pages).
    pub locks_changed: tokio::sync::watch::Sender<u64>,
}

impl Checker {
    /// Checks the holds every [`EVERY`] (or when woken) until they are gone.
    pub async fn run(self) {
        let mut tick = tokio::time::interval(EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut passes: u32 = 0;
        let mut last: Option<Vec<Lock>> = None;
        loop {
            let Some(holds) = self.holds.upgrade() else {
                return;
            };
            tokio::select! {
                _ = tick.tick() => {}
                () = holds.wake.notified() => {}
            }
            let locks = self.locks().await;
            if let Some(now) = &locks {
                if last.as_ref().is_some_and(|l| l != now) {
                    self.locks_changed.send_modify(|n| *n += 1);
                }
                last = Some(now.clone());
            }
            self.pass(&holds, locks.as_deref().unwrap_or_default())
                .await;
            passes = passes.wrapping_add(1);
            if passes.is_multiple_of(IDLE_EVERY) {
                self.idle_pass().await;
            }
        }
    }

    /// The locks in force, enforced: what they stop is stopped (on every replica, so a lock
    /// written by the command line elsewhere counts within a pass). None when they could not
    /// be read (the next pass reads them again).
    async fn locks(&self) -> Option<Vec<Lock>> {
        let locks = match self.store.locks().await {
            Ok(l) => l,
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the locks; trying at the next check");
                return None;
            }
        };
        if !locks.is_empty() {
            if let Err(e) = self.lifecycle.enforce_locks(&locks).await {
                tracing::warn!(error = %e, "cannot stop every locked session; trying at the next check");
            }
        }
        Some(locks)
    }

    /// One check of every hold of this replica.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn pass(&self, holds: &Holds, locks: &[Lock]) {
        let open = holds.snapshot();
        if open.is_empty() {
            return;
        }
        let now = self.now_of(&open).await;
        let mut lost: BTreeSet<(String, String)> = BTreeSet::new();
        for hold in &open {
            let Some(now) = (match hold.holder.login {
                Some(id) => match now.get(&id) {
                    Some(Some(user)) => Some(access_of(&self.config, &user.name, &user.groups)),
                    Some(None) => {
                        holds.end(hold.key, SIGNED_OUT);
                        continue;
                    }
                    // Not read this pass (the database did not answer): checked at the next.
                    None => None,
                },
                None => Some(access_of(
                    &self.config,
                    &hold.holder.name,
                    &hold.holder.groups,
                )),
            }) else {
                continue;
            };
            let then = &hold.holder.access;
            let request = |access: &[(String, PermissionSet)], env: &str| {
                access.iter().any(|(e, p)| e == env && p.request)
            };
            for (env, _) in then.iter().filter(|(e, p)| p.request && !request(&now, e)) {
                lost.insert((hold.holder.name.clone(), env.clone()));
            }
            match &hold.held {
                Held::Terminal { environment, .. } => {
                    if let Some(lock) = blocking(locks, environment, &hold.holder.name) {
                        holds.end(hold.key, &lock.sentence());
                    } else if !request(&now, environment) {
                        holds.end(
                            hold.key,
                            &format!(
                                "you no longer hold tower.breakglass.request in {environment}"
                            ),
                        );
                    }
                }
                Held::Watch { environment, .. } => {
                    let auditors = self
                        .config
                        .environment(environment)
                        .is_some_and(|e| e.auditors_watch);
                    let may = now.iter().any(|(e, p)| {
                        e == environment
                            && (p.approve || p.self_approve || p.terminate || (auditors && p.audit))
                    });
                    if let Some(lock) = blocking(locks, environment, &hold.holder.name) {
                        holds.end(hold.key, &lock.sentence());
                    } else if !may {
                        holds.end(
                            hold.key,
                            &format!("you may no longer watch sessions in {environment}"),
                        );
                    }
                }
                Held::Events => {
                    let names = |a: &[(String, PermissionSet)]| -> Vec<String> {
                        a.iter().map(|(e, _)| e.clone()).collect()
                    };
                    if names(then) != names(&now) {
                        holds.end(
                            hold.key,
                            "the environments you may see changed; the page reconnects",
                        );
                    }
                }
            }
        }
        for (requester, environment) in lost {
            self.end_sessions_of(&requester, &environment).await;
        }
    }

    /// Each login behind `open`, as a request would see it now: `None` for one that no longer lets
    /// anybody in; missing when it could not be read.
    async fn now_of(&self, open: &[Snapshot]) -> HashMap<Uuid, Option<CurrentUser>> {
        let ids: BTreeSet<Uuid> = open.iter().filter_map(|h| h.holder.login).collect();
        futures::stream::iter(ids)
        .map(|id| async move {
                let provider = self.oidc.0.clone();
            let user = auth::resolve_login(&self.config, &self.key, self.store.as_ref(), provider, id)
                .await;
            (id, user)
        })
        .buffer_unordered(READS_AT_ONCE)
        .filter_map(|(id, user)| async move {
            match user {
                Ok(user) => Some((id, user)),
                Err(e) => {
                    tracing::warn!(login = %id, error = ?e.source, "cannot check a login that holds a terminal or stream open; keeping them until the next check");
                    None
                }
            }
        })
        .collect()
        .await
    }

    /// The running sessions, whoever holds them open: each requester's live logins are read as
    /// a request reads them (the provider asked when its check is due), and a requester none
    /// of whose logins holds `request` in a session's environment any more loses it
    /// (`Revoked`). A requester with no live login is judged when they sign in again: the
    /// terminal refuses them (`relay`), and this pass ends the session then.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn idle_pass(&self) {
        let filter = ListFilter {
            in_progress: true,
            limit: 500,
            ..Default::default()
        };
        let running = match self.store.list(&filter).await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %e, "cannot list the running sessions; trying at the next check");
                return;
            }
        };
        let mut envs_of: HashMap<String, BTreeSet<String>> = HashMap::new();
        for s in running
            .iter()
            .filter(|s| matches!(s.state, SessionState::Activating | SessionState::Active))
        {
            envs_of
                .entry(s.requester.clone())
                .or_default()
                .insert(s.environment.clone());
        }
        let now = time::OffsetDateTime::now_utc();
        for (requester, envs) in envs_of {
            let Some(holds) = self.requests_of(&requester, now).await else {
                continue;
            };
            for env in envs.iter().filter(|e| !holds.contains(*e)) {
                self.end_sessions_of(&requester, env).await;
            }
        }
    }

    /// The environments where `user` holds `request` by any of their live logins, read now;
    /// `None` when they have none or one could not be read (nothing is judged then).
    async fn requests_of(&self, user: &str, now: time::OffsetDateTime) -> Option<BTreeSet<String>> {
        let logins = self.store.live_logins(Some(user), now).await.ok()?;
        let mut read = false;
        let mut envs = BTreeSet::new();
        for l in logins {
            let provider = self.oidc.0.clone();
            let resolved =
                auth::resolve_login(&self.config, &self.key, self.store.as_ref(), provider, l.id)
                    .await
                    .ok()?;
            if let Some(u) = resolved {
                read = true;
                let access = access_of(&self.config, &u.name, &u.groups);
                envs.extend(
                    access
                        .into_iter()
                        .filter(|(_, p)| p.request)
                        .map(|(e, _)| e),
                );
            }
        }
        read.then_some(envs)
    }

    /// Ends `requester`'s sessions in `environment` that run or are starting: they no longer
    /// hold the right to them.
    async fn end_sessions_of(&self, requester: &str, environment: &str) {
        let filter = ListFilter {
            requester: Some(requester.to_string()),
            environment: Some(environment.to_string()),
            in_progress: true,
            limit: 200,
            ..Default::default()
        };
        let sessions = match self.store.list(&filter).await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(%requester, %environment, error = %e, "cannot list the sessions of a requester who lost access; trying at the next check");
                return;
            }
        };
        for s in sessions
            .iter()
            .filter(|s| matches!(s.state, SessionState::Activating | SessionState::Active))
        {
            let end = SessionEvent::SystemEnd {
                reason: EndReason::Revoked,
            };
            match self.lifecycle.apply_event(s.id, end).await {
                Ok(_) => {
                    tracing::info!(id = %s.id, %requester, %environment, "session ended: its requester no longer holds tower.breakglass.request there");
                }
                Err(e) => {
                    tracing::warn!(id = %s.id, error = %e, "cannot end the session of a requester who lost access; trying at the next check");
                }
            }
        }
    }
}
