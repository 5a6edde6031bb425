-- Notifications as a session change writes them: one row per notice, naming its receivers,
-- with one copy of the payload. The delivery worker moves each into `breakglass_outbox` (one row
-- per receiver, with its own id, state and retries) in the transaction that deletes it here.
-- A change used to write its rows straight into `breakglass_outbox`: three receivers meant
-- three payloads and four B-trees (the table, its key, the unique event key, the due rows) in
-- the change's own commit; here it is one row in one B-tree (the rowid is the order of arrival).
CREATE TABLE breakglass_outbox_staged (
    seq            INTEGER PRIMARY KEY,
    event_key      TEXT NOT NULL,
    kind           TEXT NOT NULL,
    session_id     BLOB NOT NULL,
    receivers      TEXT NOT NULL,
    receiver_count BIGINT NOT NULL,
    payload        TEXT NOT NULL,
    created_at_ms  BIGINT NOT NULL
);
