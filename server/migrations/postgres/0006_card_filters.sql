-- The web app's cards ask for exactly the rows they show: sessions in progress (the state
-- index serves them), reviews due and one approver's decisions. Before these filters they
-- took the newest 200 sessions and filtered them in the browser, which missed an older
-- review still due, or an older decision, once 200 newer sessions were stored.
--
-- Reviews due: few rows of any table, held alone by a partial index, newest first.
CREATE INDEX breakglass_sessions_review_due ON breakglass_sessions (id)
    WHERE glass_broken_by IS NOT NULL AND review_at IS NULL;
-- One approver's decisions, newest first.
CREATE INDEX breakglass_sessions_approver ON breakglass_sessions (approver, id);
