-- The sweep asks for what is due, not for a window of the newest rows: requests past their
-- approval deadline and sessions past their time box, each by its own time column.
CREATE INDEX breakglass_sessions_state_created ON breakglass_sessions (state, created_at);
CREATE INDEX breakglass_sessions_state_expires ON breakglass_sessions (state, expires_at);
CREATE INDEX breakglass_sessions_state_finished ON breakglass_sessions (state, finished_at);
