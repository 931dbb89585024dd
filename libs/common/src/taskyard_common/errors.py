"""One error taxonomy. The consume helper maps it to ack / retry / dead-letter; handlers never ack by hand."""

from __future__ import annotations

from typing import ClassVar

from taskyard_common.task_errors import TaskErrorType


class TaskyardError(Exception):
    """Base of every error taskyard raises on purpose."""


class PermanentError(TaskyardError):
    """Retrying cannot help (invalid input, unknown specialist, a 4xx from the LLM): fail or dead-letter now."""

    # The ``error.type`` of a task that fails with this error.
    kind: ClassVar[TaskErrorType] = TaskErrorType.PERMANENT_ERROR


class TransientError(TaskyardError):
    """May succeed later (timeouts, 5xx, connection loss, back pressure): retry."""


class InvalidMessage(PermanentError):
    """A message body that is not the JSON model its queue carries."""


class BrokerUnavailable(TransientError):
    """The broker could not be reached or did not confirm in time."""


class PublishRejected(TransientError):
    """The broker nacked a publish: a queue is full (``x-overflow=reject-publish``). Back pressure."""


class Unroutable(PermanentError):
    """A mandatory publish came back: no queue is bound for that routing key."""


class TopologyMismatch(PermanentError):
    """A queue exists with other arguments than the ones taskyard would declare (406 PRECONDITION_FAILED)."""


class StoreUnavailable(TransientError):
    """The database could not be reached; the operation may succeed later."""


class NotAnnounceable(PermanentError):
    """A stored task no message can announce: it is not pending or queued, or was queued without a routing
    decision (written by something other than taskyard's own transitions)."""
