-- The approved spec (JSON: the objects activation will create as canonical JSON, their
-- SHA-256, a summary and the dry run's verdict), written with the request. Rows from before
-- have none, and activation refuses them.
ALTER TABLE breakglass_sessions ADD COLUMN spec_json TEXT;
