//! What the sweep reads every pass: the id and version of each live session (one narrow
//! statement), and whole rows only for those it has not seen at that version. An idle server
//! with a thousand open sessions used to decode a thousand whole rows every pass, a large part
//! of what it spent doing nothing (BENCHMARKS.md, "Relay and recording").

/// Most ids one `get_many` statement names (well under both engines' bound on parameters).
pub const MANY_BATCH: usize = 1_000;

/// The inherent methods behind `Store::live_versions` and `Store::get_many` of a backend.
macro_rules! live_sql {
    ($store:ident, $db:ty) => {
        impl $store {
            async fn live_id_versions(&self) -> Result<Vec<(Uuid, i64)>, crate::store::StoreError> {
                let mut q = sqlx::QueryBuilder::<$db>::new(
                    "SELECT id, version FROM breakglass_sessions WHERE state IN (",
                );
                let mut states = q.separated(", ");
                for s in SessionState::ALL.into_iter().filter(|s| !s.is_final()) {
                    states.push_bind(s.as_str());
                }
                q.push(")");
                Ok(q.build_query_as::<(Uuid, i64)>()
                    .fetch_all(&self.pool)
                    .await?)
            }

            async fn rows_of(
                &self,
                ids: &[Uuid],
            ) -> Result<Vec<Session>, crate::store::StoreError> {
                let mut out = Vec::with_capacity(ids.len());
                for batch in ids.chunks(crate::store::live::MANY_BATCH) {
                    let mut q = sqlx::QueryBuilder::<$db>::new(
                        "SELECT * FROM breakglass_sessions WHERE id IN (",
                    );
                    let mut list = q.separated(", ");
                    for id in batch {
                        list.push_bind(*id);
                    }
                    q.push(")");
                    for row in q
                        .build_query_as::<SessionRow>()
                        .fetch_all(&self.pool)
                        .await?
                    {
                        out.push(Session::try_from(row)?);
                    }
                }
                Ok(out)
            }
        }
    };
}

pub(crate) use live_sql;
