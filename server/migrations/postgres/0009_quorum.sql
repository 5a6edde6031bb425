-- Quorum approvals: what a Flight request needs (fixed at creation, from its environment) and
-- the approvals given so far, oldest first (JSON: by, group, at). Rows from before keep one
-- approver and the default quorum of one.
ALTER TABLE breakglass_sessions ADD COLUMN quorum_required BIGINT NOT NULL DEFAULT 1;
ALTER TABLE breakglass_sessions ADD COLUMN quorum_distinct BOOLEAN NOT NULL DEFAULT false;
ALTER TABLE breakglass_sessions ADD COLUMN approvals_json TEXT NOT NULL DEFAULT '[]';
