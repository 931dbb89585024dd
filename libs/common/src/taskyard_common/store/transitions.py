"""Every status change of a task, one method per transition of ``taskyard_common.lifecycle.TRANSITIONS``.

Each is one conditional statement whose ``WHERE status IN (...)`` comes from the lifecycle's sets, so a
duplicate or late message can never move a task backwards or finish it twice; the result says whether it
applied. Every transition out of ``running`` is also conditional on the lease owner, so a worker that lost
its lease (it stalled, the reaper took the task back, another worker took over) can record nothing.
``start``, the one transition with several paths, lives in ``starts.py``; ``create`` in ``submissions.py``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

from taskyard_common.lifecycle import (
    CANCELLABLE_AT_ONCE,
    NON_TERMINAL,
    NOT_STARTED,
    ROUTABLE,
    ROUTING_UNFINISHED,
    TaskStatus,
    sql_in,
)
from taskyard_common.messages import Priority, RoutingDecision, Usage
from taskyard_common.store._pg import CLEAR_LEASE, COLUMNS, add_usage, to_record
from taskyard_common.store.dead_letters import UPSERT_DEAD_LETTER
from taskyard_common.store.events import columns_of, logged
from taskyard_common.store.groups import GroupSettling
from taskyard_common.store.parking import park_if_full
from taskyard_common.store.records import RoutedTask, TaskRecord
from taskyard_common.store.starts import StartQueries
from taskyard_common.task_errors import TaskError, TaskErrorType

_RUNNING_BY_OWNER = "status = 'running' AND lease_owner = $2"

_BY_OWNER = f"WHERE id = $1 AND {_RUNNING_BY_OWNER}"
_RECORD = columns_of("c", COLUMNS)
_STATUS = "c.status"

# pending (or scheduled and due) → queued with the decision, unless the deadline (the row's, else the
# message's: $4) has passed. Never before not_before, whatever the caller's clock says.
# $5: the depth of the tenant's lane for the specialist (NULL: no lanes): a full lane parks the task
# (``parking.py``) instead of leaving it for the caller to publish.
ROUTE = logged(
    "status = 'queued', specialist = $2, routing = $3, routed_at = clock_timestamp(), updated_at = clock_timestamp(),"
    f" {park_if_full('$2', '$5::int')}",
    f"WHERE id = $1 AND status IN {sql_in(ROUTABLE)}"
    " AND (not_before IS NULL OR not_before <= clock_timestamp())"
    " AND (COALESCE(deadline, $4::timestamptz) IS NULL OR COALESCE(deadline, $4::timestamptz) > clock_timestamp())",
    event="'routed'",
    data="jsonb_build_object('method', c.routing->>'method', 'specialist', c.specialist,"
    " 'confidence', c.routing->'confidence', 'cached', c.routing->'cached')"
    " || CASE WHEN c.parked_at IS NULL THEN '{}'::jsonb ELSE '{\"parked\": true}'::jsonb END",
    returning="c.deadline, c.timeout_seconds, c.tenant, c.priority, c.parked_at IS NOT NULL AS parked",
)
# The rows locked in id order, as a worker's step checkpoints lock them: its statements never deadlock.
HEARTBEAT = (
    "WITH held AS (SELECT id FROM tasks WHERE id = ANY($1::uuid[]) AND status = 'running'"
    " AND lease_owner = $2 ORDER BY id FOR UPDATE)"
    " UPDATE tasks SET lease_expires_at = clock_timestamp() + make_interval(secs => $3) FROM held"
    " WHERE tasks.id = held.id RETURNING tasks.id, tasks.cancel_requested_at IS NOT NULL AS cancel"
)
# A dead worker's leases, ended now (not dropped: the task stays running under the dead owner, so a
# redelivery of its message still counts the crash, and the next start takes it over at once).
# The epoch, not now: a lease ended because its holder is known dead reads differently from one that ran out
# (``records.LEASE_ENDED_BY_SUPERVISOR``; the worker's crash routing tells a proven poison task by it).
EXPIRE_LEASES_OF = (
    "UPDATE tasks SET lease_expires_at = to_timestamp(0) WHERE status = 'running' AND lease_owner = $1"
    " AND lease_expires_at > clock_timestamp() RETURNING id"
)
# Not an event: the message of a long task is acked early (the lease protects it from now on).
SETTLE = (
    "UPDATE tasks SET message_settled = true, updated_at = clock_timestamp()"
    f" WHERE id = $1 AND {_RUNNING_BY_OWNER} RETURNING id"
)
COMPLETE = logged(
    f"status = 'completed', result = $3, usage = {add_usage('$4')}, {CLEAR_LEASE},"
    " finished_at = clock_timestamp(), updated_at = clock_timestamp()",
    _BY_OWNER,
    event=_STATUS,
    data="jsonb_build_object('result', c.result, 'usage', c.usage)",
    returning="c.id",
    follow_ups=True,
)
# $4 the owner, or NULL: without one (the broker agent, a misrouted message), any non-terminal task can fail.
FAIL = logged(
    f"status = 'failed', error = $2, usage = {add_usage('$3')}, {CLEAR_LEASE},"
    " next_attempt_at = NULL, finished_at = clock_timestamp(), updated_at = clock_timestamp()",
    "WHERE id = $1 AND CASE WHEN $4::text IS NULL"
    f" THEN status IN {sql_in(NON_TERMINAL)} ELSE status = 'running' AND lease_owner = $4 END",
    event=_STATUS,
    data="jsonb_build_object('error', c.error, 'usage', c.usage)",
    returning="c.id",
    follow_ups=True,
)
# The broker agent's failures (routing gave up, an unknown specialist): in the statement itself, never a task
# a worker has started meanwhile (reading the status first and then failing would race with the start).
FAIL_UNSTARTED = logged(
    "status = 'failed', error = $2, next_attempt_at = NULL, finished_at = clock_timestamp(),"
    " updated_at = clock_timestamp()",
    f"WHERE id = $1 AND status IN {sql_in(ROUTING_UNFINISHED)}",
    event=_STATUS,
    data="jsonb_build_object('error', c.error, 'usage', c.usage)",
    returning="c.id",
    follow_ups=True,
)
EXPIRE = logged(
    "status = 'failed', error = $2, finished_at = clock_timestamp(), next_attempt_at = NULL,"
    " updated_at = clock_timestamp()",
    f"WHERE id = $1 AND status IN {sql_in(NOT_STARTED)}",
    event=_STATUS,
    data="jsonb_build_object('error', c.error)",
    returning="c.id",
    follow_ups=True,
)
SCHEDULE_RETRY = logged(
    f"status = 'retrying', {CLEAR_LEASE}, next_attempt_at = $3,"
    f" attempt_log = attempt_log || jsonb_build_array($4::jsonb), usage = {add_usage('$5')},"
    " updated_at = clock_timestamp()",
    _BY_OWNER,
    event="'retry_scheduled'",
    data="$4::jsonb",
    returning="c.id",
)
RELEASE = logged(
    f"status = 'queued', {CLEAR_LEASE}, updated_at = clock_timestamp()",
    _BY_OWNER,
    event="'handed_back'",
    data="jsonb_build_object('attempts', c.attempts)",
    returning="c.id",
)
# Not started → cancelled at once; running → stays running with the request recorded (its worker stops it).
CANCEL = logged(
    "status = CASE WHEN status = 'running' THEN status ELSE 'cancelled' END,"
    " cancel_requested_at = COALESCE(cancel_requested_at, clock_timestamp()),"
    " finished_at = CASE WHEN status = 'running' THEN finished_at ELSE clock_timestamp() END,"
    " next_attempt_at = NULL, updated_at = clock_timestamp()",
    f"WHERE id = $1 AND status IN {sql_in(CANCELLABLE_AT_ONCE | {TaskStatus.RUNNING})}",
    event="CASE WHEN c.status = 'cancelled' THEN 'cancelled' ELSE 'cancel_requested' END",
    returning=_RECORD,
    follow_ups=True,
)
CANCEL_RUNNING = logged(
    f"status = 'cancelled', {CLEAR_LEASE}, usage = {add_usage('$3')},"
    " finished_at = clock_timestamp(), updated_at = clock_timestamp()",
    _BY_OWNER,
    event=_STATUS,
    data="jsonb_build_object('usage', c.usage)",
    returning="c.id",
    follow_ups=True,
)
# Past the delivery limit ($2) → dead_lettered; else → queued with ``published_at`` cleared: requeued, its
# new work message is not published yet, and ``stale_queued`` finds it if the caller dies before the
# confirm and ``mark_published``.
RECLAIM = logged(
    "status = CASE WHEN lease_expirations + 1 > $2 THEN 'dead_lettered' ELSE 'queued' END,"
    " dead_letter = CASE WHEN lease_expirations + 1 > $2 THEN jsonb_build_object("
    "   'reason', 'delivery_limit', 'queue', 'lease', 'count', lease_expirations + 1,"
    "   'deaths', '[]'::jsonb, 'at', clock_timestamp()) ELSE dead_letter END,"
    " finished_at = CASE WHEN lease_expirations + 1 > $2 THEN clock_timestamp() ELSE NULL END,"
    " published_at = CASE WHEN lease_expirations + 1 > $2 THEN published_at ELSE NULL END,"
    f" lease_expirations = lease_expirations + 1, {CLEAR_LEASE}, updated_at = clock_timestamp()",
    "WHERE id = $1 AND status = 'running' AND message_settled AND lease_expires_at < clock_timestamp()",
    event="CASE WHEN c.status = 'dead_lettered' THEN 'dead_lettered' ELSE 'lease_expired' END",
    data="jsonb_build_object('lease_expirations', c.lease_expirations, 'reason', c.dead_letter->'reason',"
    " 'queue', c.dead_letter->'queue')",
    returning="c.status, c.specialist",
    follow_ups=True,
)
DEAD_LETTER = logged(
    f"status = 'dead_lettered', {CLEAR_LEASE}, dead_letter = $2 || jsonb_build_object('at', clock_timestamp()),"
    " next_attempt_at = NULL, parked_at = NULL, finished_at = clock_timestamp(), updated_at = clock_timestamp()",
    f"WHERE id = $1 AND status IN {sql_in(NON_TERMINAL)}",
    event=_STATUS,
    data="jsonb_build_object('reason', c.dead_letter->'reason', 'queue', c.dead_letter->'queue')",
    returning="c.id",
    follow_ups=True,
)
# Queued again (pending when it was never routed and no specialist is given), attempts reset; its new
# message is not published yet (``published_at`` NULL): the sweeper or the reaper publishes it if the caller
# cannot.
REPLAY = logged(
    "specialist = COALESCE($2, specialist), routing = COALESCE($3, routing),"
    # Never routed: back to the broker agent, scheduled again while its not_before is ahead.
    " status = CASE WHEN COALESCE($2, specialist) IS NOT NULL THEN 'queued'"
    " WHEN not_before > clock_timestamp() THEN 'scheduled' ELSE 'pending' END,"
    f" attempts = 0, lease_expirations = 0, {CLEAR_LEASE}, error = NULL, result = NULL,"
    " next_attempt_at = NULL, cancel_requested_at = NULL, finished_at = NULL, started_at = NULL,"
    " published_at = NULL, parked_at = NULL,"
    " attempt_log = attempt_log || jsonb_build_array($4::jsonb), updated_at = clock_timestamp()",
    "WHERE id = $1 AND status = 'dead_lettered'",
    event="'replayed'",
    data="$4::jsonb || jsonb_build_object('status', c.status)",
    returning=_RECORD,
)
REPLAYED_REASON = "replayed from the dead-letter queue"
# A replay from scratch: the steps go, and with them the size they counted (the REPLAY that follows keeps
# ``checkpoint_bytes`` as this leaves it).
DISCARD_STEPS = (
    "WITH gone AS (DELETE FROM task_steps WHERE task_id = $1 RETURNING task_id)"
    " UPDATE tasks SET checkpoint_bytes = 0 WHERE id = $1"
)


# Not a status change: a note in the attempt history of a task the caller runs (a resumed attempt), also
# an event of the note's kind.
APPEND_ATTEMPT_LOG = logged(
    "attempt_log = attempt_log || jsonb_build_array($3::jsonb), updated_at = clock_timestamp()",
    _BY_OWNER,
    event="$3::jsonb->>'event'",
    data="$3::jsonb",
    returning="c.id",
)


class TransitionQueries(StartQueries, GroupSettling):
    def _applied(self, task_id: UUID, row: Any) -> bool:
        """Whether the transition applied; if so its event is written: tell ``on_change``."""
        if row is None:
            return False
        self._changed(task_id, watched=row["_watched"])
        return True

    async def _ended(self, task_id: UUID, row: Any) -> bool:
        """``_applied`` for a transition that may end the task, then what the end sets in motion."""
        if not self._applied(task_id, row):
            return False
        await self._after_end(row)
        return True

    async def route(
        self,
        task_id: UUID,
        decision: RoutingDecision,
        deadline: datetime | None = None,
        *,
        lane_depth: int | None = None,
    ) -> RoutedTask | None:
        row = await self._fetchrow(
            ROUTE, task_id, decision.specialist, decision.model_dump(mode="json"), deadline, lane_depth
        )
        if not self._applied(task_id, row) or row is None:
            return None
        return RoutedTask(
            deadline=row["deadline"],
            timeout_seconds=row["timeout_seconds"],
            tenant=row["tenant"],
            priority=Priority(row["priority"]),
            parked=bool(row["parked"]),
        )

    async def heartbeat(
        self, owner: str, task_ids: list[UUID], lease_seconds: float
    ) -> tuple[set[UUID], set[UUID]]:
        if not task_ids:
            return set(), set()
        rows = await self._fetch(HEARTBEAT, task_ids, owner, lease_seconds)
        return {r["id"] for r in rows}, {r["id"] for r in rows if r["cancel"]}

    async def expire_leases(self, owner: str) -> int:
        return len(await self._fetch(EXPIRE_LEASES_OF, owner))

    async def append_attempt_log(self, task_id: UUID, owner: str, entry: dict[str, Any]) -> bool:
        return self._applied(task_id, await self._fetchrow(APPEND_ATTEMPT_LOG, task_id, owner, entry))

    async def settle(self, task_id: UUID, owner: str) -> bool:
        return await self._fetchrow(SETTLE, task_id, owner) is not None

    async def complete(self, task_id: UUID, result: dict[str, Any], usage: Usage, owner: str) -> bool:
        row = await self._fetchrow(COMPLETE, task_id, owner, result, usage.model_dump())
        return await self._ended(task_id, row)

    async def fail(self, task_id: UUID, error: TaskError, usage: Usage, owner: str | None = None) -> bool:
        row = await self._fetchrow(FAIL, task_id, error.model_dump(mode="json"), usage.model_dump(), owner)
        return await self._ended(task_id, row)

    async def fail_unstarted(self, task_id: UUID, error: TaskError) -> bool:
        return await self._ended(
            task_id, await self._fetchrow(FAIL_UNSTARTED, task_id, error.model_dump(mode="json"))
        )

    async def expire(self, task_id: UUID, message: str) -> bool:
        error = TaskError(type=TaskErrorType.EXPIRED, message=message)
        return await self._ended(
            task_id, await self._fetchrow(EXPIRE, task_id, error.model_dump(mode="json"))
        )

    async def schedule_retry(
        self, task_id: UUID, owner: str, *, entry: dict[str, Any], next_attempt_at: datetime, usage: Usage
    ) -> bool:
        row = await self._fetchrow(SCHEDULE_RETRY, task_id, owner, next_attempt_at, entry, usage.model_dump())
        return self._applied(task_id, row)

    async def release(self, task_id: UUID, owner: str) -> bool:
        return self._applied(task_id, await self._fetchrow(RELEASE, task_id, owner))

    async def cancel(self, task_id: UUID) -> TaskRecord | None:
        row = await self._fetchrow(CANCEL, task_id)
        if not await self._ended(task_id, row):  # unknown, or finished already: the task as it is
            row = await self._fetchrow(f"SELECT {COLUMNS} FROM tasks WHERE id = $1", task_id)
        return to_record(row) if row else None

    async def cancel_running(self, task_id: UUID, owner: str, usage: Usage) -> bool:
        return await self._ended(
            task_id, await self._fetchrow(CANCEL_RUNNING, task_id, owner, usage.model_dump())
        )

    async def reclaim(
        self, task_id: UUID, max_expirations: int, message: dict[str, Any] | None = None
    ) -> TaskStatus | None:
        async with self._transaction() as conn:
            row = await conn.fetchrow(RECLAIM, task_id, max_expirations)
            if row is None:
                return None
            status = TaskStatus(row["status"])
            if status is TaskStatus.DEAD_LETTERED:
                # In the same transaction, so the dead-letter API lists every dead-lettered task.
                await conn.execute(
                    UPSERT_DEAD_LETTER,
                    task_id,
                    row["specialist"],
                    "delivery_limit",
                    "lease",
                    [],
                    message or {},
                )
        self._changed(task_id)
        await self._after_end(row)
        return status

    async def dead_letter(
        self,
        task_id: UUID,
        *,
        reason: str,
        queue: str,
        deaths: list[dict[str, Any]],
        message: dict[str, Any],
        specialist: str | None,
    ) -> bool:
        summary = {"reason": reason, "queue": queue, "count": len(deaths), "deaths": deaths}
        async with self._transaction() as conn:
            ended = await conn.fetchrow(DEAD_LETTER, task_id, summary)
            if ended is None:
                return False
            await conn.execute(UPSERT_DEAD_LETTER, task_id, specialist, reason, queue, deaths, message)
        self._changed(task_id)
        await self._after_end(ended)
        return True

    async def replay(
        self, task_id: UUID, specialist: str | None, *, from_scratch: bool = False
    ) -> TaskRecord | None:
        async with self._transaction() as conn:
            taken = await conn.fetchrow(
                "DELETE FROM dead_letters WHERE task_id = $1 AND discarded_at IS NULL RETURNING reason",
                task_id,
            )
            if taken is None:
                return None
            routing = None
            if specialist is not None:
                routing = {
                    "method": "explicit",
                    "specialist": specialist,
                    "reason": REPLAYED_REASON,
                    "confidence": 1.0,
                }
            entry: dict[str, Any] = {
                "event": "replayed",
                "dead_letter_reason": taken["reason"],
                "specialist": specialist,
            }
            if from_scratch:
                entry["from_scratch"] = True
                await conn.execute(DISCARD_STEPS, task_id)
            row = await conn.fetchrow(REPLAY, task_id, specialist, routing, entry)
            if row is None:
                # The task moved on meanwhile (it cannot, but never leave a half replay behind).
                raise RuntimeError(f"task {task_id} has a dead letter but is not dead_lettered")
        self._changed(task_id)
        return to_record(row)
