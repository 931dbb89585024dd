-- Parked tasks (issue 15, "park, don't churn"): a queued task kept in the store instead of the broker queue
-- while its tenant's lane for the specialist is full (or the tenant is at its max_running cap), or after a
-- worker refused its start. It stays 'queued' and has no message anywhere; the broker agent's feeder releases
-- it (parked_at NULL, published_at NULL, then publishes) as the lane drains. See store/parking.py.
ALTER TABLE tasks ADD COLUMN parked_at timestamptz;

-- The feeder's lanes and their next tasks (priority, then submission order); routing's "anything parked?".
CREATE INDEX tasks_parked_idx ON tasks (specialist, tenant, created_at, id)
    WHERE status = 'queued' AND parked_at IS NOT NULL;
-- A lane's queued tasks that are not parked (their messages are in the broker): what routing and the feeder
-- count against the lane's depth.
CREATE INDEX tasks_lane_idx ON tasks (specialist, tenant)
    WHERE status = 'queued' AND parked_at IS NULL;
