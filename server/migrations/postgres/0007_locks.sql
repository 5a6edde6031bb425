-- Locks in force (an environment, or a person), and the append-only history of every lock,
-- unlock request and unlock: the switch the security team pulls in an incident, and the
-- record of who pulled and released it.
CREATE TABLE breakglass_locks (
    scope               TEXT NOT NULL CHECK (scope IN ('environment', 'user')),
    target              TEXT NOT NULL,
    reason              TEXT NOT NULL,
    locked_by           TEXT NOT NULL,
    locked_at           TIMESTAMPTZ NOT NULL,
    unlock_by           TEXT,
    unlock_reason       TEXT,
    unlock_at           TIMESTAMPTZ,
    PRIMARY KEY (scope, target)
);

CREATE TABLE breakglass_lock_events (
    id      BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    scope   TEXT NOT NULL,
    target  TEXT NOT NULL,
    kind    TEXT NOT NULL CHECK (kind IN ('locked', 'unlock_asked', 'unlocked')),
    actor   TEXT NOT NULL,
    reason  TEXT NOT NULL,
    at      TIMESTAMPTZ NOT NULL
);

CREATE TRIGGER breakglass_lock_events_append_only BEFORE UPDATE OR DELETE ON breakglass_lock_events
    FOR EACH ROW EXECUTE FUNCTION breakglass_refuse_change();
