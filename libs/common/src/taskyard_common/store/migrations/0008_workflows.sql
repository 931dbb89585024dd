-- Workflows: chains, groups with a reduce step, delegation between specialists.

-- A parent that delegated waits, holding nothing, until its children are terminal.
ALTER TABLE tasks DROP CONSTRAINT tasks_status_check;
ALTER TABLE tasks ADD CONSTRAINT tasks_status_check CHECK (status IN (
    'pending', 'queued', 'running', 'retrying', 'waiting', 'completed', 'failed', 'dead_lettered',
    'cancelled'));

ALTER TABLE tasks
    -- Extra instructions for this task's agent, after the specialist's own (a chain step, a reduce step,
    -- a delegation).
    ADD COLUMN instructions    text,
    -- The task that created this one: the previous step of a chain, or the parent that delegated.
    ADD COLUMN parent_id       uuid,
    -- A chain: the first task's id (its own for the first), this step's index (0 for the first) and the
    -- steps still to come, [{specialist?, instructions?}, ...].
    ADD COLUMN chain_root_id   uuid,
    ADD COLUMN chain_index     integer,
    ADD COLUMN chain_rest      jsonb,
    -- A group child, or a group's reduce task: the group.
    ADD COLUMN group_id        uuid,
    ADD COLUMN group_role      text CHECK (group_role IN ('child', 'reduce')),
    -- A delegated child: {parent_id, call_id, step}: where its result goes back to.
    ADD COLUMN delegation      jsonb,
    -- How deep in a delegation tree (0: not delegated), and the children a waiting parent waits for.
    ADD COLUMN depth           integer NOT NULL DEFAULT 0,
    ADD COLUMN waiting_children integer NOT NULL DEFAULT 0;

CREATE INDEX tasks_parent_idx ON tasks (parent_id) WHERE parent_id IS NOT NULL;
CREATE INDEX tasks_chain_idx ON tasks (chain_root_id, chain_index) WHERE chain_root_id IS NOT NULL;
CREATE INDEX tasks_group_idx ON tasks (group_id, created_at, id) WHERE group_id IS NOT NULL;

-- A fan-out of tasks submitted together, and the reduce step that runs once after the last of them.
CREATE TABLE task_groups (
    id              uuid PRIMARY KEY,
    tenant          text NOT NULL,
    -- running (children or reduce not finished), then completed, failed or cancelled.
    status          text NOT NULL DEFAULT 'running'
                    CHECK (status IN ('running', 'completed', 'failed', 'cancelled')),
    total           integer NOT NULL CHECK (total >= 1),
    -- {specialist?, instructions?}, or NULL: no reduce step.
    reduce          jsonb,
    reduce_task_id  uuid,
    metadata        jsonb NOT NULL DEFAULT '{}'::jsonb,
    cancel_requested_at timestamptz,
    created_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    finished_at     timestamptz
);
CREATE INDEX task_groups_tenant_idx ON task_groups (tenant, created_at DESC, id DESC);
CREATE INDEX task_groups_running_idx ON task_groups (created_at) WHERE status = 'running';

-- Idempotency keys of POST /v1/task-groups (like those of tasks, per tenant).
CREATE TABLE group_idempotency_keys (
    tenant       text NOT NULL,
    key          text NOT NULL,
    request_hash text NOT NULL,
    group_id     uuid REFERENCES task_groups (id) ON DELETE CASCADE DEFERRABLE INITIALLY DEFERRED,
    created_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (tenant, key)
);
