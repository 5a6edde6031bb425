-- The deliveries page lists the newest first by id (a UUIDv7 starts with its creation time, and
-- the primary key's index serves that order): the index on created_at_ms was a fifth page
-- written by every notification, in the transaction of the change that caused it.
DROP INDEX breakglass_outbox_recent;
