-- Which person at the identity provider (issuer and `sub`) each OIDC user name belongs to:
-- the name is what people see and the configuration grants, the subject is who it is, and a
-- name is never shared by two subjects (the second is refused at sign-in).
CREATE TABLE breakglass_identities (
    subject    TEXT PRIMARY KEY NOT NULL,
    user_name  TEXT NOT NULL UNIQUE,
    seen_at    TIMESTAMPTZ NOT NULL
);
