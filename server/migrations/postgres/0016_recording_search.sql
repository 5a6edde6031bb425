-- Search over what recordings showed: each ended recording's screen text and command lines,
-- a row per chunk of lines (a hundred-odd), its text compressed and each line's moment kept, so
-- a hit can name the line and the second it showed. The terms (each word's beginning, once)
-- are found through a GIN index (which chunks hold a term, not where: the server checks each
-- line itself).
CREATE TABLE breakglass_recording_chunks (
    id         BIGSERIAL PRIMARY KEY,
    session_id UUID NOT NULL,
    seq        BIGINT NOT NULL,
    kind       TEXT NOT NULL CHECK (kind IN ('screen', 'command')),
    lines_ms   BYTEA NOT NULL,
    body       BYTEA NOT NULL,
    words      TEXT NOT NULL,
    UNIQUE (session_id, seq)
);
-- Without the pending list: each chunk's terms go into the index's compressed tree at once
-- (the indexer writes in the background, so a slower insert costs nobody), where the list
-- kept them uncompressed until a vacuum merged them.
-- The tsvector lives in the index only (an expression over the terms' text, which TOAST
-- compresses): a stored column would be a second copy.
CREATE INDEX breakglass_recording_chunks_words ON breakglass_recording_chunks
    USING GIN (to_tsvector('simple'::regconfig, words)) WITH (fastupdate = off);
-- Each recording indexed, once: what it held, or why nothing was taken from it.
CREATE TABLE breakglass_recording_index (
    session_id UUID PRIMARY KEY,
    indexed_at TIMESTAMPTZ NOT NULL,
    cast_bytes BIGINT NOT NULL,
    lines      BIGINT NOT NULL,
    outcome    TEXT NOT NULL
);
-- The recordings waiting for the indexer: a session reaching Ended with a recording is put
-- here by the database itself, whichever statement wrote it (the lifecycle's compare-and-set,
-- an import), so the indexer reads a short queue instead of the whole history.
CREATE TABLE breakglass_recording_pending (
    session_id UUID PRIMARY KEY
);
INSERT INTO breakglass_recording_pending (session_id)
    SELECT id FROM breakglass_sessions WHERE state = 'Ended' AND recording_key IS NOT NULL;
CREATE FUNCTION breakglass_recording_ended() RETURNS trigger AS $$
BEGIN
    IF NEW.state = 'Ended' AND NEW.recording_key IS NOT NULL AND (TG_OP = 'INSERT'
        OR OLD.state <> 'Ended' OR OLD.recording_key IS DISTINCT FROM NEW.recording_key) THEN
        INSERT INTO breakglass_recording_pending (session_id) VALUES (NEW.id)
            ON CONFLICT DO NOTHING;
        IF TG_OP = 'UPDATE' THEN
            DELETE FROM breakglass_recording_index WHERE session_id = NEW.id;
        END IF;
    END IF;
    RETURN NULL;
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER breakglass_recording_ended AFTER INSERT OR UPDATE ON breakglass_sessions
    FOR EACH ROW EXECUTE FUNCTION breakglass_recording_ended();
