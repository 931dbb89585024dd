"""The task store: a small interface (``TaskStore``) and its PostgreSQL implementation."""

from taskyard_common.store._pg import DRIVER_UNAVAILABLE
from taskyard_common.store.interface import TaskStore
from taskyard_common.store.postgres import PostgresTaskStore
from taskyard_common.store.records import (
    DEFAULT_TENANT,
    DeadLetterRecord,
    DeferralReason,
    IdempotentCreate,
    NewTask,
    RoutedTask,
    StartOutcome,
    StartResult,
    Step,
    TaskRecord,
    WaitingAges,
    WorkflowCounts,
)

__all__ = [
    "DEFAULT_TENANT",
    "DRIVER_UNAVAILABLE",
    "DeadLetterRecord",
    "DeferralReason",
    "IdempotentCreate",
    "NewTask",
    "PostgresTaskStore",
    "RoutedTask",
    "StartOutcome",
    "StartResult",
    "Step",
    "TaskRecord",
    "TaskStore",
    "WaitingAges",
    "WorkflowCounts",
]
