//! Leases in the database (`breakglass_leases`): the sweep's leader and each recording's
//! writer. One holder at a time; a lease is renewable by its holder and free for another after
//! it expires or is released. The inherent methods here are what `Store`'s lease methods call.

/// Most leases one renewal statement names: well under SQLite's bound on bound parameters
/// (32,766) and PostgreSQL's (65,535), and a statement small enough to plan quickly.
pub const LEASE_BATCH: usize = 1_000;

/// The inherent lease methods of a backend.
macro_rules! lease_sql {
    ($store:ident, $db:ty) => {
        impl $store {
            async fn take_lease(
                &self,
                name: &str,
                holder: &str,
                now_ms: i64,
                ttl_ms: i64,
            ) -> Result<bool, crate::store::StoreError> {
                let done = sqlx::query(
                    "INSERT INTO breakglass_leases (name, holder, expires_at_ms) VALUES ($1, $2, $3) \
                     ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, \
                     expires_at_ms = excluded.expires_at_ms \
                     WHERE breakglass_leases.holder = excluded.holder \
                     OR breakglass_leases.expires_at_ms < $4",
                )
                .bind(name)
                .bind(holder)
                .bind(now_ms.saturating_add(ttl_ms))
                .bind(now_ms)
                .execute(&self.pool)
                .await?;
                Ok(done.rows_affected() == 1)
            }

            async fn renew_held(
                &self,
                names: &[String],
                holder: &str,
                until_ms: i64,
            ) -> Result<Vec<String>, crate::store::StoreError> {
                let mut renewed = Vec::with_capacity(names.len());
                for batch in names.chunks(crate::store::LEASE_BATCH) {
                    let mut q = sqlx::QueryBuilder::<$db>::new("UPDATE breakglass_leases SET expires_at_ms = ");
                    q.push_bind(until_ms).push(" WHERE holder = ").push_bind(holder);
                    q.push(" AND name IN (");
                    let mut list = q.separated(", ");
                    for name in batch {
                        list.push_bind(name.as_str());
                    }
                    q.push(") RETURNING name");
                    for row in q.build().fetch_all(&self.pool).await? {
                        renewed.push(sqlx::Row::try_get::<String, _>(&row, "name")?);
                    }
                }
                Ok(renewed)
            }

            async fn holder_of_lease(&self, name: &str, now_ms: i64) -> Result<Option<String>, crate::store::StoreError> {
                let row: Option<(String,)> = sqlx::query_as(
                    "SELECT holder FROM breakglass_leases WHERE name = $1 AND expires_at_ms >= $2",
                )
                .bind(name)
                .bind(now_ms)
                .fetch_optional(&self.pool)
                .await?;
                Ok(row.map(|(h,)| h))
            }

            async fn give_up_lease(&self, name: &str, holder: &str) -> Result<(), crate::store::StoreError> {
                sqlx::query("DELETE FROM breakglass_leases WHERE name = $1 AND holder = $2")
                    .bind(name)
                    .bind(holder)
                    .execute(&self.pool)
                    .await?;
                Ok(())
            }
        }
    };
}

pub(crate) use lease_sql;
