"""What a request's free-form values (a task's input, its metadata, a step's instructions) may hold: only
what the task store and the message encoder can take, so anything else is a 422, never a 500."""

from __future__ import annotations

import math
from typing import Annotated, Any

from pydantic import StringConstraints

from taskyard_common.messages import TaskInput

# Beyond this, serialisers (pydantic's, PostgreSQL's) refuse or recurse too deep: refuse it up front as 422
# instead of failing later as a 500.
MAX_INPUT_DEPTH = 32
MAX_METADATA_ENTRIES = 64

MetadataKey = Annotated[str, StringConstraints(min_length=1, max_length=128)]
MetadataValue = Annotated[str, StringConstraints(max_length=1024)]


def check_text(text: str) -> None:
    # PostgreSQL's jsonb cannot store NUL characters, and lone surrogates are not encodable as UTF-8.
    if "\x00" in text:
        raise ValueError("text must not contain NUL (\\u0000) characters")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("text must be valid Unicode (no lone surrogates)") from None


def check_json_value(value: Any, depth: int = 0) -> None:
    """Refuse what the task store or the message encoder could not take."""
    if depth > MAX_INPUT_DEPTH:
        raise ValueError(f"input is nested deeper than {MAX_INPUT_DEPTH} levels")
    if isinstance(value, str):
        check_text(value)
    elif isinstance(value, dict):
        for key, item in value.items():
            check_text(key)
            check_json_value(item, depth + 1)
    elif isinstance(value, list):
        for item in value:
            check_json_value(item, depth + 1)
    elif isinstance(value, float) and not math.isfinite(value):
        raise ValueError("numbers must be finite (no NaN or Infinity)")


def usable_input(value: TaskInput) -> TaskInput:
    """A task's ``input``: non-empty text or a non-empty object, storable."""
    if isinstance(value, str) and not value.strip():
        raise ValueError("input must not be empty")
    if isinstance(value, dict) and not value:
        raise ValueError("input must not be an empty object")
    check_json_value(value)
    return value


def storable_metadata(value: dict[str, str]) -> dict[str, str]:
    check_json_value(value)
    return value


def storable_text(value: str | None) -> str | None:
    if value is not None:
        check_text(value)
    return value
