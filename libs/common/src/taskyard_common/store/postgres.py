"""PostgreSQL implementation of ``TaskStore`` on an asyncpg pool.

The class is assembled from one mixin per concern: submissions (``create``), reads, the transitions
(``start`` in its own module), the step checkpoints, idempotency keys and the dead-letter reads.
"""

from __future__ import annotations

import asyncpg

from taskyard_common.errors import StoreUnavailable
from taskyard_common.settings import DbSettings
from taskyard_common.store._pg import UNAVAILABLE, PoolStore, init_connection, keep_session
from taskyard_common.store.connecting import check_schema, connection_options
from taskyard_common.store.dead_letters import DeadLetterQueries
from taskyard_common.store.events import EventQueries
from taskyard_common.store.idempotency import IdempotencyQueries
from taskyard_common.store.parking import ParkingQueries
from taskyard_common.store.parts import PartsQueries
from taskyard_common.store.reads import ReadQueries
from taskyard_common.store.steps import StepQueries
from taskyard_common.store.submissions import SubmissionQueries
from taskyard_common.store.tenant_limits import TenantLoadQueries
from taskyard_common.store.transitions import TransitionQueries
from taskyard_common.store.workflows import WorkflowQueries

__all__ = ["PostgresTaskStore"]


class PostgresTaskStore(
    SubmissionQueries,
    ReadQueries,
    TransitionQueries,
    WorkflowQueries,
    PartsQueries,
    StepQueries,
    EventQueries,
    DeadLetterQueries,
    IdempotencyQueries,
    TenantLoadQueries,
    ParkingQueries,
    PoolStore,
):
    @classmethod
    async def open(cls, settings: DbSettings) -> PostgresTaskStore:
        try:
            pool = await asyncpg.create_pool(
                settings.url.get_secret_value(),
                min_size=settings.pool_min_size,
                max_size=settings.pool_max_size,
                command_timeout=settings.command_timeout_seconds,
                # Connecting, too, must not take asyncpg's default minute when the server does not answer.
                timeout=settings.command_timeout_seconds,
                init=init_connection,
                reset=keep_session,
                **connection_options(settings, "taskyard"),
            )
        except UNAVAILABLE as exc:
            raise StoreUnavailable(f"cannot connect to PostgreSQL: {type(exc).__name__}") from exc
        try:
            await check_schema(pool, settings)
        except BaseException:
            await pool.close()
            raise
        return cls(pool, acquire_timeout=settings.command_timeout_seconds)

    async def ping(self) -> None:
        await self._fetchrow("SELECT 1")
