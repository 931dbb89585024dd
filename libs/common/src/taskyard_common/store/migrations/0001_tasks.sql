-- The task table. One row per accepted task; every transition is one conditional UPDATE.
CREATE TABLE tasks (
    id                   uuid PRIMARY KEY,
    status               text NOT NULL
                         CHECK (status IN ('pending', 'queued', 'running', 'completed', 'failed')),
    input                jsonb NOT NULL,
    metadata             jsonb NOT NULL DEFAULT '{}'::jsonb,
    requested_specialist text,
    specialist           text,
    routing              jsonb,
    attempts             integer NOT NULL DEFAULT 0,
    result               jsonb,
    error                jsonb,
    usage                jsonb NOT NULL
                         DEFAULT '{"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}'::jsonb,
    created_at           timestamptz NOT NULL DEFAULT clock_timestamp(),
    published_at         timestamptz,
    routed_at            timestamptz,
    started_at           timestamptz,
    finished_at          timestamptz,
    updated_at           timestamptz NOT NULL DEFAULT clock_timestamp()
);

-- Keyset pagination, newest first, optionally filtered by status or specialist.
CREATE INDEX tasks_created_idx ON tasks (created_at DESC, id DESC);
CREATE INDEX tasks_status_created_idx ON tasks (status, created_at DESC, id DESC);
CREATE INDEX tasks_specialist_created_idx ON tasks (specialist, created_at DESC, id DESC);
-- The sweeper's look-up of tasks committed but never confirmed published.
CREATE INDEX tasks_unpublished_idx ON tasks (created_at) WHERE published_at IS NULL;
