"""What a schedule's task must satisfy beyond its model: the checks of POST /v1/tasks, and its template."""

from __future__ import annotations

from taskyard_api.http.problems import Problem, ProblemException
from taskyard_api.models import TaskSubmission
from taskyard_api.settings import ServiceSettings
from taskyard_api.submission.checks import (
    check_input_size,
    check_specialist,
    check_timeout,
    check_webhook,
)
from taskyard_common.catalog import Catalog
from taskyard_common.store.schedule_records import TaskTemplate


def _within_task(problem: Problem) -> Problem:
    """The same problem, its fields located under ``task`` (``["body", "task", "timeout_seconds"]``)."""
    if not problem.errors:
        return problem
    errors = [
        e.model_copy(update={"loc": ["body", "task", *e.loc[1:]] if e.loc[:1] == ["body"] else e.loc})
        for e in problem.errors
    ]
    return problem.model_copy(update={"errors": errors})


def check_task(submission: TaskSubmission, catalog: Catalog, settings: ServiceSettings) -> None:
    """POST /v1/tasks's checks against the catalog and the settings, each a 422 naming ``task``'s field."""
    try:
        check_specialist(submission.specialist, catalog)
        check_timeout(submission.timeout_seconds, submission.specialist, catalog)
        check_input_size(submission.input, settings)
        check_webhook(submission, settings)
    except ProblemException as exc:
        raise ProblemException(_within_task(exc.problem), exc.headers) from None


def template(submission: TaskSubmission) -> TaskTemplate:
    """What every occurrence submits (a checked submission without not_before or deadline)."""
    return TaskTemplate(
        input=submission.input,
        specialist=submission.specialist,
        metadata=submission.metadata,
        timeout_seconds=submission.timeout_seconds,
        webhook=submission.webhook.model_dump(mode="json") if submission.webhook is not None else None,
        priority=submission.priority,
    )
