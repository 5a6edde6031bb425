//! The sweep's copy of the live sessions (`sweep::LiveSet`), kept from one pass to the next so
//! an idle pass decodes no whole row: after sessions change, leave the live states or come
//! new, the next refresh has each as the store has it now, on both engines.
#![allow(clippy::unwrap_used)]

mod common;

use breakglass_server::sweep::LiveSet;
use breakglass_shared::SessionState;

fn ids_and_states(live: &[&breakglass_shared::Session]) -> Vec<(String, SessionState, i64)> {
    live.iter()
        .map(|s| (s.id.to_string(), s.state, s.version))
        .collect()
}

#[tokio::test]
async fn the_live_set_follows_changes_new_sessions_and_final_states() {
    for s in common::servers().await {
        let (alice, bob) = (s.login("alice").await, s.login("bob").await);
        let id = |v: serde_json::Value| v["id"].as_str().unwrap().to_string();
        // Flight requests wait for approval, live; no cluster is configured, so nothing else
        // moves them.
        let a = id(s.create(&alice, "prod").await);
        let b = id(s.create(&alice, "prod").await);

        let mut known = LiveSet::default();
        let first = ids_and_states(&known.refresh(s.ctx.store.as_ref()).await.unwrap());
        assert_eq!(
            first,
            vec![
                (b.clone(), SessionState::PendingApproval, 1),
                (a.clone(), SessionState::PendingApproval, 1),
            ],
            "{}: newest first, as stored",
            s.backend
        );

        // b moves on (still live), a is withdrawn (final), c is new.
        assert_eq!(s.act(&bob, &b, "approve", None).await.status, 200);
        assert_eq!(s.act(&alice, &a, "end", None).await.status, 200);
        let c = id(s.create(&alice, "prod").await);
        let b_now = s.ctx.store.get(b.parse().unwrap()).await.unwrap().unwrap();

        let second = ids_and_states(&known.refresh(s.ctx.store.as_ref()).await.unwrap());
        assert_eq!(
            second,
            vec![
                (c.clone(), SessionState::PendingApproval, 1),
                (b.clone(), SessionState::Approved, b_now.version),
            ],
            "{}: the changed row re-read, the final one gone, the new one in",
            s.backend
        );

        // What the store reads for it: whole rows of the ids asked that exist.
        let missing = uuid::Uuid::now_v7();
        let mut rows = s
            .ctx
            .store
            .get_many(&[c.parse().unwrap(), missing, a.parse().unwrap()])
            .await
            .unwrap();
        rows.sort_by_key(|r| r.id);
        let got: Vec<String> = rows.iter().map(|r| r.id.to_string()).collect();
        assert_eq!(got, vec![a.clone(), c.clone()], "{}", s.backend);
        assert_eq!(rows[0].state, SessionState::Withdrawn);
    }
}
