-- The audit record: one row per session. Written only through compare-and-set on `version`.
CREATE TABLE breakglass_sessions (
    id                       UUID PRIMARY KEY,
    environment              TEXT NOT NULL,
    tier                     TEXT NOT NULL CHECK (tier IN ('ground', 'flight')),
    namespace                TEXT NOT NULL,
    pod                      TEXT NOT NULL,
    target_container         TEXT,
    mode                     TEXT NOT NULL CHECK (mode IN ('live', 'copy')),
    reason                   TEXT NOT NULL,
    ticket                   TEXT,
    duration_minutes         BIGINT NOT NULL CHECK (duration_minutes > 0),
    recycle                  BOOLEAN NOT NULL,
    requester                TEXT NOT NULL,
    approver                 TEXT,
    glass_broken_by          TEXT,
    state                    TEXT NOT NULL,
    end_reason               TEXT,
    end_reason_by            TEXT,
    denial_reason            TEXT,
    failure                  TEXT,
    version                  BIGINT NOT NULL,
    created_at               TIMESTAMPTZ NOT NULL,
    decided_at               TIMESTAMPTZ,
    activating_at            TIMESTAMPTZ,
    active_at                TIMESTAMPTZ,
    expires_at               TIMESTAMPTZ,
    ending_at                TIMESTAMPTZ,
    finished_at              TIMESTAMPTZ,
    grant_name               TEXT,
    debug_container          TEXT,
    copy_pod                 TEXT,
    process_access_annotated BOOLEAN NOT NULL DEFAULT FALSE,
    recording_key            TEXT,
    recording_version        TEXT,
    recording_sha256         TEXT,
    recording_bytes          BIGINT,
    rekor_uuid               TEXT,
    rekor_log_index          BIGINT,
    review_reviewer          TEXT,
    review_at                TIMESTAMPTZ,
    review_verdict           TEXT,
    review_notes             TEXT
);

-- One index per list filter, each ending in id so pages come newest first from the index.
CREATE INDEX breakglass_sessions_environment ON breakglass_sessions (environment, id);
CREATE INDEX breakglass_sessions_state ON breakglass_sessions (state, id);
CREATE INDEX breakglass_sessions_requester ON breakglass_sessions (requester, id);

-- Append-only history of every transition and step.
CREATE TABLE breakglass_events (
    id         BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    session_id UUID NOT NULL REFERENCES breakglass_sessions (id),
    actor      TEXT NOT NULL,
    at         TIMESTAMPTZ NOT NULL,
    from_state TEXT,
    to_state   TEXT NOT NULL,
    kind       TEXT NOT NULL,
    detail     TEXT
);

CREATE INDEX breakglass_events_session ON breakglass_events (session_id, id);

CREATE FUNCTION breakglass_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '% is append-only: % refused', TG_TABLE_NAME, TG_OP;
END;
$$;

CREATE TRIGGER breakglass_events_append_only BEFORE UPDATE OR DELETE ON breakglass_events
    FOR EACH ROW EXECUTE FUNCTION breakglass_refuse_change();

CREATE TRIGGER breakglass_sessions_no_delete BEFORE DELETE ON breakglass_sessions
    FOR EACH ROW EXECUTE FUNCTION breakglass_refuse_change();
