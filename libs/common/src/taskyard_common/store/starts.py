"""``start``: the one transition with several paths, because a delivery may find its task in any state.

The usual case is one statement (``START``, or ``START_MANY`` for the deliveries a worker got together). Anything
else (a duplicate, a lease held elsewhere, a cancel, an expired deadline, a dead worker's task taken over, a
retrying task reached by a stale copy of an earlier attempt's message or before its backoff is over, a tenant
with a ``max_running`` cap) takes the locked read of ``start``'s transaction, which says why it cannot start or
which other transition applies instead (cancelled, expired); a capped tenant's task may be refused (deferred)
on the way, see ``deferrals.py``.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from taskyard_common.lifecycle import TERMINAL, TaskStatus
from taskyard_common.store._pg import CLEAR_LEASE, COLUMNS, to_record
from taskyard_common.store.deferrals import (
    CAPPED,
    DEFER_IF_FULL,
    DEFER_START,
    LOCK_CAP,
    RETRY_ATTEMPT,
    RUNNING_OF_TENANT,
    startable_by,
)
from taskyard_common.store.events import columns_of, logged
from taskyard_common.store.groups import GroupSettling
from taskyard_common.store.records import DeferralReason, StartOutcome, StartResult, TaskRecord
from taskyard_common.task_errors import TaskError, TaskErrorType

_TAKE_LEASE = (
    "status = 'running', attempts = GREATEST(attempts, $3), lease_owner = $2, message_settled = false,"
    " parked_at = NULL,"
    " lease_expires_at = clock_timestamp() + make_interval(secs => $4), next_attempt_at = NULL,"
    " started_at = clock_timestamp(), updated_at = clock_timestamp()"
)


def _ready(attempt: str) -> str:
    """Startable at once by the message of attempt ``attempt`` (SQL): ``startable_by`` (not cancelled, not
    past its deadline, a retrying task's due attempt), and a tenant without a cap (a capped tenant's start
    counts its running tasks on the locked path)."""
    return f"{startable_by(attempt)} AND NOT {CAPPED}"


_STARTED = "jsonb_build_object('attempt', c.attempts, 'worker', c.lease_owner)"
_RECORD = columns_of("c", COLUMNS)
# A startable task, neither cancelled nor past its deadline, becomes running under ``owner``'s lease.
START = logged(
    _TAKE_LEASE,
    f"WHERE id = $1 AND {_ready('$3')}",
    event="'attempt_started'",
    data=_STARTED,
    returning=_RECORD,
)
# The same for many tasks at once, rows locked in id order and rows locked by anyone else skipped (they take
# ``start``'s own path): concurrent batches never deadlock.
START_MANY = (
    "WITH ready AS (SELECT tasks.id, b.attempt FROM tasks"
    " JOIN unnest($1::uuid[], $2::int[]) AS b(id, attempt) ON b.id = tasks.id"
    f" WHERE {_ready('b.attempt')} ORDER BY tasks.id FOR UPDATE OF tasks SKIP LOCKED), "
    + logged(
        "status = 'running', attempts = GREATEST(t.attempts, ready.attempt), lease_owner = $3,"
        " message_settled = false, parked_at = NULL,"
        " lease_expires_at = clock_timestamp() + make_interval(secs => $4), next_attempt_at = NULL,"
        " started_at = clock_timestamp(), updated_at = clock_timestamp()",
        "FROM ready WHERE t.id = ready.id",
        event="'attempt_started'",
        data=_STARTED,
        returning=_RECORD,
        target="tasks AS t",
    ).removeprefix("WITH ")
)
_LOCKED_READ = (
    "SELECT status, tenant, lease_owner, deadline, cancel_requested_at, clock_timestamp() AS now,"
    " extract(epoch FROM lease_expires_at - clock_timestamp()) AS remaining,"
    f" {RETRY_ATTEMPT} AS retry_attempt,"
    " extract(epoch FROM next_attempt_at - clock_timestamp()) AS retry_due_in"
    " FROM tasks WHERE id = $1 FOR UPDATE"
)
# The ``cancel_running`` and ``expire`` transitions as the start finds them due (the row is locked).
_CANCEL_AT_START = logged(
    f"status = 'cancelled', {CLEAR_LEASE}, finished_at = clock_timestamp(), updated_at = clock_timestamp()",
    "WHERE id = $1",
    event="c.status",
    returning="c.id",
    follow_ups=True,
)
_EXPIRE_AT_START = logged(
    "status = 'failed', error = $2, finished_at = clock_timestamp(), next_attempt_at = NULL,"
    " updated_at = clock_timestamp()",
    "WHERE id = $1",
    event="c.status",
    data="jsonb_build_object('error', c.error)",
    returning="c.id",
    follow_ups=True,
)
_EXPIRED_AT_START = TaskError(
    type=TaskErrorType.EXPIRED, message="the task's deadline passed before it could start"
)
_START_LOCKED = logged(
    _TAKE_LEASE, "WHERE id = $1", event="'attempt_started'", data=_STARTED, returning=_RECORD
)


class StartQueries(GroupSettling):
    async def start_many(
        self, attempts: dict[UUID, int], *, owner: str, lease_seconds: float
    ) -> dict[UUID, TaskRecord]:
        if not attempts:
            return {}
        rows = await self._fetch(START_MANY, list(attempts), list(attempts.values()), owner, lease_seconds)
        for row in rows:
            self._changed(row["id"], watched=row["_watched"])
        return {row["id"]: to_record(row) for row in rows}

    async def start(
        self, task_id: UUID, *, owner: str, lease_seconds: float, attempt: int, capped: bool = False
    ) -> StartResult:
        # One round trip for the usual case instead of four (BEGIN, SELECT ... FOR UPDATE, UPDATE, COMMIT);
        # a task whose tenant is known to have a cap would not take it: straight to the cap's check.
        if not capped:
            fast = await self._fetchrow(START, task_id, owner, attempt, lease_seconds)
            if fast is not None:
                self._changed(task_id, watched=fast["_watched"])
                return StartResult(StartOutcome.STARTED, to_record(fast))
        full = await self._fetchrow(DEFER_IF_FULL, task_id, DeferralReason.TENANT_MAX_RUNNING.value, attempt)
        if full is not None:
            return self._deferred(task_id, full, DeferralReason.TENANT_MAX_RUNNING)
        result, ended = await self._start_locked(
            task_id, owner=owner, lease_seconds=lease_seconds, attempt=attempt
        )
        if result.outcome in (StartOutcome.STARTED, StartOutcome.CANCELLED, StartOutcome.EXPIRED) or (
            result.outcome is StartOutcome.DEFERRED and result.deferrals == 1
        ):
            self._changed(task_id)  # committed by now
        if ended is not None:
            await self._after_end(ended)
        return result

    async def defer_start(self, task_id: UUID, reason: DeferralReason, attempt: int) -> StartResult | None:
        """Refuse to start the task now for ``reason``: noted in its attempt history (see
        ``deferrals.py``). None when it is not startable (not queued or retrying, cancelled, past its
        deadline): ``start`` tells what it is instead."""
        row = await self._fetchrow(DEFER_START, task_id, reason.value, attempt)
        return None if row is None else self._deferred(task_id, row, reason)

    def _deferred(
        self, task_id: UUID, row: Any, reason: DeferralReason, *, notify: bool = True
    ) -> StartResult:
        if notify and row["_logged"]:  # an event was written (the first refusal of a run)
            self._changed(task_id, watched=row["_watched"])
        return StartResult(
            StartOutcome.DEFERRED, reason=reason, deferrals=int(row["deferrals"]), parked=bool(row["parked"])
        )

    async def _start_locked(
        self, task_id: UUID, *, owner: str, lease_seconds: float, attempt: int
    ) -> tuple[StartResult, Any]:
        """The start's answer, and the row of the transition that ended the task instead (cancelled,
        expired), for what the end sets in motion."""
        async with self._transaction() as conn:
            row = await conn.fetchrow(_LOCKED_READ, task_id)
            if row is None:
                return StartResult(StartOutcome.UNKNOWN), None
            status = TaskStatus(row["status"])
            if status in TERMINAL:
                return StartResult(StartOutcome.FINISHED), None
            if status in (TaskStatus.PENDING, TaskStatus.SCHEDULED):
                return StartResult(StartOutcome.NOT_ROUTED), None
            if status is TaskStatus.WAITING:
                return StartResult(StartOutcome.WAITING), None
            remaining = float(row["remaining"] or 0.0)
            if status is TaskStatus.RUNNING and row["lease_owner"] != owner and remaining > 0:
                return StartResult(StartOutcome.LEASED, lease_remaining_seconds=remaining), None
            if row["cancel_requested_at"] is not None:
                ended = await conn.fetchrow(_CANCEL_AT_START, task_id)
                return StartResult(StartOutcome.CANCELLED), ended
            if (
                status is not TaskStatus.RUNNING
                and row["deadline"] is not None
                and row["deadline"] < row["now"]
            ):
                ended = await conn.fetchrow(
                    _EXPIRE_AT_START, task_id, _EXPIRED_AT_START.model_dump(mode="json")
                )
                return StartResult(StartOutcome.EXPIRED), ended
            if status is TaskStatus.RETRYING:
                not_now = _retry_not_now(row, attempt)
                if not_now is not None:
                    return not_now, None
            if status is not TaskStatus.RUNNING and await self._at_cap(conn, row["tenant"]):
                # Taking over a running task (a dead lease, our own) adds nothing to what its tenant runs.
                refused = await conn.fetchrow(
                    DEFER_START, task_id, DeferralReason.TENANT_MAX_RUNNING.value, attempt
                )
                if refused is None:  # the row is locked and startable: the note cannot miss it
                    raise RuntimeError(f"task {task_id} could not be deferred while locked")
                deferred = self._deferred(task_id, refused, DeferralReason.TENANT_MAX_RUNNING, notify=False)
                return deferred, None
            started = await conn.fetchrow(_START_LOCKED, task_id, owner, attempt, lease_seconds)
            if started is None:  # the row is locked by this transaction: it cannot have gone
                raise RuntimeError(f"task {task_id} vanished while locked")
            return StartResult(StartOutcome.STARTED, to_record(started)), None

    @staticmethod
    async def _at_cap(conn: Any, tenant: str) -> bool:
        """Whether ``tenant`` runs its ``max_running`` already; holds its cap's row lock until the start
        commits, so that the next start of the tenant counts this one (see ``deferrals.py``)."""
        cap = await conn.fetchval(LOCK_CAP, tenant)
        if cap is None:
            return False
        return int(await conn.fetchval(RUNNING_OF_TENANT, tenant)) >= int(cap)


def _retry_not_now(row: Any, attempt: int) -> StartResult | None:
    """Why the message of ``attempt`` cannot start this retrying task (None: it can): it is a stale copy of
    an earlier attempt's message (the retry's own message is on its way), or the backoff is not over."""
    if attempt < row["retry_attempt"]:
        return StartResult(StartOutcome.STALE)
    due_in = float(row["retry_due_in"] or 0.0)
    if due_in > 0:
        return StartResult(StartOutcome.NOT_DUE, retry_due_in_seconds=due_in)
    return None
