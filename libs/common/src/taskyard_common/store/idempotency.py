"""Idempotency keys of submissions: the key and its task are written in one transaction.

The key row is claimed first (``INSERT ... ON CONFLICT``); only the claimant inserts the task, and both
commit together. A concurrent request with the same key waits on the primary key until the claimant commits
(then it finds the row) or rolls back (then it claims the key itself), so however many arrive at once the
database lets exactly one task through. A key older than the retention may be claimed again at once, even
before the sweeper deletes it.
"""

from __future__ import annotations

from datetime import datetime

from taskyard_common.store._pg import COLUMNS, INSERT_TASK, PoolStore, insert_args, to_record
from taskyard_common.store.records import IdempotentCreate, NewTask

# $1 tenant, $2 key, $3 request_hash, $4 task_id, $5 retention in seconds (the schedulers' occurrence keys
# use the same claim, see schedule_claims.py).
CLAIM_KEY = (
    "INSERT INTO idempotency_keys AS k (tenant, key, request_hash, task_id) VALUES ($1, $2, $3, $4)"
    " ON CONFLICT (tenant, key) DO UPDATE SET request_hash = EXCLUDED.request_hash,"
    " task_id = EXCLUDED.task_id, created_at = clock_timestamp()"
    " WHERE k.created_at < clock_timestamp() - make_interval(secs => $5)"
    " RETURNING key"
)
EXISTING_KEY = "SELECT request_hash, task_id FROM idempotency_keys WHERE tenant = $1 AND key = $2"
# A claimant that rolled back, or whose task was discarded between our conflict and our read: claim again.
_CLAIM_ATTEMPTS = 5


class IdempotencyQueries(PoolStore):
    async def create_idempotent(
        self, task: NewTask, *, key: str, request_hash: str, retention_seconds: float
    ) -> IdempotentCreate:
        for _ in range(_CLAIM_ATTEMPTS):
            async with self._transaction() as conn:
                claimed = await conn.fetchrow(
                    CLAIM_KEY, task.tenant, key, request_hash, task.id, float(retention_seconds)
                )
                if claimed is not None:
                    row = await conn.fetchrow(INSERT_TASK, *insert_args(task))
                    assert row is not None
                    return IdempotentCreate(created=True, request_hash=request_hash, record=to_record(row))
                existing = await conn.fetchrow(EXISTING_KEY, task.tenant, key)
                if existing is None:
                    continue
                record = None
                if existing["task_id"] is not None:
                    row = await conn.fetchrow(
                        f"SELECT {COLUMNS} FROM tasks WHERE id = $1", existing["task_id"]
                    )
                    record = to_record(row) if row is not None else None
                return IdempotentCreate(created=False, request_hash=existing["request_hash"], record=record)
        raise RuntimeError(f"idempotency key could not be claimed after {_CLAIM_ATTEMPTS} attempts")

    async def expire_idempotency_keys(self, older_than: datetime) -> int:
        rows = await self._fetch(
            "DELETE FROM idempotency_keys WHERE created_at < $1 RETURNING key", older_than
        )
        return len(rows)
