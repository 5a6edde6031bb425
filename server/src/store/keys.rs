//! Security keys (`breakglass_security_keys`) and step-up challenges
//! (`breakglass_step_up_challenges`). A challenge is taken with one `DELETE ... RETURNING`, so
//! among replicas racing to redeem one assertion exactly one gets it: that is what makes an
//! assertion good once. The library's state is kept as the JSON it serialises to; this layer
//! does not read it.

use async_trait::async_trait;
use time::OffsetDateTime;
use uuid::Uuid;

use super::StoreError;

/// A registered key.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct SecurityKey {
    /// Its id.
    pub id: Uuid,
    /// Whose it is.
    pub user_name: String,
    /// The name its owner gave it.
    pub name: String,
    /// The WebAuthn credential id (unpadded base64url), unique across everyone.
    pub credential_id: String,
    /// The library's credential (public key, counter), JSON.
    pub passkey_json: String,
    /// Registered.
    pub created_at: OffsetDateTime,
    /// Last confirmed an action.
    pub last_used_at: Option<OffsetDateTime>,
}

/// An issued challenge.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct Challenge {
    /// The challenge bytes, lowercase hex.
    pub challenge: String,
    /// Whom it was issued to.
    pub user_name: String,
    /// `register`, or the step-up action's name.
    pub purpose: String,
    /// The session the action is for.
    pub session_id: Option<Uuid>,
    /// The library's ceremony state, JSON.
    pub state_json: String,
    /// Void after this.
    pub expires_at: OffsetDateTime,
}

/// Keys and challenges; every store has them.
#[async_trait]
pub trait KeyStore: Send + Sync {
    /// Stores a new key; `false` when its credential is registered already (to anyone).
    async fn add_key(&self, key: &SecurityKey) -> Result<bool, StoreError>;
    /// `user`'s keys, oldest first.
    async fn keys_of(&self, user: &str) -> Result<Vec<SecurityKey>, StoreError>;
    /// Removes `user`'s key `id`; `false` when they have none by that id.
    async fn remove_key(&self, user: &str, id: Uuid) -> Result<bool, StoreError>;
    /// Records that key `id` confirmed an action at `at`, with its updated credential.
    async fn key_used(
        &self,
        id: Uuid,
        passkey_json: &str,
        at: OffsetDateTime,
    ) -> Result<(), StoreError>;
    /// Keeps an issued challenge (and drops those void before `c`'s issue).
    async fn put_challenge(&self, c: &Challenge, now: OffsetDateTime) -> Result<(), StoreError>;
    /// Takes challenge `challenge` out (whoever asks first gets it; nobody after).
    async fn take_challenge(&self, challenge: &str) -> Result<Option<Challenge>, StoreError>;
}

/// [`KeyStore`] for a backend.
macro_rules! key_sql {
    ($store:ident) => {
        #[async_trait::async_trait]
        impl crate::store::keys::KeyStore for $store {
            async fn add_key(
                &self,
                k: &crate::store::keys::SecurityKey,
            ) -> Result<bool, crate::store::StoreError> {
                let done = sqlx::query(
                    "INSERT INTO breakglass_security_keys \
                     (id, user_name, name, credential_id, passkey_json, created_at, last_used_at) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (credential_id) DO NOTHING",
                )
                .bind(k.id)
                .bind(k.user_name.as_str())
                .bind(k.name.as_str())
                .bind(k.credential_id.as_str())
                .bind(k.passkey_json.as_str())
                .bind(k.created_at)
                .bind(k.last_used_at)
                .execute(&self.pool)
                .await?;
                Ok(done.rows_affected() == 1)
            }

            async fn keys_of(
                &self,
                user: &str,
            ) -> Result<Vec<crate::store::keys::SecurityKey>, crate::store::StoreError> {
                Ok(sqlx::query_as(
                    "SELECT * FROM breakglass_security_keys WHERE user_name = $1 \
                     ORDER BY created_at, id",
                )
                .bind(user)
                .fetch_all(&self.pool)
                .await?)
            }

            async fn remove_key(
                &self,
                user: &str,
                id: uuid::Uuid,
            ) -> Result<bool, crate::store::StoreError> {
                let done = sqlx::query(
                    "DELETE FROM breakglass_security_keys WHERE id = $1 AND user_name = $2",
                )
                .bind(id)
                .bind(user)
                .execute(&self.pool)
                .await?;
                Ok(done.rows_affected() == 1)
            }

            async fn key_used(
                &self,
                id: uuid::Uuid,
                passkey_json: &str,
                at: time::OffsetDateTime,
            ) -> Result<(), crate::store::StoreError> {
                sqlx::query(
                    "UPDATE breakglass_security_keys SET passkey_json = $1, last_used_at = $2 \
                     WHERE id = $3",
                )
                .bind(passkey_json)
                .bind(at)
                .bind(id)
                .execute(&self.pool)
                .await?;
                Ok(())
            }

            async fn put_challenge(
                &self,
                c: &crate::store::keys::Challenge,
                now: time::OffsetDateTime,
            ) -> Result<(), crate::store::StoreError> {
                sqlx::query("DELETE FROM breakglass_step_up_challenges WHERE expires_at < $1")
                    .bind(now)
                    .execute(&self.pool)
                    .await?;
                sqlx::query(
                    "INSERT INTO breakglass_step_up_challenges \
                     (challenge, user_name, purpose, session_id, state_json, expires_at) \
                     VALUES ($1, $2, $3, $4, $5, $6)",
                )
                .bind(c.challenge.as_str())
                .bind(c.user_name.as_str())
                .bind(c.purpose.as_str())
                .bind(c.session_id)
                .bind(c.state_json.as_str())
                .bind(c.expires_at)
                .execute(&self.pool)
                .await?;
                Ok(())
            }

            async fn take_challenge(
                &self,
                challenge: &str,
            ) -> Result<Option<crate::store::keys::Challenge>, crate::store::StoreError> {
                Ok(sqlx::query_as(
                    "DELETE FROM breakglass_step_up_challenges WHERE challenge = $1 RETURNING *",
                )
                .bind(challenge)
                .fetch_optional(&self.pool)
                .await?)
            }
        }
    };
}

pub(crate) use key_sql;
