-- Extensions of running sessions (JSON: the bounds the session was made under, the
-- extensions given, the one waiting for approval, the last refusal). Rows from before have
-- none and may get none.
ALTER TABLE breakglass_sessions ADD COLUMN extensions_json TEXT NOT NULL DEFAULT '{}';
