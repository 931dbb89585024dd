"""The task store: a small interface (``TaskStore``) and its PostgreSQL implementation."""

from taskyard_common.store.base import NewTask, TaskRecord, TaskStore
from taskyard_common.store.postgres import PostgresTaskStore

__all__ = ["NewTask", "PostgresTaskStore", "TaskRecord", "TaskStore"]
