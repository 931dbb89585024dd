"""Step checkpoints of durable agent runs: recorded under the lease, read back by the next attempt.

Recording is conditional like every transition: only the worker holding the task's lease may add steps
(the row is locked for the insert, so a lease taken over meanwhile waits for it or refuses it), and a
step already recorded (same task, step and call id) is kept as it was: a tool call's recorded result is
reused, never run again. A step's token usage is added to the task's when the step is recorded, and only
then: each LLM call counts once. Many steps of many tasks go in one statement (the worker batches the steps its
concurrent runs complete together), so checkpoints add little to a task's database round trips.
"""

from __future__ import annotations

import builtins
import json
from collections.abc import Sequence
from uuid import UUID

from taskyard_common.messages import Usage
from taskyard_common.store._pg import PoolStore, add_usage
from taskyard_common.store.records import Step

# The tasks of the batch that ``owner`` still runs, locked in id order (as the heartbeat locks them, so
# concurrent statements of one worker never deadlock), then their new steps, their size and usage added to
# the task, and one event per new step (``llm_call`` for a reply, ``tool_call`` for a result), numbered
# after the task's last. The lock is the one the update below needs (``FOR NO KEY UPDATE``), not a share
# lock: two statements that share-locked the same task would each wait for the other to update it, and
# PostgreSQL broke that deadlock by failing one of them (9 of 5,000 no-op bench tasks failed so).
RECORD_STEPS = (
    "WITH s AS (SELECT * FROM unnest($1::uuid[], $2::int[], $3::text[], $4::text[], $5::text[], $6::bool[],"
    " $7::int[], $9::text[], $10::float8[]) AS s(task_id, step, call_id, message, usage, ok, bytes, name,"
    " latency_ms)),"
    " held AS (SELECT id FROM tasks WHERE id IN (SELECT task_id FROM s) AND status = 'running'"
    " AND lease_owner = $8 ORDER BY id FOR NO KEY UPDATE),"
    " added AS (INSERT INTO task_steps (task_id, step, call_id, message, usage, ok, bytes)"
    " SELECT s.task_id, s.step, s.call_id, s.message::jsonb, s.usage::jsonb, s.ok, s.bytes"
    " FROM s JOIN held ON held.id = s.task_id ON CONFLICT (task_id, step, call_id) DO NOTHING"
    " RETURNING task_id, step, call_id, bytes, usage, ok),"
    " sizes AS (SELECT task_id, count(*)::int AS n, sum(bytes)::int AS total, jsonb_build_object("
    "'prompt_tokens', sum(COALESCE((usage->>'prompt_tokens')::bigint, 0)),"
    " 'completion_tokens', sum(COALESCE((usage->>'completion_tokens')::bigint, 0)),"
    " 'total_tokens', sum(COALESCE((usage->>'total_tokens')::bigint, 0)),"
    " 'cost', sum(COALESCE((usage->>'cost')::float8, 0)),"
    " 'model', (array_agg(usage->>'model' ORDER BY step DESC) FILTER (WHERE usage ? 'model'"
    " AND usage->>'model' IS NOT NULL))[1]) AS used"
    " FROM added GROUP BY task_id),"
    " bumped AS (UPDATE tasks SET checkpoint_bytes = checkpoint_bytes + sizes.total,"
    f" usage = {add_usage('sizes.used')}, event_seq = event_seq + sizes.n FROM sizes"
    " WHERE tasks.id = sizes.task_id"
    " RETURNING tasks.id, tasks.event_seq - sizes.n AS base, COALESCE(tasks.watched_until > clock_timestamp(), false) AS watched),"
    " logged AS (INSERT INTO task_events (task_id, seq, type, data)"
    " SELECT a.task_id, b.base + row_number() OVER (PARTITION BY a.task_id ORDER BY a.step, a.call_id <> '',"
    " a.call_id),"
    " CASE WHEN a.call_id = '' THEN 'llm_call' ELSE 'tool_call' END,"
    " CASE WHEN a.call_id = '' THEN jsonb_build_object('step', a.step,"
    " 'tokens', COALESCE((a.usage->>'total_tokens')::int, 0), 'latency_ms', s.latency_ms,"
    " 'model', a.usage->>'model', 'cost', COALESCE((a.usage->>'cost')::float8, 0))"
    " ELSE jsonb_build_object('step', a.step, 'name', s.name, 'ok', a.ok, 'call_id', a.call_id) END"
    " FROM added a JOIN bumped b ON b.id = a.task_id"
    " JOIN s ON s.task_id = a.task_id AND s.step = a.step AND s.call_id = a.call_id)"
    " SELECT id, watched FROM bumped"
)
# The lease check again for the tasks whose steps were all known already (nothing added, nothing updated).
_HELD = "SELECT id FROM tasks WHERE id = ANY($1::uuid[]) AND status = 'running' AND lease_owner = $2"


def step_bytes(step: Step) -> int:
    """What a step costs against a task's checkpoint limit: its message's JSON size."""
    return len(json.dumps(step.message, separators=(",", ":"), ensure_ascii=False).encode())


class StepQueries(PoolStore):
    async def record_steps(self, steps: Sequence[Step], *, owner: str) -> set[UUID]:
        """Add ``steps`` of tasks ``owner`` holds; returns the ids of the tasks still held (their steps are
        recorded, or were already). The steps of a task whose lease is gone are dropped."""
        if not steps:
            return set()
        rows = await self._fetch(
            RECORD_STEPS,
            [s.task_id for s in steps],
            [s.step for s in steps],
            [s.call_id for s in steps],
            [json.dumps(s.message) for s in steps],
            [s.usage.model_dump_json() if s.usage is not None else None for s in steps],
            [s.ok for s in steps],
            [step_bytes(s) for s in steps],
            owner,
            [s.name for s in steps],
            [s.latency_ms for s in steps],
        )
        held = {row["id"] for row in rows}
        for row in rows:
            self._changed(row["id"], sum(1 for s in steps if s.task_id == row["id"]), watched=row["watched"])
        rest = {s.task_id for s in steps} - held
        if rest:
            held |= {row["id"] for row in await self._fetch(_HELD, list(rest), owner)}
        return held

    async def steps(self, task_id: UUID) -> builtins.list[Step]:
        """Every recorded step of a task: each step's reply, then its tool results in recording order (the
        reply's ``tool_calls`` say the order the model asked for them)."""
        rows = await self._fetch(
            "SELECT task_id, step, call_id, message, usage, ok FROM task_steps WHERE task_id = $1"
            " ORDER BY step, call_id <> '', created_at",
            task_id,
        )
        return [
            Step(
                task_id=row["task_id"],
                step=row["step"],
                call_id=row["call_id"],
                message=row["message"],
                usage=Usage.model_validate(row["usage"]) if row["usage"] is not None else None,
                ok=row["ok"],
            )
            for row in rows
        ]

    async def discard_steps(self, task_id: UUID) -> int:
        """Forget a task's checkpoints (a run from scratch); returns how many steps were dropped."""
        async with self._transaction() as conn:
            rows = await conn.fetch("DELETE FROM task_steps WHERE task_id = $1 RETURNING step", task_id)
            await conn.execute("UPDATE tasks SET checkpoint_bytes = 0 WHERE id = $1", task_id)
        return len(rows)
