"""What a submission must satisfy beyond its model, against the catalog and the settings: each a 422."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

from taskyard_api.http.problems import UNKNOWN_SPECIALIST, VALIDATION_ERROR, FieldError, ProblemException
from taskyard_api.models import TaskSubmission
from taskyard_api.settings import ServiceSettings
from taskyard_common.catalog import Catalog
from taskyard_common.webhooks import literal_address, refusal


def check_specialist(submission: TaskSubmission, catalog: Catalog) -> None:
    """A named ``specialist`` must be in the catalog."""
    if submission.specialist is not None and catalog.get(submission.specialist) is None:
        raise ProblemException(
            UNKNOWN_SPECIALIST(
                f"There is no specialist named {submission.specialist!r}.", known_specialists=catalog.names
            )
        )


def check_timeout(submission: TaskSubmission, catalog: Catalog) -> None:
    """``timeout_seconds`` may not exceed what the specialist (or, unrouted, any specialist) allows."""
    if submission.timeout_seconds is None:
        return
    spec = catalog.get(submission.specialist) if submission.specialist is not None else None
    if spec is not None:
        ceiling, whose = spec.max_timeout_seconds, f"max_timeout_seconds of {spec.name!r}"
    else:
        ceiling = max(s.max_timeout_seconds for s in catalog.specialists)
        whose = "the largest max_timeout_seconds in the catalog"
    if submission.timeout_seconds > ceiling:
        raise ProblemException(
            VALIDATION_ERROR(
                f"timeout_seconds may be at most {ceiling:g} ({whose}).",
                errors=[
                    FieldError(
                        loc=["body", "timeout_seconds"],
                        msg=f"Input should be less than or equal to {ceiling:g}",
                        type="less_than_equal",
                    )
                ],
            )
        )


def input_size(value: Any) -> int:
    """Bytes of ``value``'s compact JSON encoding in UTF-8: what the store and every message carry."""
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))


def check_input_size(value: Any, settings: ServiceSettings) -> None:
    """A task ``input`` over ``TASKYARD_API_MAX_INPUT_BYTES`` is a 422 naming the field."""
    limit = settings.api.max_input_bytes
    size = input_size(value)
    if size > limit:
        raise ProblemException(
            VALIDATION_ERROR(
                f"input is {size} bytes as JSON; it may be at most {limit} bytes.",
                errors=[
                    FieldError(
                        loc=["body", "input"],
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
