"""A single task's document with its links: its chain so far (and so its next step) and the tasks it
delegated to, read in one query. Lists leave them out (null): they would cost a read per task.

The links are what the store holds when the document is read; a document's ``ETag`` follows the task itself,
not the tasks it links (follow those by their own documents)."""

from __future__ import annotations

from typing import Any

from taskyard_api.models import TaskDocument
from taskyard_api.workflows.documents import ChainLink, ChildLink
from taskyard_common.lifecycle import TaskStatus
from taskyard_common.store import TaskRecord, TaskStore


def _chain_link(row: dict[str, Any]) -> ChainLink:
    return ChainLink(
        id=row["id"], index=row["chain_index"], status=row["status"], specialist=row["specialist"]
    )


def child_link(row: dict[str, Any]) -> ChildLink:
    return ChildLink(id=row["id"], status=row["status"], specialist=row["specialist"])


def new_task_document(record: TaskRecord) -> TaskDocument:
    """The document of a task just created: nothing to read, it links nothing yet but itself."""
    chain = None
    if record.chain_root_id is not None:
        chain = [
            ChainLink(
                id=record.id,
                index=record.chain_index or 0,
                status=record.status,
                specialist=record.specialist or record.requested_specialist,
            )
        ]
    return TaskDocument.from_record(record, chain=chain, children=[])


async def task_document(store: TaskStore, record: TaskRecord) -> TaskDocument:
    """``record``'s document with its links (one read, none for a task that never left ``pending``
    and is no chain's: it cannot have delegated anything)."""
    if record.chain_root_id is None and record.status is TaskStatus.PENDING:
        return TaskDocument.from_record(record, children=[])
    steps, children = await store.links(record.id, record.chain_root_id)
    return TaskDocument.from_record(
        record,
        chain=[_chain_link(s) for s in steps] if record.chain_root_id is not None else None,
        children=[child_link(c) for c in children],
    )
