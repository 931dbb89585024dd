-- Whether the running task's message was acked early (long tasks). Only then is an expired lease the
-- reaper's to reclaim; an unsettled message comes back from the broker by itself when its worker dies,
-- and reclaiming it as well would put a second copy in the main queue, past the quarantine.
ALTER TABLE tasks ADD COLUMN message_settled boolean NOT NULL DEFAULT false;
DROP INDEX tasks_lease_idx;
CREATE INDEX tasks_lease_idx ON tasks (lease_expires_at) WHERE status = 'running' AND message_settled;
