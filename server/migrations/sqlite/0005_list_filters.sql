-- The history's filters combine: an environment with a state, an environment with a requester.
-- With one column indexed the other is a filter, and a combination with few or no rows walks
-- every row of the environment (100,000 sessions: 65-100 ms on either engine, see
-- BENCHMARKS.md); with both in the index, ending in id, the page comes from the index, newest
-- first.
CREATE INDEX breakglass_sessions_environment_state ON breakglass_sessions (environment, state, id);
CREATE INDEX breakglass_sessions_environment_requester ON breakglass_sessions (environment, requester, id);
