"""Parked tasks: a tenant's queued work beyond its lane is kept in the store, not in the broker queue.

A specialist's queue is first in, first out. Were a tenant's 2,000 tasks all in it, another tenant's 20 would
wait behind them, and every one of the 2,000 that a worker refuses (its tenant at its ``max_running``, or at
its fair share of the slots) would be a delivery to take, refuse and send round again before the 20 are
reached. So each (specialist, tenant) **lane** holds at most ``depth`` messages in the broker; the rest of the
tenant's queued tasks are **parked**: still ``queued`` in the store, ``parked_at`` set, with no message.

* **Routing** (``ROUTE``, given the lane's depth) parks the task instead of having it published when the lane
  already holds ``depth`` unparked queued tasks, when the tenant has parked tasks for the specialist already
  (so that a parked task is never overtaken by a later one, and a parked high goes first), or when the
  tenant has a cap and its unparked queued tasks already fill the room under it.
  Routings running at once each see the lane as their statement found it, so a lane may overshoot its
  depth by the routings in flight (the broker agent's intake prefetch); a refused start parks the excess.
* **A refused start** (``deferrals.py``: the cap, the fair share) parks a queued task in the same statement
  that notes the refusal; the worker acks the message instead of sending it round the delay queues. A
  retrying task is not parked (it keeps its delay-queue path: it is not ``queued``).
* **The feeder** (``RELEASE``, the broker agent's loop, one statement a round) takes each lane's parked tasks,
  high priority first, then in submission order, up to what the lane can use: its depth minus the tenant's
  unparked queued tasks, and for a capped tenant no more than its room under the cap minus those (per lane:
  a tenant capped across several specialists may get its room in each; the start's cap check parks the
  excess again). Released
  tasks get ``parked_at`` and ``published_at`` NULL in that commit and are published after it, through the
  announce path; one whose publish is lost (the agent died between the commit and the confirm) is a queued,
  unpublished, unparked task, which the reaper's ``stale_queued`` publishes after its grace period.
  ``stale_queued`` never sees a parked task. One feeder at a time: the statement takes a transaction-level
  advisory lock of the schema or does nothing, so replicas never release a lane twice over.

A stray message of a parked task (a redelivery, a duplicate) is harmless: the start transition takes a
parked task like any queued one and clears ``parked_at``; a redelivered intake message of a parked task is
acknowledged without publishing (the intake decisions read ``parked_at``). Cancelling, expiring or deleting a
parked task needs nothing more: the task leaves ``queued`` and the feeder's index with it.
"""

from __future__ import annotations

import builtins
from collections.abc import Mapping

from taskyard_common.store._pg import COLUMNS, PoolStore, to_record
from taskyard_common.store.records import TaskRecord

# The running tasks of the tenant of row ``t`` (every specialist: the cap is the tenant's).
_RUNNING = "(SELECT count(*) FROM tasks r WHERE r.tenant = {t}.tenant AND r.status = 'running')"
# The room under the cap of the tenant of row ``t`` (NULL: no cap).
_CAP_ROOM = (
    "(SELECT GREATEST(l.max_running - " + _RUNNING.format(t="l") + ", 0) FROM tenant_limits l"
    " WHERE l.tenant = {t}.tenant AND l.max_running IS NOT NULL)"
)


def lane_full(specialist: str, depth: str) -> str:
    """SQL, inside an UPDATE of ``tasks``: whether the lane of this row's tenant for ``specialist`` (SQL) has
    no room for one more message, for a lane ``depth`` (SQL int, never NULL here)."""
    unparked = (
        f"(SELECT count(*) FROM (SELECT 1 FROM tasks u WHERE u.specialist = {specialist}"
        f" AND u.tenant = tasks.tenant AND u.status = 'queued' AND u.parked_at IS NULL LIMIT {depth}) AS lane)"
    )
    parked = (
        f"EXISTS (SELECT 1 FROM tasks p WHERE p.specialist = {specialist} AND p.tenant = tasks.tenant"
        " AND p.status = 'queued' AND p.parked_at IS NOT NULL)"
    )
    room = f"LEAST({depth}, COALESCE({_CAP_ROOM.format(t='tasks')}, {depth}))"
    return f"({parked} OR {unparked} >= {room})"


def park_if_full(specialist: str, depth: str) -> str:
    """The SET item of a routing UPDATE: parked now when a lane of ``depth`` (SQL; NULL: no lanes) is full."""
    full = lane_full(specialist, depth)
    return f"parked_at = CASE WHEN {depth} IS NOT NULL AND {full} THEN clock_timestamp() END"


_RANK = "CASE t.priority WHEN 'high' THEN 0 WHEN 'normal' THEN 1 ELSE 2 END"
# $1 specialists, $2 their lane depths, $3 the most tasks one round releases. Lanes of specialists not in $1
# (not in the catalog any more) are left parked.
RELEASE = (
    "WITH lock AS (SELECT pg_try_advisory_xact_lock(hashtext(current_schema() || '.parked_feeder')) AS held),"
    " lanes AS (SELECT DISTINCT t.specialist, t.tenant FROM tasks t"
    " WHERE t.status = 'queued' AND t.parked_at IS NOT NULL AND (SELECT held FROM lock)),"
    " room AS (SELECT n.specialist, n.tenant, LEAST(d.depth - q.queued,"
    f" COALESCE({_CAP_ROOM.format(t='n')} - q.queued, d.depth)) AS free"
    " FROM lanes n JOIN unnest($1::text[], $2::int[]) AS d(specialist, depth) ON d.specialist = n.specialist"
    " CROSS JOIN LATERAL (SELECT count(*) AS queued FROM (SELECT 1 FROM tasks u WHERE u.specialist ="
    " n.specialist AND u.tenant = n.tenant AND u.status = 'queued' AND u.parked_at IS NULL"
    " LIMIT d.depth) AS lane) AS q),"
    " picked AS (SELECT p.id FROM room CROSS JOIN LATERAL (SELECT t.id FROM tasks t"
    " WHERE t.specialist = room.specialist AND t.tenant = room.tenant AND t.status = 'queued'"
    f" AND t.parked_at IS NOT NULL ORDER BY {_RANK}, t.created_at, t.id"
    " LIMIT GREATEST(room.free, 0) FOR UPDATE SKIP LOCKED) AS p LIMIT $3)"
    " UPDATE tasks SET parked_at = NULL, published_at = NULL, updated_at = clock_timestamp() FROM picked"
    " WHERE tasks.id = picked.id AND tasks.status = 'queued' AND tasks.parked_at IS NOT NULL"
    f" RETURNING {', '.join(f'tasks.{c.strip()}' for c in COLUMNS.split(','))}"
)


class ParkingQueries(PoolStore):
    async def release_parked(self, depths: Mapping[str, int], *, limit: int) -> builtins.list[TaskRecord]:
        """One round of the feeder (see the module): the parked tasks released now, at most ``limit``, for the
        caller to publish (each committed queued, unparked, ``published_at`` NULL). ``depths``: each
        specialist's lane depth. Empty while another feeder's round holds the lock."""
        if not depths:
            return []
        rows = await self._fetch(RELEASE, list(depths), list(depths.values()), limit)
        return [to_record(row) for row in rows]

    async def parked_count(self, specialist: str, tenant: str) -> int:
        """How many of ``tenant``'s tasks for ``specialist`` are parked (for tests and the admin's eyes)."""
        row = await self._fetchrow(
            "SELECT count(*) AS n FROM tasks WHERE specialist = $1 AND tenant = $2 AND status = 'queued'"
            " AND parked_at IS NOT NULL",
            specialist,
            tenant,
        )
        return 0 if row is None else int(row["n"])
