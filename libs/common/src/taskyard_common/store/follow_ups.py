"""What a task's end sets in motion, written in the statement that ends it (``logged(..., follow_ups=True)``).

- **The next step of a chain**: a completed task with steps still to come creates the next step's task
  (pending, its input the output just produced, its extra instructions the step's), in the same statement:
  a crash between the completion and the next step cannot lose the chain.
- **The waiting parent**: a delegated child that ends (however it ends) records its outcome as the result
  of the parent's delegate call and, when it was the last child the parent waited for, moves the parent
  from ``waiting`` to ``queued`` (``published_at`` cleared: the reaper publishes it if the caller cannot).

A group child's end is not handled here: a group's reduce step needs every child's outcome, which one
statement cannot see consistently while its siblings commit concurrently; ``groups.py`` settles a group in
a transaction of its own, idempotently, after each child and in the reaper's rounds.

``c`` is the changed (ended) row; the statement selects ``_next`` and ``_resumed``: the ids of a task it
created or moved to ``queued``, which the caller announces.
"""

from __future__ import annotations

from taskyard_common.ids import UUID7_SQL
from taskyard_common.lifecycle import TERMINAL, sql_in

_CONTINUES = "c.status = 'completed' AND jsonb_array_length(COALESCE(c.chain_rest, '[]'::jsonb)) > 0"
# The webhook of a chain is the chain's: a step that completes with steps still to come announces nothing
# (the next step inherits the webhook); a step that fails, or the last one, does.
CHAIN_WEBHOOK_QUIET = f"NOT ({_CONTINUES})"

NEXT_LINK = (
    "next_link AS (INSERT INTO tasks (id, status, tenant, input, metadata, requested_specialist,"
    " instructions, parent_id, chain_root_id, chain_index, chain_rest, webhook, depth, priority, event_seq)"
    f" SELECT {UUID7_SQL}, 'pending', c.tenant, COALESCE(c.result->'output', to_jsonb(''::text)),"
    " c.metadata, c.chain_rest->0->>'specialist', c.chain_rest->0->>'instructions', c.id,"
    " COALESCE(c.chain_root_id, c.id), COALESCE(c.chain_index, 0) + 1, c.chain_rest - 0, c.webhook,"
    f" c.depth, c.priority, 1 FROM changed c WHERE {_CONTINUES} RETURNING id, requested_specialist, chain_index),"
    " next_logged AS (INSERT INTO task_events (task_id, seq, type, data)"
    " SELECT n.id, 1, 'accepted', jsonb_build_object('specialist', n.requested_specialist,"
    " 'chain_index', n.chain_index) FROM next_link n)"
)

# What the parent's delegate call returns: the child's answer, or what went wrong.
_CHILD_RESULT = (
    "CASE WHEN c.status = 'completed' THEN COALESCE(c.result->>'output', '')"
    " ELSE 'error: the delegated task ' || c.id || ' ended ' || c.status"
    " || COALESCE(': ' || (c.error->>'message'), '') END"
)
RESUME_PARENT = (
    "resumed AS (UPDATE tasks p SET waiting_children = p.waiting_children - 1,"
    " status = CASE WHEN p.waiting_children <= 1 THEN 'queued' ELSE p.status END,"
    " published_at = CASE WHEN p.waiting_children <= 1 THEN NULL ELSE p.published_at END,"
    f" checkpoint_bytes = p.checkpoint_bytes + octet_length({_CHILD_RESULT}),"
    " event_seq = p.event_seq + 1, updated_at = clock_timestamp()"
    f" FROM changed c WHERE c.delegation IS NOT NULL AND c.status IN {sql_in(TERMINAL)}"
    " AND p.id = (c.delegation->>'parent_id')::uuid AND p.status = 'waiting'"
    " RETURNING p.id, p.status, p.event_seq, c.id AS child_id),"
    " resumed_step AS (INSERT INTO task_steps (task_id, step, call_id, message, ok, bytes)"
    " SELECT r.id, (c.delegation->>'step')::int, c.delegation->>'call_id',"
    " jsonb_build_object('role', 'tool', 'tool_call_id', c.delegation->>'call_id', 'content',"
    f" {_CHILD_RESULT}), c.status = 'completed', octet_length({_CHILD_RESULT})"
    " FROM resumed r JOIN changed c ON c.id = r.child_id ON CONFLICT (task_id, step, call_id) DO NOTHING),"
    " resumed_logged AS (INSERT INTO task_events (task_id, seq, type, data)"
    " SELECT r.id, r.event_seq, 'child_finished', jsonb_build_object('child', c.id, 'status', c.status,"
    " 'resumed', r.status = 'queued') FROM resumed r JOIN changed c ON c.id = r.child_id)"
)

# What the statement selects besides the transition's own ``returning``.
SELECTED = (
    "(SELECT n.id FROM next_link n LIMIT 1) AS _next,"
    " (SELECT r.id FROM resumed r WHERE r.status = 'queued' LIMIT 1) AS _resumed,"
    " c.group_id AS _group"
)
