//! Many new sessions at once ([`crate::store::Store::insert_many`]): an import, or the
//! benchmarks' 100,000 stored sessions. The rows and their creation events go in through the
//! same column binders as [`crate::store::Store::insert`], in multi-row statements inside one
//! transaction, so the table's checks and triggers judge every row and nothing is half there.

/// Sessions per statement: 500 rows of about 40 columns stay under SQLite's 32,766 bound
/// parameters (and PostgreSQL's 65,535), while a statement per row would make 100,000 rows a
/// minute of round trips.
pub const CHUNK: usize = 500;

/// Events per statement (7 columns each), however long the histories are.
pub const EVENTS_CHUNK: usize = 2_000;

/// The inherent `insert_rows` of a backend; `Store::insert_many` calls it.
macro_rules! bulk_insert {
    ($store:ident, $db:ty) => {
        impl $store {
            /// Inserts `batch` in one transaction: each item is one session's history, its
            /// versions in order (the first its creation) with the event that made each; the
            /// last version becomes the row and every event is appended, as if the session had
            /// lived through the store. A duplicate id fails the whole batch with
            /// [`crate::store::StoreError::Duplicate`]. Other replicas are not told row by row:
            /// an import happens before they serve.
            async fn insert_rows(
                &self,
                batch: &[Vec<(breakglass_shared::Session, crate::store::EventDraft)>],
            ) -> Result<(), crate::store::StoreError> {
                use crate::store::row::{SessionRow, FIXED, MUTABLE};
                let columns = [FIXED, MUTABLE].concat().join(", ");
                let mut tx = self.pool.begin().await?;
                for chunk in batch.chunks(crate::store::bulk::CHUNK) {
                    let rows: Vec<SessionRow> =
                        chunk.iter().filter_map(|h| h.last()).map(|(s, _)| SessionRow::from(s)).collect();
                    if rows.is_empty() {
                        continue;
                    }
                    let mut q: sqlx::QueryBuilder<'_, $db> = sqlx::QueryBuilder::new(format!(
                        "INSERT INTO breakglass_sessions ({columns}) "
                    ));
                    q.push_values(&rows, |mut values, row| {
                        row.bind_fixed(&mut values);
                        row.bind_mutable(&mut values);
                    });
                    if let Err(e) = q.build().execute(&mut *tx).await {
                        let duplicate = matches!(&e, sqlx::Error::Database(d) if d.is_unique_violation());
                        return Err(if duplicate { crate::store::StoreError::Duplicate } else { e.into() });
                    }
                    // Each event with the state before it (none before the creation).
                    let events: Vec<_> = chunk
                        .iter()
                        .flat_map(|h| {
                            let before = std::iter::once(None).chain(h.iter().map(|(s, _)| Some(s.state)));
                            h.iter().zip(before)
                        })
                        .collect();
                    for part in events.chunks(crate::store::bulk::EVENTS_CHUNK) {
                        let mut q: sqlx::QueryBuilder<'_, $db> = sqlx::QueryBuilder::new(
                            "INSERT INTO breakglass_events \
                             (session_id, actor, at, from_state, to_state, kind, detail) ",
                        );
                        q.push_values(part, |mut values, ((s, ev), from)| {
                            values
                                .push_bind(s.id)
                                .push_bind(ev.actor.as_str())
                                .push_bind(ev.at)
                                .push_bind(from.map(breakglass_shared::SessionState::as_str))
                                .push_bind(s.state.as_str())
                                .push_bind(ev.kind.as_str())
                                .push_bind(ev.detail.as_deref());
                        });
                        q.build().execute(&mut *tx).await?;
                    }
                }
                tx.commit().await?;
                self.after_import().await
            }
        }
    };
}

pub(crate) use bulk_insert;
