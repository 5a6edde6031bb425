-- Step-up with security keys. A person's registered WebAuthn credentials (the passkey as the
-- library stores it, JSON, with its signature counter), one credential id per key across
-- everyone; and the challenges issued, each for one purpose (registering a key, or one action
-- on one session) and deleted when used, so an assertion counts once.
CREATE TABLE breakglass_security_keys (
    id            UUID PRIMARY KEY,
    user_name     TEXT NOT NULL,
    name          TEXT NOT NULL,
    credential_id TEXT NOT NULL UNIQUE,
    passkey_json  TEXT NOT NULL,
    created_at    TIMESTAMPTZ NOT NULL,
    last_used_at  TIMESTAMPTZ
);
CREATE INDEX breakglass_security_keys_user ON breakglass_security_keys (user_name);

CREATE TABLE breakglass_step_up_challenges (
    challenge   TEXT PRIMARY KEY,
    user_name   TEXT NOT NULL,
    purpose     TEXT NOT NULL,
    session_id  UUID,
    state_json  TEXT NOT NULL,
    expires_at  TIMESTAMPTZ NOT NULL
);
CREATE INDEX breakglass_step_up_challenges_expires ON breakglass_step_up_challenges (expires_at);
