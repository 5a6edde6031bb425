-- The audit record: one row per session. Written only through compare-and-set on `version`.
CREATE TABLE breakglass_sessions (
    id                       BLOB PRIMARY KEY NOT NULL,
    environment              TEXT NOT NULL,
    tier                     TEXT NOT NULL CHECK (tier IN ('ground', 'flight')),
    namespace                TEXT NOT NULL,
    pod                      TEXT NOT NULL,
    target_container         TEXT,
    mode                     TEXT NOT NULL CHECK (mode IN ('live', 'copy')),
    reason                   TEXT NOT NULL,
    ticket                   TEXT,
    duration_minutes         INTEGER NOT NULL CHECK (duration_minutes > 0),
    recycle                  BOOLEAN NOT NULL,
    requester                TEXT NOT NULL,
    approver                 TEXT,
    glass_broken_by          TEXT,
    state                    TEXT NOT NULL,
    end_reason               TEXT,
    end_reason_by            TEXT,
    denial_reason            TEXT,
    failure                  TEXT,
    version                  INTEGER NOT NULL,
    created_at               TEXT NOT NULL,
    decided_at               TEXT,
    activating_at            TEXT,
    active_at                TEXT,
    expires_at               TEXT,
    ending_at                TEXT,
    finished_at              TEXT,
    grant_name               TEXT,
    debug_container          TEXT,
    copy_pod                 TEXT,
    process_access_annotated BOOLEAN NOT NULL DEFAULT 0,
    recording_key            TEXT,
    recording_version        TEXT,
    recording_sha256         TEXT,
    recording_bytes          INTEGER,
    rekor_uuid               TEXT,
    rekor_log_index          INTEGER,
    review_reviewer          TEXT,
    review_at                TEXT,
    review_verdict           TEXT,
    review_notes             TEXT
);

-- One index per list filter, each ending in id so pages come newest first from the index.
CREATE INDEX breakglass_sessions_environment ON breakglass_sessions (environment, id);
CREATE INDEX breakglass_sessions_state ON breakglass_sessions (state, id);
CREATE INDEX breakglass_sessions_requester ON breakglass_sessions (requester, id);

CREATE TRIGGER breakglass_sessions_no_delete BEFORE DELETE ON breakglass_sessions
BEGIN
    SELECT RAISE(ABORT, 'breakglass_sessions is the audit record: rows are never deleted');
END;

-- Append-only history of every transition and step.
CREATE TABLE breakglass_events (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id BLOB NOT NULL REFERENCES breakglass_sessions (id),
    actor      TEXT NOT NULL,
    at         TEXT NOT NULL,
    from_state TEXT,
    to_state   TEXT NOT NULL,
    kind       TEXT NOT NULL,
    detail     TEXT
);

CREATE INDEX breakglass_events_session ON breakglass_events (session_id, id);

CREATE TRIGGER breakglass_events_no_update BEFORE UPDATE ON breakglass_events
BEGIN
    SELECT RAISE(ABORT, 'breakglass_events is append-only');
END;

CREATE TRIGGER breakglass_events_no_delete BEFORE DELETE ON breakglass_events
BEGIN
    SELECT RAISE(ABORT, 'breakglass_events is append-only');
END;
