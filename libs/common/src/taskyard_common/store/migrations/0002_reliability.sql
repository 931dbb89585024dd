-- Reliability: retries, leases, cancellation, deadlines and dead letters.
ALTER TABLE tasks DROP CONSTRAINT tasks_status_check;
ALTER TABLE tasks ADD CONSTRAINT tasks_status_check CHECK (status IN (
    'pending', 'queued', 'running', 'retrying', 'completed', 'failed', 'dead_lettered', 'cancelled'));

ALTER TABLE tasks
    -- When the next attempt of a retrying task is due (it waits in a delay queue until then).
    ADD COLUMN next_attempt_at     timestamptz,
    -- The worker running the task and until when; the heartbeat extends it, the reaper reclaims it.
    ADD COLUMN lease_owner         text,
    ADD COLUMN lease_expires_at    timestamptz,
    -- How often a lease expired (its worker died after settling the message): bounded like deliveries.
    ADD COLUMN lease_expirations   integer NOT NULL DEFAULT 0,
    ADD COLUMN cancel_requested_at timestamptz,
    ADD COLUMN deadline            timestamptz,
    ADD COLUMN timeout_seconds     double precision,
    -- One entry per failed or deferred attempt: {attempt, error, delay_seconds, charged, at}.
    ADD COLUMN attempt_log         jsonb NOT NULL DEFAULT '[]'::jsonb,
    -- Why and where the broker dead-lettered the task's message: {reason, queue, count, deaths, at}.
    ADD COLUMN dead_letter         jsonb;

CREATE INDEX tasks_lease_idx ON tasks (lease_expires_at) WHERE status = 'running';

-- The dead letters still to be dealt with (replayed or discarded); the task row keeps the history.
CREATE TABLE dead_letters (
    task_id      uuid PRIMARY KEY REFERENCES tasks (id) ON DELETE CASCADE,
    specialist   text,
    reason       text NOT NULL,
    queue        text NOT NULL,
    deaths       jsonb NOT NULL DEFAULT '[]'::jsonb,
    -- The dead message's body, so a replay can send exactly what died.
    message      jsonb NOT NULL,
    recorded_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
    discarded_at timestamptz
);
CREATE INDEX dead_letters_recorded_idx ON dead_letters (recorded_at DESC, task_id DESC)
    WHERE discarded_at IS NULL;
