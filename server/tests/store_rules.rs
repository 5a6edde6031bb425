//! The audit trail's rules hold in the database itself, on both engines: a session row is
//! never deleted, an event is never changed or deleted, whoever holds a connection (an
//! operator's shell, a bug that bypasses the store). The store's own path still writes.
#![allow(clippy::unwrap_used)]

mod common;

/// A connection of its own to the server's database, past the store.
enum Raw {
    Sqlite(sqlx::SqlitePool),
    Postgres(sqlx::PgPool),
}

impl Raw {
    async fn connect(url: &str) -> Raw {
        if url.starts_with("sqlite:") {
            Raw::Sqlite(sqlx::SqlitePool::connect(url).await.unwrap())
        } else {
            Raw::Postgres(sqlx::PgPool::connect(url).await.unwrap())
        }
    }

    async fn execute(&self, sql: &str) -> Result<u64, sqlx::Error> {
        match self {
            Raw::Sqlite(p) => sqlx::query(sql).execute(p).await.map(|r| r.rows_affected()),
            Raw::Postgres(p) => sqlx::query(sql).execute(p).await.map(|r| r.rows_affected()),
        }
    }
}

#[tokio::test]
async fn rows_cannot_be_deleted_and_events_cannot_be_changed_on_either_database() {
    for s in common::servers().await {
        let alice = s.login("alice").await;
        let id = s.create(&alice, "dev").await["id"]
            .as_str()
            .unwrap()
            .to_string();
        let before = s.counts().await;
        assert!(before.0 >= 1 && before.1 >= 1, "{before:?}");
        let raw = Raw::connect(&s.ctx.config.database_url).await;
        for sql in [
            "DELETE FROM breakglass_sessions",
            "UPDATE breakglass_events SET actor = 'mallory'",
            "UPDATE breakglass_events SET detail = 'nothing happened'",
            "DELETE FROM breakglass_events",
        ] {
            let refused = raw.execute(sql).await;
            assert!(refused.is_err(), "{}: {sql} went through", s.backend);
            assert_eq!(s.counts().await, before, "{}: {sql}", s.backend);
        }
        // The store's own path (compare-and-set plus an appended event) is what still writes.
        let r = s.act(&alice, &id, "end", Some(serde_json::json!({}))).await;
        assert!(r.status.is_success(), "{}: {:?}", s.backend, r.body);
        let after = s.counts().await;
        assert_eq!(after.0, before.0, "{}", s.backend);
        assert!(
            after.1 > before.1,
            "{}: the end appended an event",
            s.backend
        );
    }
}

#[tokio::test]
async fn events_read_apart_from_their_row_become_those_of_its_version_on_either_database() {
    for s in common::servers().await {
        let alice = s.login("alice").await;
        let id: uuid::Uuid = s.create(&alice, "dev").await["id"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
        let store = s.ctx.store.as_ref();
        let old_row = store.get(id).await.unwrap().unwrap();
        let old_events = store.events(id).await.unwrap();
        assert_eq!(old_events.len() as i64, old_row.version, "{}", s.backend);
        let r = s
            .act(&alice, &id.to_string(), "end", Some(serde_json::json!({})))
            .await;
        assert!(r.status.is_success(), "{}: {:?}", s.backend, r.body);
        let new_row = store.get(id).await.unwrap().unwrap();
        let new_events = store.events(id).await.unwrap();
        assert!(new_row.version > old_row.version, "{}", s.backend);
        // Events read after a later change than the row's: cut to the row.
        let as_of = breakglass_server::store::events_as_of(store, &old_row, new_events.clone());
        assert_eq!(as_of.await.unwrap(), old_events, "{}", s.backend);
        // Events read before the row's change: read again.
        let as_of = breakglass_server::store::events_as_of(store, &new_row, old_events.clone());
        assert_eq!(as_of.await.unwrap(), new_events, "{}", s.backend);
    }
}
