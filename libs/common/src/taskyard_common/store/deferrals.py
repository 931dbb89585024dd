"""Start refusals: a startable task that is not started now, with the reason in its attempt history.

A refused start changes nothing but the history and, for a queued task, ``parked_at``: the task stays queued
(or retrying), holds no lease and no attempt is charged. A queued task is parked (``parking.py``): the worker
acks its message and the broker agent's feeder publishes it again when its tenant has room; a retrying one's
message goes round a delay queue. A task refused many times in a row
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
    f" event_seq = event_seq + CASE WHEN {_SAME_RUN} THEN 0 ELSE 1 END, updated_at = clock_timestamp(),"
    # A queued task is parked (``parking.py``): the feeder publishes it again when its tenant has room.
    " parked_at = CASE WHEN status = 'queued' THEN clock_timestamp() ELSE parked_at END"
)
# A startable task, neither cancelled nor past its deadline (those take ``start``'s locked path instead).
READY = (
    f"status IN {sql_in(STARTABLE)} AND cancel_requested_at IS NULL"
    " AND (deadline IS NULL OR deadline >= clock_timestamp())"
)
# A retrying task starts only from the message of its next attempt (the charged attempt after the one that
# failed, or the same one after an uncharged deferral, as its last retry entry says) and not before its
# backoff is over: a stale copy of the failed attempt's message (an ack lost after the retry was scheduled)
# would otherwise run the task at once and fork a second retry chain. The last entry that is not a refused
# start: a refusal charges nothing and must not turn the retry's own message into a stale one.
RETRY_ATTEMPT = (
    "attempts + CASE WHEN (SELECT h.e->>'charged' FROM jsonb_array_elements(attempt_log) WITH ORDINALITY"
    " AS h(e, n) WHERE h.e->>'event' IS DISTINCT FROM 'start_deferred' ORDER BY h.n DESC LIMIT 1) = 'false'"
    " THEN 0 ELSE 1 END"
)
RETRY_DUE = "COALESCE(next_attempt_at <= clock_timestamp(), true)"


def startable_by(attempt: str) -> str:
    """Startable now by the message of attempt ``attempt`` (SQL): ``READY``, and for a retrying task its
    backoff over and ``attempt`` its next one (see ``RETRY_ATTEMPT``)."""
    return f"{READY} AND (status <> 'retrying' OR ({RETRY_DUE} AND {attempt} >= {RETRY_ATTEMPT}))"


def _deferral(condition: str = "") -> str:
    """The refusal of task $1 for reason $2 (message attempt $3), when that message could start it now
    (``startable_by``) and ``condition`` holds; selects ``deferrals`` (the count of the run) and ``_watched``."""
    return (
        f"WITH changed AS (UPDATE tasks SET {_NOTE} WHERE id = $1 AND {startable_by('$3')}{condition}"
        " RETURNING tasks.id, tasks.event_seq, tasks.attempt_log->-1 AS entry, tasks.watched_until,"
        " tasks.parked_at IS NOT NULL AND tasks.status = 'queued' AS parked),"
        " logged AS (INSERT INTO task_events (task_id, seq, type, data)"
        " SELECT id, event_seq, 'start_deferred', entry FROM changed WHERE (entry->>'count')::int = 1)"
        " SELECT (entry->>'count')::int AS deferrals, (entry->>'count')::int = 1 AS _logged, parked,"
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
