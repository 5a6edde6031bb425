-- Locks in force (an environment, or a person), and the append-only history of every lock,
-- unlock request and unlock: the switch the security team pulls in an incident, and the
-- record of who pulled and released it.
CREATE TABLE breakglass_locks (
    scope               TEXT NOT NULL CHECK (scope IN ('environment', 'user')),
    target              TEXT NOT NULL,
    reason              TEXT NOT NULL,
    locked_by           TEXT NOT NULL,
    locked_at           TEXT NOT NULL,
    unlock_by           TEXT,
    unlock_reason       TEXT,
    unlock_at           TEXT,
    PRIMARY KEY (scope, target)
);

CREATE TABLE breakglass_lock_events (
    id      INTEGER PRIMARY KEY AUTOINCREMENT,
    scope   TEXT NOT NULL,
    target  TEXT NOT NULL,
    kind    TEXT NOT NULL CHECK (kind IN ('locked', 'unlock_asked', 'unlocked')),
    actor   TEXT NOT NULL,
    reason  TEXT NOT NULL,
    at      TEXT NOT NULL
);

CREATE TRIGGER breakglass_lock_events_no_update BEFORE UPDATE ON breakglass_lock_events
BEGIN
    SELECT RAISE(ABORT, 'breakglass_lock_events is append-only');
END;

CREATE TRIGGER breakglass_lock_events_no_delete BEFORE DELETE ON breakglass_lock_events
BEGIN
    SELECT RAISE(ABORT, 'breakglass_lock_events is append-only');
END;
