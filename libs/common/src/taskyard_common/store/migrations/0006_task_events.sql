-- Watching a task: its durable event log, and the outbox of its webhook deliveries.

-- One row per thing that happened to a task (accepted, routed, attempt_started, llm_call, tool_call, token,
-- retry_scheduled, resumed, handed_back, the terminal status, ...), numbered per task from 1. The number is
-- taken from tasks.event_seq in the statement that changes the task, under its row lock: a task's events
-- commit in the order of their numbers, so a reader that saw number N never misses one below it.
CREATE TABLE task_events (
    task_id    uuid NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    seq        integer NOT NULL CHECK (seq >= 1),
    type       text NOT NULL,
    data       jsonb NOT NULL DEFAULT '{}'::jsonb,
    created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (task_id, seq)
);

ALTER TABLE tasks
    -- The number of the task's last event.
    ADD COLUMN event_seq integer NOT NULL DEFAULT 0,
    -- Where to announce the task's terminal status: {url, events}; NULL: no webhook.
    ADD COLUMN webhook jsonb;

-- The webhook outbox: a delivery is written in the same statement as the transition it announces, so a
-- crash between the two loses nothing; a dispatcher sends it (at least once, same id every time) and
-- records each attempt.
CREATE TABLE webhook_deliveries (
    -- The Standard Webhooks message id (webhook-id): the same for every attempt of this delivery.
    id              text PRIMARY KEY,
    task_id         uuid NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    tenant          text NOT NULL,
    event           text NOT NULL,
    url             text NOT NULL,
    payload         jsonb NOT NULL,
    -- pending (to send or retry), delivered, failed (gave up after the retry window)
    status          text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'delivered', 'failed')),
    attempts        integer NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    -- Each attempt: {at, status_code, error, duration_ms}.
    attempt_log     jsonb NOT NULL DEFAULT '[]'::jsonb,
    created_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    delivered_at    timestamptz
);
CREATE INDEX webhook_deliveries_due_idx ON webhook_deliveries (next_attempt_at) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_task_idx ON webhook_deliveries (task_id, created_at);

-- The signing secret of each tenant's webhooks (Standard Webhooks: whsec_ + base64 of 32 random bytes),
-- created on first use or by taskyard-admin, rotated by taskyard-admin.
CREATE TABLE webhook_secrets (
    tenant     text PRIMARY KEY,
    secret     text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
