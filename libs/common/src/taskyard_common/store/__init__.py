"""The task store: a small interface (``TaskStore``) and its PostgreSQL implementation."""

from taskyard_common.store.base import (
    DEFAULT_TENANT,
    DeadLetterRecord,
    IdempotentCreate,
    NewTask,
    StartOutcome,
    StartResult,
    TaskRecord,
    TaskStore,
    WaitingAges,
)
from taskyard_common.store.postgres import PostgresTaskStore, StoreUnavailable

__all__ = [
    "DEFAULT_TENANT",
    "DeadLetterRecord",
    "IdempotentCreate",
    "NewTask",
    "PostgresTaskStore",
    "StartOutcome",
    "StartResult",
    "StoreUnavailable",
    "TaskRecord",
    "TaskStore",
    "WaitingAges",
]
