//! The login records: one row per sign-in, so a login can end (logout, an administrator, its
//! expiry) for every copy of its cookie at once. The cookie carries only the id.

use time::OffsetDateTime;
use uuid::Uuid;

/// How a login was made; each is honoured only while that login is configured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoginSource {
    /// The dev login (a demo user; groups come from the current configuration).
    Dev,
    /// The OIDC login (groups are the ID token's claims at sign-in).
    Oidc,
}

impl LoginSource {
    /// The value stored in `source`.
    pub fn as_str(self) -> &'static str {
        match self {
            LoginSource::Dev => "dev",
            LoginSource::Oidc => "oidc",
        }
    }

    fn parse(s: &str) -> Option<LoginSource> {
        match s {
            "dev" => Some(LoginSource::Dev),
            "oidc" => Some(LoginSource::Oidc),
            _ => None,
        }
    }
}

/// One login.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Login {
    /// The id the cookie carries.
    pub id: Uuid,
    /// The user, as normalised at sign-in.
    pub user: String,
    /// How they signed in.
    pub source: LoginSource,
    /// Groups the identity provider named at sign-in (empty for the dev login, whose groups
    /// are read from the configuration on each request).
    pub groups: Vec<String>,
    /// Random per login: the CSRF token is a MAC of it.
    pub nonce: String,
    /// When it was made.
    pub created_at: OffsetDateTime,
    /// When it stops being honoured.
    pub expires_at: OffsetDateTime,
    /// When it was ended before its expiry, if it was.
    pub revoked_at: Option<OffsetDateTime>,
    /// Who ended it (the user at logout, or the administrator).
    pub revoked_by: Option<String>,
    /// The OIDC ID token, the hint of an RP-initiated logout.
    pub id_token: Option<String>,
    /// The OIDC refresh token, when the provider gave one: the server asks the provider with
    /// it whether the login still holds and what the groups are now.
    pub refresh_token: Option<String>,
    /// When the provider was last asked (the sign-in, for a login just made).
    pub claims_checked_at: OffsetDateTime,
}

impl Login {
    /// Whether a request at `now` may use it.
    pub fn is_live(&self, now: OffsetDateTime) -> bool {
        self.revoked_at.is_none() && now < self.expires_at
    }
}

/// The row as stored.
#[derive(Debug, sqlx::FromRow)]
pub(crate) struct LoginRow {
    id: Uuid,
    user_name: String,
    source: String,
    groups_json: String,
    nonce: String,
    created_at: OffsetDateTime,
    expires_at: OffsetDateTime,
    revoked_at: Option<OffsetDateTime>,
    revoked_by: Option<String>,
    id_token: Option<String>,
    refresh_token: Option<String>,
    claims_checked_at: OffsetDateTime,
}

impl TryFrom<LoginRow> for Login {
    type Error = super::StoreError;

    fn try_from(r: LoginRow) -> Result<Login, super::StoreError> {
        let corrupt = |column, value: &str| super::StoreError::Corrupt {
            id: r.id.to_string(),
            column,
            value: value.to_string(),
        };
        let source = LoginSource::parse(&r.source).ok_or_else(|| corrupt("source", &r.source))?;
        let groups = serde_json::from_str(&r.groups_json)
            .map_err(|_| corrupt("groups_json", &r.groups_json))?;
        Ok(Login {
            id: r.id,
            user: r.user_name,
            source,
            groups,
            nonce: r.nonce,
            created_at: r.created_at,
            expires_at: r.expires_at,
            revoked_at: r.revoked_at,
            revoked_by: r.revoked_by,
            id_token: r.id_token,
            refresh_token: r.refresh_token,
            claims_checked_at: r.claims_checked_at,
        })
    }
}

/// Which logins to end.
#[derive(Debug, Clone)]
pub enum LoginSelector {
    /// This one.
    Id(Uuid),
    /// Every live login of this user.
    User(String),
}

/// The login insert of a backend, kept here so `store/mod.rs` stays a readable size.
macro_rules! login_sql {
    ($store:ident) => {
        impl $store {
            async fn insert_login_row(&self, l: &crate::store::Login) -> Result<(), StoreError> {
                let groups = serde_json::to_string(&l.groups).unwrap_or_else(|_| "[]".into());
                let done = sqlx::query(
                    "INSERT INTO breakglass_logins (id, user_name, source, groups_json, nonce, \
                     created_at, expires_at, revoked_at, revoked_by, id_token, refresh_token, \
                     claims_checked_at) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
                )
                .bind(l.id)
                .bind(l.user.as_str())
                .bind(l.source.as_str())
                .bind(groups)
                .bind(l.nonce.as_str())
                .bind(l.created_at)
                .bind(l.expires_at)
                .bind(l.revoked_at)
                .bind(l.revoked_by.as_deref())
                .bind(l.id_token.as_deref())
                .bind(l.refresh_token.as_deref())
                .bind(l.claims_checked_at)
                .execute(&self.pool)
                .await;
                match done {
                    Err(e) if is_unique_violation(&e) => Err(StoreError::Duplicate),
                    other => other.map(|_| ()).map_err(Into::into),
                }
            }
        }
    };
}

pub(crate) use login_sql;
