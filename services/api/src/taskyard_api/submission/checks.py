"""What a submission must satisfy beyond its model, against the catalog and the settings: each a 422.

The checks take a field's value and where it is (``loc``), so a group's tasks and a chain's steps are
checked like a single submission and their errors name the very field."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

from taskyard_api.http.problems import UNKNOWN_SPECIALIST, VALIDATION_ERROR, FieldError, ProblemException
from taskyard_api.models import TaskSubmission
from taskyard_api.settings import ServiceSettings
from taskyard_api.workflows.documents import GroupSubmission
from taskyard_common.catalog import Catalog
from taskyard_common.webhooks import literal_address, refusal

Loc = tuple[str | int, ...]


def _where(loc: Loc) -> str:
    """``("body", "then", 1, "specialist")`` → ``then[1].specialist``."""
    text = ""
    for part in loc[1:]:
        text += f"[{part}]" if isinstance(part, int) else f".{part}" if text else part
    return text


def check_submission(submission: TaskSubmission, catalog: Catalog, settings: ServiceSettings) -> None:
    """Everything ``POST /v1/tasks`` checks beyond the model, its chain's steps included."""
    check_specialist(submission.specialist, catalog)
    for index, step in enumerate(submission.then or ()):
        check_specialist(step.specialist, catalog, ("body", "then", index, "specialist"))
    check_timeout(submission.timeout_seconds, submission.specialist, catalog)
    check_input_size(submission.input, settings)
    check_webhook(submission, settings)


def check_group(submission: GroupSubmission, catalog: Catalog, settings: ServiceSettings) -> None:
    """Every task of a group checked like a submission (the first error answers), and its reduce step."""
    for index, task in enumerate(submission.tasks):
        check_specialist(task.specialist, catalog, ("body", "tasks", index, "specialist"))
        check_timeout(
            task.timeout_seconds, task.specialist, catalog, ("body", "tasks", index, "timeout_seconds")
        )
        check_input_size(task.input, settings, ("body", "tasks", index, "input"))
    if submission.reduce is not None:
        check_specialist(submission.reduce.specialist, catalog, ("body", "reduce", "specialist"))


def check_specialist(name: str | None, catalog: Catalog, loc: Loc = ("body", "specialist")) -> None:
    """A named specialist must be in the catalog."""
    if name is not None and catalog.get(name) is None:
        where = "" if loc == ("body", "specialist") else f" ({_where(loc)})"
        raise ProblemException(
            UNKNOWN_SPECIALIST(
                f"There is no specialist named {name!r}{where}.", known_specialists=catalog.names
            )
        )


def check_timeout(
    timeout_seconds: float | None,
    specialist: str | None,
    catalog: Catalog,
    loc: Loc = ("body", "timeout_seconds"),
) -> None:
    """``timeout_seconds`` may not exceed what the specialist (or, unrouted, any specialist) allows."""
    if timeout_seconds is None:
        return
    spec = catalog.get(specialist) if specialist is not None else None
    if spec is not None:
        ceiling, whose = spec.max_timeout_seconds, f"max_timeout_seconds of {spec.name!r}"
    else:
        ceiling = max(s.max_timeout_seconds for s in catalog.specialists)
        whose = "the largest max_timeout_seconds in the catalog"
    if timeout_seconds > ceiling:
        raise ProblemException(
            VALIDATION_ERROR(
                f"{_where(loc)} may be at most {ceiling:g} ({whose}).",
                errors=[
                    FieldError(
                        loc=list(loc),
                        msg=f"Input should be less than or equal to {ceiling:g}",
                        type="less_than_equal",
                    )
                ],
            )
        )


def input_size(value: Any) -> int:
    """Bytes of ``value``'s compact JSON encoding in UTF-8: what the store and every message carry."""
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))


def check_input_size(value: Any, settings: ServiceSettings, loc: Loc = ("body", "input")) -> None:
    """A task ``input`` over ``TASKYARD_API_MAX_INPUT_BYTES`` is a 422 naming the field."""
    limit = settings.api.max_input_bytes
    size = input_size(value)
    if size > limit:
        raise ProblemException(
            VALIDATION_ERROR(
                f"{_where(loc)} is {size} bytes as JSON; it may be at most {limit} bytes.",
                errors=[
                    FieldError(
                        loc=list(loc),
                        msg=f"input may be at most {limit} bytes (UTF-8 JSON encoding)",
                        type="input_too_large",
                    )
                ],
            )
        )


def check_webhook(submission: TaskSubmission, settings: ServiceSettings) -> None:
    """A webhook URL whose host is an address the rules refuse (private, loopback, ... under the default
    settings) is a 422 now; a host name is checked by the dispatcher at every attempt."""
    if submission.webhook is None:
        return
    host = urlsplit(submission.webhook.url).hostname or ""
    address = literal_address(host)
    reason = refusal(address, settings.webhook) if address is not None else None
    if reason is not None:
        raise ProblemException(
            VALIDATION_ERROR(
                f"webhook.url is refused: {reason}.",
                errors=[
                    FieldError(
                        loc=["body", "webhook", "url"],
                        msg=f"address refused: {reason}",
                        type="webhook_address_refused",
                    )
                ],
            )
        )
