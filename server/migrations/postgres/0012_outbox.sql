-- Notifications: the outbox. Each row is one notification to one receiver, written in the same
-- transaction as the session change that causes it (or, for the clock's notices, once, by the
-- unique event key), then delivered by a worker that claims it for a while (claimed_until_ms):
-- a killed replica's claim runs out and another delivers it. The id is the Standard Webhooks
-- `webhook-id`, the same on every retry. Delivered rows are kept (the admins' page lists them);
-- after the retry window a row is `dead` with its last error.
CREATE TABLE breakglass_outbox (
    id               UUID PRIMARY KEY,
    event_key        TEXT NOT NULL,
    receiver         TEXT NOT NULL,
    kind             TEXT NOT NULL,
    session_id       UUID NOT NULL,
    payload          TEXT NOT NULL,
    state            TEXT NOT NULL DEFAULT 'pending',
    attempts         BIGINT NOT NULL DEFAULT 0,
    next_at_ms       BIGINT NOT NULL,
    claimed_by       TEXT,
    claimed_until_ms BIGINT NOT NULL DEFAULT 0,
    created_at_ms    BIGINT NOT NULL,
    sent_at_ms       BIGINT,
    last_status      BIGINT,
    last_error       TEXT,
    UNIQUE (event_key, receiver)
);
CREATE INDEX breakglass_outbox_due ON breakglass_outbox (next_at_ms) WHERE state = 'pending';
CREATE INDEX breakglass_outbox_recent ON breakglass_outbox (created_at_ms);
