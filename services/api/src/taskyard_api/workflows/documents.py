"""The JSON documents of workflows: a chain's steps, a group's submission and its document, and the links a
task's document shows."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field, field_validator

from taskyard_api.json_values import (
    MAX_METADATA_ENTRIES,
    MetadataKey,
    MetadataValue,
    storable_metadata,
    storable_text,
    usable_input,
)
from taskyard_common.lifecycle import TaskStatus
from taskyard_common.messages import Priority, TaskInput
from taskyard_common.store.groups import GroupRecord

MAX_CHAIN_STEPS = 20
MAX_INSTRUCTIONS_CHARS = 4000
MAX_GROUP_TASKS = 1000


def _specialist() -> Any:
    return Field(
        default=None,
        min_length=1,
        max_length=63,
        description="Run on this specialist (see GET /v1/specialists); default: the router chooses",
    )


def _instructions() -> Any:
    return Field(
        default=None,
        min_length=1,
        max_length=MAX_INSTRUCTIONS_CHARS,
        description="Extra instructions for its agent, after the specialist's own (at most 4000 characters)",
    )


class ChainStep(BaseModel):
    """A step that runs once the one before it completed, with that step's output as its input."""

    model_config = ConfigDict(extra="forbid")

    specialist: str | None = _specialist()
    instructions: str | None = _instructions()

    _storable = field_validator("instructions")(storable_text)


class ChainLink(BaseModel):
    """One step of a chain, as a task's document links it."""

    id: UUID
    index: int = Field(description="Its place in the chain: 0 for the task submitted, then 1, 2, ...")
    status: TaskStatus
    specialist: str | None = Field(description="Its specialist (the one asked for until it is routed)")


class ChildLink(BaseModel):
    """A task created by another: a delegated task, or a group's child."""

    id: UUID
    status: TaskStatus
    specialist: str | None = Field(description="Its specialist (the one asked for until it is routed)")


class GroupRef(BaseModel):
    """The group a task belongs to, and its part in it."""

    id: UUID
    role: Literal["child", "reduce"] = Field(description="child, or reduce: the step run on their outcomes")


def group_path(group_id: UUID) -> str:
    return f"/v1/task-groups/{group_id}"


# --- groups ------------------------------------------------------------------------------------------------


class GroupTaskRequest(BaseModel):
    """One task of a group: as a submission, without chains or webhooks."""

    model_config = ConfigDict(extra="forbid")

    input: TaskInput = Field(description="The task: non-empty text, or a non-empty JSON object")
    specialist: str | None = _specialist()
    metadata: dict[MetadataKey, MetadataValue] = Field(
        default_factory=dict, max_length=MAX_METADATA_ENTRIES, description="Free-form string labels"
    )
    timeout_seconds: float | None = Field(
        default=None,
        gt=0,
        allow_inf_nan=False,
        description="Run time of one attempt, at most the specialist's max_timeout_seconds",
    )

    _input_is_usable = field_validator("input")(usable_input)
    _metadata_is_storable = field_validator("metadata")(storable_metadata)


class ReduceRequest(BaseModel):
    """The step that runs once every child is finished, on their outcomes."""

    model_config = ConfigDict(extra="forbid")

    specialist: str | None = _specialist()
    instructions: str | None = _instructions()

    _storable = field_validator("instructions")(storable_text)


class GroupSubmission(BaseModel):
    """``POST /v1/task-groups``: tasks run in parallel, and optionally a step that combines their outcomes."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "tasks": [{"input": "Summarize report A."}, {"input": "Summarize report B."}],
                    "reduce": {"specialist": "summarizer", "instructions": "One paragraph for both."},
                }
            ]
        },
    )

    tasks: list[GroupTaskRequest] = Field(min_length=1, max_length=MAX_GROUP_TASKS, description="1 to 1000")
    reduce: ReduceRequest | None = Field(
        default=None,
        description="Run once after the last task finished, its input their outcomes (id, status, output or "
        "error); default: no such step",
    )
    priority: Priority = Field(
        default=Priority.NORMAL, description="The priority of every task of the group and of its reduce step"
    )
    metadata: dict[MetadataKey, MetadataValue] = Field(
        default_factory=dict,
        max_length=MAX_METADATA_ENTRIES,
        description="The group's labels, also the reduce task's",
    )

    _metadata_is_storable = field_validator("metadata")(storable_metadata)


class GroupChildren(BaseModel):
    """A page of a group's children, oldest first; pass ``next_cursor`` as ``cursor`` for the next one."""

    items: list[ChildLink]
    next_cursor: str | None


class GroupLinks(BaseModel):
    self_: str = Field(alias="self", description="This group")
    cancel: str = Field(description="Cancel its unfinished tasks")
    reduce_task: str | None = Field(description="Its reduce task, once created")


class GroupDocument(BaseModel):
    """A group as clients see it."""

    id: UUID
    status: Literal["running", "completed", "failed", "cancelled"] = Field(
        description="running until its children (and its reduce task) finished; then completed (every child "
        "completed, or the reduce task did), failed or cancelled"
    )
    total: int = Field(description="How many tasks it was submitted with")
    counts: dict[str, int] = Field(description="Its children by status (every status, 0 included)")
    children: GroupChildren
    reduce: ReduceRequest | None = Field(description="The reduce step asked for, or null")
    reduce_task_id: UUID | None = Field(description="The reduce task, once the last child finished")
    metadata: dict[str, str]
    created_at: datetime
    finished_at: datetime | None
    cancel_requested_at: datetime | None
    links: GroupLinks

    @classmethod
    def from_record(
        cls, record: GroupRecord, children: list[ChildLink], next_cursor: str | None
    ) -> GroupDocument:
        path = group_path(record.id)
        reduce_path = f"/v1/tasks/{record.reduce_task_id}" if record.reduce_task_id else None
        return cls(
            id=record.id,
            status=record.status,  # type: ignore[arg-type]  # the table's CHECK allows only these
            total=record.total,
            counts={status.value: record.counts.get(status.value, 0) for status in TaskStatus},
            children=GroupChildren(items=children, next_cursor=next_cursor),
            reduce=ReduceRequest.model_validate(record.reduce) if record.reduce is not None else None,
            reduce_task_id=record.reduce_task_id,
            metadata=record.metadata,
            created_at=record.created_at,
            finished_at=record.finished_at,
            cancel_requested_at=record.cancel_requested_at,
            links=GroupLinks.model_validate(
                {"self": path, "cancel": f"{path}/cancel", "reduce_task": reduce_path}
            ),
        )
