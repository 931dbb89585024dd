"""The task event log: every transition appends its event in the statement that makes it.

``logged()`` turns a transition's ``UPDATE tasks`` into one statement that also appends the event (numbered
from ``tasks.event_seq`` under the row lock, so a task's events commit in order) and, for a terminal status
the task's webhook asks for, the webhook delivery (the outbox): nothing extra to round-trip, and nothing to
lose between the change and its announcement. Events a worker adds between transitions (LLM calls, tool
calls, streamed tokens) go through ``record_steps`` and ``append_events``.
"""

from __future__ import annotations

import builtins
import json
from collections.abc import Sequence
from typing import Any
from uuid import UUID

from pydantic import BaseModel, ConfigDict

from taskyard_common.lifecycle import TERMINAL, sql_in
from taskyard_common.store._pg import PoolStore
from taskyard_common.store.follow_ups import CHAIN_WEBHOOK_QUIET, NEXT_LINK, RESUME_PARENT, SELECTED

# Events a worker appends between transitions (streamed tokens) stop at this many per task; the transitions'
# own events are always written.
MAX_EVENTS_PER_TASK = 5000

EMPTY = "'{}'::jsonb"

# The Standard Webhooks message sent for a terminal status: its id is stable (one per task and event),
# its ``data`` the task's outcome. ``c`` is the changed row.
_WEBHOOK_PAYLOAD = (
    "jsonb_build_object('type', 'task.' || c.status, 'timestamp', to_jsonb(clock_timestamp()),"
    " 'data', jsonb_build_object('task_id', c.id, 'status', c.status, 'specialist', c.specialist,"
    " 'result', c.result, 'error', c.error, 'usage', c.usage, 'metadata', c.metadata,"
    " 'finished_at', c.finished_at))"
)
_OUTBOX = (
    "hooked AS (INSERT INTO webhook_deliveries (id, task_id, tenant, event, url, payload)"
    " SELECT 'msg_' || replace(c.id::text, '-', '') || '_' || c.event_seq, c.id, c.tenant, c.status,"
    f" c.webhook->>'url', {_WEBHOOK_PAYLOAD} FROM changed c"
    f" WHERE c.webhook IS NOT NULL AND c.status IN {sql_in(TERMINAL)} AND c.webhook->'events' ? c.status"
    f" AND {CHAIN_WEBHOOK_QUIET} ON CONFLICT (id) DO NOTHING)"
)


def logged(
    set_clause: str,
    rest: str,
    *,
    event: str,
    returning: str,
    data: str = EMPTY,
    target: str = "tasks",
    follow_ups: bool = False,
) -> str:
    """``UPDATE <target> SET <set_clause> <rest>`` (``rest``: ``[FROM ...] WHERE ...``), plus its event:
    ``event`` and ``data`` are SQL over the changed row ``c`` (the values after the update); a terminal
    status also writes the task's webhook delivery. Selects ``returning`` (over ``c``) from the changed
    rows, as the plain UPDATE's RETURNING would, and ``_watched`` (whether anyone watches the task).
    ``follow_ups`` (a transition that may end a task): also what the end sets in motion (``follow_ups.py``),
    selected as ``_next``, ``_resumed`` and ``_group``."""
    alias = target.split()[-1]
    returning = f"{returning}, COALESCE(c.watched_until > clock_timestamp(), false) AS _watched"
    ctes = [
        f"changed AS (UPDATE {target} SET {set_clause}, event_seq = {alias}.event_seq + 1 {rest}"
        f" RETURNING {alias}.*)",
        "logged AS (INSERT INTO task_events (task_id, seq, type, data)"
        f" SELECT c.id, c.event_seq, {event}, {data} FROM changed c)",
        _OUTBOX,
    ]
    if follow_ups:
        ctes += [NEXT_LINK, RESUME_PARENT]
        returning = f"{returning}, {SELECTED}"
    return f"WITH {', '.join(ctes)} SELECT {returning} FROM changed c"


def columns_of(alias: str, columns: str) -> str:
    """``a.x, a.y, ...`` for a comma-separated column list."""
    return ", ".join(f"{alias}.{c.strip()}" for c in columns.split(","))


class TaskEvent(BaseModel):
    model_config = ConfigDict(frozen=True)

    seq: int
    type: str
    data: dict[str, Any]
    at: str  # ISO 8601, the database's clock


# $1 task, $2 owner, $3 types, $4 data (JSON texts), $5 the most events a task may have.
_APPEND = (
    "WITH held AS (SELECT id, event_seq, COALESCE(watched_until > clock_timestamp(), false) AS watched FROM tasks"
    " WHERE id = $1 AND status = 'running' AND lease_owner = $2"
    " AND event_seq + cardinality($3::text[]) <= $5 FOR UPDATE),"
    " bumped AS (UPDATE tasks SET event_seq = tasks.event_seq + cardinality($3::text[]) FROM held"
    " WHERE tasks.id = held.id RETURNING held.event_seq AS base)"
    " INSERT INTO task_events (task_id, seq, type, data)"
    " SELECT $1, bumped.base + e.n, e.type, e.data::jsonb FROM bumped,"
    " unnest($3::text[], $4::text[]) WITH ORDINALITY AS e(type, data, n)"
    " RETURNING seq, (SELECT watched FROM held) AS watched"
)


class EventQueries(PoolStore):
    async def append_events(
        self, task_id: UUID, owner: str, events: Sequence[tuple[str, dict[str, Any]]]
    ) -> bool:
        """Append ``(type, data)`` events to a task ``owner`` runs (streamed tokens); False when the lease is
        gone or the task's event log is full (``MAX_EVENTS_PER_TASK``)."""
        if not events:
            return True
        rows = await self._fetch(
            _APPEND,
            task_id,
            owner,
            [t for t, _ in events],
            [json.dumps(d) for _, d in events],
            MAX_EVENTS_PER_TASK,
        )
        if rows:
            self._changed(task_id, len(rows), watched=rows[0]["watched"])
        return bool(rows)

    async def events(self, task_id: UUID, *, after: int = 0, limit: int = 100) -> builtins.list[TaskEvent]:
        """The task's events numbered above ``after``, oldest first."""
        rows = await self._fetch(
            "SELECT seq, type, data, to_char(created_at AT TIME ZONE 'UTC',"
            ' \'YYYY-MM-DD"T"HH24:MI:SS.US"Z"\') AS at FROM task_events'
            " WHERE task_id = $1 AND seq > $2 ORDER BY seq LIMIT $3",
            task_id,
            after,
            limit,
        )
        return [TaskEvent(seq=r["seq"], type=r["type"], data=r["data"], at=r["at"]) for r in rows]
