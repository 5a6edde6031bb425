-- Logins: one row per sign-in. The session cookie carries only the id, so logout, an
-- administrator or an expiry ends a login for every copy of its cookie at once.
CREATE TABLE breakglass_logins (
    id          BLOB PRIMARY KEY NOT NULL,
    user_name   TEXT NOT NULL,
    source      TEXT NOT NULL CHECK (source IN ('dev', 'oidc')),
    groups_json TEXT NOT NULL,
    nonce       TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    expires_at  TEXT NOT NULL,
    revoked_at  TEXT,
    revoked_by  TEXT,
    id_token    TEXT,
    -- OIDC: the refresh token, and when the provider was last asked about the login.
    refresh_token     TEXT,
    claims_checked_at TEXT NOT NULL
);
CREATE INDEX breakglass_logins_user ON breakglass_logins (user_name);
CREATE INDEX breakglass_logins_expires ON breakglass_logins (expires_at);
