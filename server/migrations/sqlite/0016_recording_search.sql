-- Search over what recordings showed: each ended recording's screen text and command lines,
-- a row per chunk of lines (a hundred-odd), its text compressed and each line's moment kept, so
-- a hit can name the line and the second it showed. The terms (each word's beginning) are in a
-- contentless FTS5 table (the index only, no second copy of the text), one row per chunk under
-- the chunk's id.
CREATE TABLE breakglass_recording_chunks (
    id         INTEGER PRIMARY KEY,
    session_id BLOB NOT NULL,
    seq        INTEGER NOT NULL,
    kind       TEXT NOT NULL CHECK (kind IN ('screen', 'command')),
    lines_ms   BLOB NOT NULL,
    body       BLOB NOT NULL,
    UNIQUE (session_id, seq)
);
-- `detail=none`: which chunks hold a term, not where (the server checks each line itself),
-- the smallest index FTS5 keeps; `contentless_delete`: a recording indexed again (its row
-- names another version) drops its old chunks' words.
CREATE VIRTUAL TABLE breakglass_recording_words USING fts5(
    words, content='', detail='none', contentless_delete=1
);
-- Each recording indexed, once: what it held, or why nothing was taken from it.
CREATE TABLE breakglass_recording_index (
    session_id BLOB PRIMARY KEY NOT NULL,
    indexed_at TEXT NOT NULL,
    cast_bytes BIGINT NOT NULL,
    lines      BIGINT NOT NULL,
    outcome    TEXT NOT NULL
);
-- The recordings waiting for the indexer: a session reaching Ended with a recording is put
-- here by the database itself, whichever statement wrote it (the lifecycle's compare-and-set,
-- an import), so the indexer reads a short queue instead of the whole history.
CREATE TABLE breakglass_recording_pending (
    session_id BLOB PRIMARY KEY NOT NULL
);
INSERT INTO breakglass_recording_pending (session_id)
    SELECT id FROM breakglass_sessions WHERE state = 'Ended' AND recording_key IS NOT NULL;
CREATE TRIGGER breakglass_recording_ended_insert AFTER INSERT ON breakglass_sessions
    WHEN NEW.state = 'Ended' AND NEW.recording_key IS NOT NULL
BEGIN
    INSERT OR IGNORE INTO breakglass_recording_pending (session_id) VALUES (NEW.id);
END;
CREATE TRIGGER breakglass_recording_ended_update AFTER UPDATE ON breakglass_sessions
    WHEN NEW.state = 'Ended' AND NEW.recording_key IS NOT NULL
        AND (OLD.state <> 'Ended' OR OLD.recording_key IS NOT NEW.recording_key)
BEGIN
    INSERT OR IGNORE INTO breakglass_recording_pending (session_id) VALUES (NEW.id);
    DELETE FROM breakglass_recording_index WHERE session_id = NEW.id;
END;
