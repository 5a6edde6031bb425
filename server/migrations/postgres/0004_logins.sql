-- Logins: one row per sign-in. The session cookie carries only the id, so logout, an
-- administrator or an expiry ends a login for every copy of its cookie at once.
CREATE TABLE breakglass_logins (
    id          UUID PRIMARY KEY,
    user_name   TEXT NOT NULL,
    source      TEXT NOT NULL CHECK (source IN ('dev', 'oidc')),
    groups_json TEXT NOT NULL,
    nonce       TEXT NOT NULL,
    created_at  TIMESTAMPTZ NOT NULL,
    expires_at  TIMESTAMPTZ NOT NULL,
    revoked_at  TIMESTAMPTZ,
    revoked_by  TEXT,
    id_token    TEXT,
    -- OIDC: the refresh token, and when the provider was last asked about the login.
    refresh_token     TEXT,
    claims_checked_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX breakglass_logins_user ON breakglass_logins (user_name);
CREATE INDEX breakglass_logins_expires ON breakglass_logins (expires_at);
