"""A multi-routed task (catalog ``multi_route``): its parts run as a group's children, and the task itself is
the group's combine (reduce) step.

``route_parts`` records the decision, parks the task in ``waiting`` (no message held, no worker slot) as the
group's reduce task, and creates the group with one child per part, in one transaction: a crash leaves either
a pending task to route again or the whole group. The group machinery (``groups.py``) does the rest: when the
last child is terminal, ``settle_group`` moves the waiting task to ``queued`` with the parts' outcomes in its
instructions (the ``resume`` transition, as a delegating parent's), once; when it ends, its group ends as it
did. Cancelling the task cancels its parts (``cancel_descendants``).
"""

from __future__ import annotations

import builtins
import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

from taskyard_common.lifecycle import ROUTABLE, sql_in
from taskyard_common.messages import RoutingDecision
from taskyard_common.store._pg import COLUMNS, INSERT_TASKS, insert_arrays, to_record
from taskyard_common.store.events import columns_of, logged
from taskyard_common.store.groups import GroupSettling
from taskyard_common.store.records import NewTask, TaskRecord

# The statement's $1..$6: task, combining specialist, decision, deadline (as ROUTE's $4), group, parts.
ROUTE_PARTS = logged(
    "status = 'waiting', specialist = $2, routing = $3, routed_at = clock_timestamp(), group_id = $5,"
    " group_role = 'reduce', waiting_children = $6, updated_at = clock_timestamp()",
    f"WHERE id = $1 AND status IN {sql_in(ROUTABLE)}"
    " AND (not_before IS NULL OR not_before <= clock_timestamp())"
    " AND (COALESCE(deadline, $4::timestamptz) IS NULL OR COALESCE(deadline, $4::timestamptz) > clock_timestamp())",
    event="'routed'",
    data="jsonb_build_object('method', c.routing->>'method', 'specialist', c.specialist,"
    " 'confidence', c.routing->'confidence', 'cached', c.routing->'cached', 'group', c.group_id,"
    " 'parts', c.routing->'parts')",
    returning=columns_of("c", COLUMNS),
)
_INSERT_GROUP = (
    "INSERT INTO task_groups (id, tenant, total, reduce, reduce_task_id, metadata, priority)"
    " VALUES ($1, $2, $3, $4, $5, $6, $7)"
)


def part_instructions(job: str) -> str:
    """A part's extra instructions: its child task reads the whole request, and does this job of it."""
    return (
        "The request holds several jobs, each done by another specialist. Do only this one (quoted as JSON): "
        + json.dumps(job, ensure_ascii=False)
    )


class PartsQueries(GroupSettling):
    async def route_parts(
        self,
        task_id: UUID,
        decision: RoutingDecision,
        group_id: UUID,
        parts: Sequence[NewTask],
        deadline: datetime | None = None,
    ) -> builtins.list[TaskRecord] | None:
        """pending → waiting with ``decision`` (its ``specialist`` combines), as the reduce task of group
        ``group_id``, whose children ``parts`` (each with ``group_id``, role ``child``) are created with it, in
        one transaction. None when it did not apply (as ``route``: not pending any more, unknown, or
        expired). Returns the children: the caller announces them."""
        async with self._transaction() as conn:
            row = await conn.fetchrow(
                ROUTE_PARTS,
                task_id,
                decision.specialist,
                decision.model_dump(mode="json"),
                deadline,
                group_id,
                len(parts),
            )
            if row is None:
                return None
            task = to_record(row)
            # As a group's reduce request reads (the API shows it): the combining specialist.
            reduce: dict[str, Any] = {"specialist": decision.specialist}
            await conn.execute(
                _INSERT_GROUP,
                group_id,
                task.tenant,
                len(parts),
                reduce,
                task_id,
                task.metadata,
                task.priority.value,
            )
            rows = await conn.fetch(INSERT_TASKS, *insert_arrays(parts))
        self._changed(task_id, watched=row["_watched"])
        by_id = {r["id"]: to_record(r) for r in rows}
        for child_id in by_id:
            self._changed(child_id, watched=False)  # born a moment ago: nobody watches them yet
        return [by_id[p.id] for p in parts]
