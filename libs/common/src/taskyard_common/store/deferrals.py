"""Start refusals: a startable task that is not started now, with the reason in its attempt history.

A refused start changes nothing but the history: the task stays queued (or retrying), holds no lease and no
attempt is charged; the worker sends its message round a delay queue. A task refused many times in a row
for the same reason (a tenant at its cap with a long backlog) would grow its history without bound, so a
refusal for the same reason as the history's last entry only counts there (``count``, ``last_at``); the
first of a run appends the entry ``{event: "start_deferred", reason, attempt, count: 1, first_at, last_at}``
and the event ``start_deferred`` (the event log grows once per run, not per refusal).

The tenant cap (``max_running``, see ``tenant_limits.py``) is enforced here and in ``starts.py``:

* the one-statement starts (``START``, ``START_MANY``) skip every task whose tenant has a cap;
* ``DEFER_IF_FULL`` refuses such a task when its tenant's running tasks, as this statement sees them,
  already reach the cap: no lock, so a crowd of refusals never queues behind one lock (a stale count can
  only refuse a start that would have fitted: that task comes back after its delay);
* any other start of such a task takes the tenant's ``tenant_limits`` row lock (``FOR UPDATE``) and counts
  the running tasks in a statement of its own, which sees every start committed before the lock was granted,
  then starts or refuses: two starts of one tenant never both see room for one more.
"""

from __future__ import annotations

from taskyard_common.lifecycle import STARTABLE, sql_in

# Whether the history's last entry is a refusal for the same reason ($2).
_SAME_RUN = "(attempt_log->-1->>'event' = 'start_deferred' AND attempt_log->-1->>'reason' = $2)"
_NOTE = (
    f"attempt_log = CASE WHEN {_SAME_RUN}"
    " THEN jsonb_set(attempt_log, '{-1}', (attempt_log->-1) || jsonb_build_object("
    "'count', (attempt_log->-1->>'count')::int + 1, 'last_at', clock_timestamp()))"
    " ELSE attempt_log || jsonb_build_array(jsonb_build_object('event', 'start_deferred', 'reason', $2::text,"
    " 'attempt', $3::int, 'count', 1, 'first_at', clock_timestamp(), 'last_at', clock_timestamp())) END,"
    f" event_seq = event_seq + CASE WHEN {_SAME_RUN} THEN 0 ELSE 1 END, updated_at = clock_timestamp()"
)
# A startable task, neither cancelled nor past its deadline (those take ``start``'s locked path instead).
READY = (
    f"status IN {sql_in(STARTABLE)} AND cancel_requested_at IS NULL"
    " AND (deadline IS NULL OR deadline >= clock_timestamp())"
)


def _deferral(condition: str = "") -> str:
    """The refusal of task $1 for reason $2 (message attempt $3), when it is startable and ``condition``
    holds; selects ``deferrals`` (the count of the run) and ``_watched``."""
    return (
        f"WITH changed AS (UPDATE tasks SET {_NOTE} WHERE id = $1 AND {READY}{condition}"
        " RETURNING tasks.id, tasks.event_seq, tasks.attempt_log->-1 AS entry, tasks.watched_until),"
        " logged AS (INSERT INTO task_events (task_id, seq, type, data)"
        " SELECT id, event_seq, 'start_deferred', entry FROM changed WHERE (entry->>'count')::int = 1)"
        " SELECT (entry->>'count')::int AS deferrals, (entry->>'count')::int = 1 AS _logged,"
        " COALESCE(watched_until > clock_timestamp(), false) AS _watched FROM changed"
    )


# The tenant has a cap: a task of it never takes the one-statement start.
CAPPED = "EXISTS (SELECT 1 FROM tenant_limits l WHERE l.tenant = tasks.tenant AND l.max_running IS NOT NULL)"
DEFER_START = _deferral()
DEFER_IF_FULL = _deferral(
    " AND EXISTS (SELECT 1 FROM tenant_limits l WHERE l.tenant = tasks.tenant AND l.max_running IS NOT NULL"
    " AND (SELECT count(*) FROM tasks r WHERE r.tenant = l.tenant AND r.status = 'running') >= l.max_running)"
)
# Under the task's row lock: the cap of its tenant ($1), locked; then the count, in a statement of its own.
LOCK_CAP = "SELECT max_running FROM tenant_limits WHERE tenant = $1 AND max_running IS NOT NULL FOR UPDATE"
RUNNING_OF_TENANT = "SELECT count(*) FROM tasks WHERE tenant = $1 AND status = 'running'"
