-- Durable agent runs: the step checkpoints of a task, so a new attempt continues at the next step instead
-- of paying again for every LLM and tool call already made.
CREATE TABLE task_steps (
    task_id    uuid NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    -- The LLM call's number in the run (1-based); the results of the tool calls it asked for share it.
    step       integer NOT NULL CHECK (step >= 1),
    -- '' for the LLM's reply; the tool call's id for that call's result (a recorded result is reused, never
    -- run again).
    call_id    text NOT NULL DEFAULT '',
    -- The chat message the step appended to the conversation (assistant reply, or tool result).
    message    jsonb NOT NULL,
    -- The LLM call's token usage (replies only) and whether a tool call succeeded (tool results only).
    usage      jsonb,
    ok         boolean,
    bytes      integer NOT NULL CHECK (bytes >= 0),
    created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (task_id, step, call_id)
);

-- The size of a task's checkpoints, bounded per task (checkpointing stops past the worker's limit).
ALTER TABLE tasks ADD COLUMN checkpoint_bytes integer NOT NULL DEFAULT 0;

-- A specialist's unfinished work, as the autoscaler counts it (queued, running, or waiting for a retry).
CREATE INDEX tasks_active_specialist_idx ON tasks (specialist, status)
    WHERE status IN ('queued', 'running', 'retrying');
