-- Priorities, tenant caps and fair shares, delayed and scheduled tasks.

-- A task submitted with a not_before still ahead waits as 'scheduled' (its intake message in a delay queue).
ALTER TABLE tasks DROP CONSTRAINT tasks_status_check;
ALTER TABLE tasks ADD CONSTRAINT tasks_status_check CHECK (status IN (
    'scheduled', 'pending', 'queued', 'running', 'retrying', 'waiting', 'completed', 'failed',
    'dead_lettered', 'cancelled'));

ALTER TABLE tasks
    -- Carried in every message of the task; chain steps, delegated children and a group's reduce step
    -- inherit it.
    ADD COLUMN priority   text NOT NULL DEFAULT 'normal' CHECK (priority IN ('high', 'normal', 'low')),
    -- Not routed (so not started) before this.
    ADD COLUMN not_before timestamptz;

-- A group's reduce step runs at the group's priority.
ALTER TABLE task_groups
    ADD COLUMN priority text NOT NULL DEFAULT 'normal' CHECK (priority IN ('high', 'normal', 'low'));

-- A specialist's unfinished work per tenant: what the autoscaler counts (0005's index, now with the tenant)
-- and the fair share's snapshot of who runs and who waits.
DROP INDEX tasks_active_specialist_idx;
CREATE INDEX tasks_active_specialist_idx ON tasks (specialist, status, tenant)
    WHERE status IN ('queued', 'running', 'retrying');
-- What a tenant runs across the fleet, for its max_running.
CREATE INDEX tasks_running_tenant_idx ON tasks (tenant) WHERE status = 'running';

-- Per-tenant limits; a tenant without a row (or a NULL column) is unlimited.
CREATE TABLE tenant_limits (
    tenant      text PRIMARY KEY,
    -- Tasks of the tenant running at once across the fleet.
    max_running integer CHECK (max_running >= 1),
    updated_at  timestamptz NOT NULL DEFAULT clock_timestamp()
);

-- Cron schedules: each occurrence creates one task from ``task`` (a submission), with the idempotency key
-- ``schedule:<id>:<occurrence>`` so that several schedulers never create two.
CREATE TABLE schedules (
    id           uuid PRIMARY KEY,
    tenant       text NOT NULL,
    cron         text NOT NULL,
    timezone     text NOT NULL,
    task         jsonb NOT NULL,
    -- skip: an occurrence whose previous task is not finished creates nothing; allow: it creates one anyway.
    overlap      text NOT NULL DEFAULT 'skip' CHECK (overlap IN ('skip', 'allow')),
    paused       boolean NOT NULL DEFAULT false,
    -- The next occurrence to create (NULL while paused or when the expression has no future occurrence).
    next_run_at  timestamptz,
    -- The last occurrence handled, its task (NULL when skipped) and what happened to it.
    last_run_at  timestamptz,
    last_task_id uuid,
    last_outcome text,
    metadata     jsonb NOT NULL DEFAULT '{}'::jsonb,
    created_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at   timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX schedules_due_idx ON schedules (next_run_at) WHERE NOT paused AND next_run_at IS NOT NULL;
CREATE INDEX schedules_tenant_idx ON schedules (tenant, created_at DESC, id DESC);
