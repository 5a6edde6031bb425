//! A right taken back reaches what is already open: the live-update streams of a login that
//! ends (logout, `logins revoke`) end within two seconds, on the replica that ended it and on
//! the others, while the person's other logins and other people keep theirs. On both engines.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use axum::http::{Method, StatusCode};
use breakglass_server::config::FileConfig;
use breakglass_server::store::LoginSelector;
use common::sse::{serve, Live, Sse};
use common::{Caller, TestServer};
use tokio::time::Instant;

/// The bound the design sets from a right's end to its streams' end.
const WITHIN: Duration = Duration::from_secs(2);

/// Proves `events` is still open and delivering: a request `who` makes reaches it.
async fn still_delivers(s: &TestServer, who: &Caller, events: &mut Sse, what: &str) {
    let made = s.create(who, "dev").await;
    let id = made["id"].as_str().unwrap();
    assert!(
        events
            .session_event(id, "create", Duration::from_secs(10))
            .await
            .is_some(),
        "{}: {what} stopped delivering",
        s.backend
    );
}

/// Waits for `events` to end; how long it took from `since`, failing past the bound.
async fn ends(events: &mut Sse, since: Instant, what: &str) -> Duration {
    assert!(
        events.ends_within(WITHIN * 3).await,
        "{what} was still open {:?} after its right ended",
        WITHIN * 3
    );
    let took = since.elapsed();
    assert!(
        took <= WITHIN,
        "{what} ended after {took:?}, past {WITHIN:?}"
    );
    took
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ended_login_ends_its_streams_and_nothing_else() {
    for s in common::servers().await {
        let live = serve(&s).await;
        // Two browsers of alice (two logins), and bob.
        let alice = s.login("alice").await;
        let alice_elsewhere = s.login("alice").await;
        let bob = s.login("bob").await;
        let mut a1 = live.events(&alice).await;
        let mut a2 = live.events(&alice_elsewhere).await;
        let mut b = live.events(&bob).await;

        let out = s
            .send(&alice, Method::POST, "/api/breakglass/auth/logout", None)
            .await;
        assert_eq!(out.status, StatusCode::OK, "{:?}", out.body);
        let took = ends(&mut a1, Instant::now(), "the signed-out login's stream").await;
        eprintln!("{}: logout ended its stream in {took:?}", s.backend);
        still_delivers(&s, &bob, &mut a2, "alice's other login's stream").await;

        // An administrator ends every login of alice (what `logins revoke --user` does, from
        // another process: only the database tells the server).
        let at = Instant::now();
        let n = s
            .ctx
            .store
            .revoke_logins(
                &LoginSelector::User("alice".into()),
                "admin",
                time::OffsetDateTime::now_utc(),
            )
            .await
            .unwrap();
        assert_eq!(n, 1, "{}", s.backend);
        let took = ends(&mut a2, at, "the revoked login's stream").await;
        eprintln!(
            "{}: `logins revoke` ended the stream in {took:?}",
            s.backend
        );
        still_delivers(&s, &bob, &mut b, "bob's stream").await;
        assert!(
            s.ctx.holds.len() == 1,
            "{}: only bob's stream is held",
            s.backend
        );
    }
}

/// Two replicas on one PostgreSQL database sharing the cookie secret, so one login works on
/// both: the logout on A ends the stream the same login holds on B.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_login_ended_on_one_replica_ends_its_streams_on_the_other() {
    let Some(admin) = common::postgres_admin() else {
        return;
    };
    let url = common::fresh_pg_database(&admin).await;
    let file = || FileConfig {
        session_secret: Some("replicas-share-this-cookie-secret-".repeat(2)),
        ..FileConfig::default()
    };
    let a = common::server_with("postgres", Some(url.clone()), file()).await;
    let b = common::server_with("postgres", Some(url), file()).await;
    let (_live_a, live_b): (Live, Live) = (serve(&a).await, serve(&b).await);
    let alice = a.login("alice").await;
    let bob = a.login("bob").await;
    let mut on_b = live_b.events(&alice).await;
    let mut bob_on_b = live_b.events(&bob).await;
    still_delivers(&a, &bob, &mut on_b, "alice's stream on B").await;

    let out = a
        .send(&alice, Method::POST, "/api/breakglass/auth/logout", None)
        .await;
    assert_eq!(out.status, StatusCode::OK, "{:?}", out.body);
    let took = ends(
        &mut on_b,
        Instant::now(),
        "alice's stream on the other replica",
    )
    .await;
    eprintln!("a logout on A ended the stream on B in {took:?}");
    still_delivers(&a, &bob, &mut bob_on_b, "bob's stream on B").await;
}

/// A requester who lost `request` in an environment loses their running session there even
/// with nothing open: the check reads their live logins against the configuration now.
#[tokio::test]
async fn a_requester_who_lost_the_right_loses_a_session_nobody_holds_open() {
    use breakglass_server::revocation::Checker;
    use breakglass_shared::{Permission, SessionEvent, SessionState};
    for s in common::servers().await {
        let b = s.backend;
        let alice = s.login("alice").await;
        let bob = s.login("bob").await;
        let mine = s.create(&alice, "dev").await["id"]
            .as_str()
            .unwrap()
            .to_string();
        let theirs = s.create(&bob, "dev").await["id"]
            .as_str()
            .unwrap()
            .to_string();
        let ids = [mine, theirs].map(|i| uuid::Uuid::parse_str(&i).unwrap());
        for id in ids {
            for e in [SessionEvent::BeginActivation, SessionEvent::Activated] {
                s.ctx.lifecycle.apply_event(id, e).await.unwrap();
            }
        }
        // The same server, its configuration changed: engineers may no longer ask in dev.
        let mut config = (*s.ctx.config).clone();
        for e in config.environments.iter_mut().filter(|e| e.name == "dev") {
            if let Some(h) = e.permissions.get_mut(&Permission::Request) {
                h.groups.retain(|g| g != "engineers");
            }
        }
        let checker = Checker {
            config: std::sync::Arc::new(config),
            key: s.ctx.key.clone(),
            store: s.ctx.store.clone(),
            oidc: s.ctx.oidc.clone(),
            lifecycle: s.ctx.lifecycle.clone(),
            holds: std::sync::Arc::downgrade(&s.ctx.holds),
            locks_changed: s.ctx.locks_changed.clone(),
        };
        checker.idle_pass().await;
        let row = s.ctx.store.get(ids[0]).await.unwrap().unwrap();
        assert!(
            matches!(row.state, SessionState::Ending | SessionState::Ended),
            "{b}: {:?}",
            row.state
        );
        assert_eq!(
            row.end_reason,
            Some(breakglass_shared::EndReason::Revoked),
            "{b}"
        );
        let other = s.ctx.store.get(ids[1]).await.unwrap().unwrap();
        assert_eq!(
            other.state,
            SessionState::Active,
            "{b}: bob (sre) keeps his"
        );
    }
}
