-- Leader election among replicas (the sweep): one row per lease, held until it expires.
CREATE TABLE breakglass_leases (
    name          TEXT PRIMARY KEY,
    holder        TEXT NOT NULL,
    expires_at_ms BIGINT NOT NULL
);
