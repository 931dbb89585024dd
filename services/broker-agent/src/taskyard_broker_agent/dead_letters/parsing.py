"""What a dead-lettered message says: its task, why and where it died, its death history, its specialist.

Why and where a message died is read from its LATEST death: an intake message that waited in a delay queue
carries an ``expired`` death there (that is how a delay ends), and ``x-first-death-*`` keeps reporting it
even when the message is later rejected or redelivered too often in the intake queue. RabbitMQ lists
``x-death`` newest first; 3.13 and later also send ``x-last-death-*``. Header values arrive as ``str`` or
``bytes`` depending on the client and broker, timestamps as ``datetime``: everything kept is made JSON-safe
and storable in PostgreSQL's jsonb.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from typing import Any
from uuid import UUID

from taskyard_common import metrics
from taskyard_common.topology import Topology

KNOWN_REASONS = frozenset(metrics.DEAD_LETTER_REASONS) - {"unknown"}
UNKNOWN = "unknown"
# A body that is not a JSON object is kept as text, cut to this many characters.
RAW_TEXT_MAX = 16_000
_SPECIALIST = re.compile(r"^[a-z][a-z0-9-]{0,62}$")


@dataclass(frozen=True)
class DeadLetter:
    """What one dead-lettered message says, parsed from its body and headers."""

    task_id: UUID | None
    reason: str
    queue: str
    deaths: list[dict[str, Any]]
    message: dict[str, Any]
    specialist: str | None


def json_safe(value: Any) -> Any:
    """AMQP header values as JSON: timestamps as ISO strings, byte strings as text, tables and arrays
    recursively; anything else unknown as its ``str``."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if value == value and value not in (float("inf"), float("-inf")) else str(value)
    if isinstance(value, bytes | bytearray | memoryview):
        raw = bytes(value)
        try:
            return raw.decode()
        except UnicodeDecodeError:
            return "base64:" + base64.b64encode(raw).decode()
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, Mapping):
        return {str(json_safe(k)): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    return str(value)


def storable(value: Any) -> Any:
    """``value`` without NUL characters (U+0000), which PostgreSQL's jsonb refuses: a body or header
    holding one would otherwise never be recorded. A task's own input cannot contain one (the task row
    could not hold it either), so replacing it loses nothing a replay needs."""
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd")
    if isinstance(value, dict):
        return {storable(k): storable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [storable(v) for v in value]
    return value


def _text(value: Any) -> str | None:
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode(errors="replace")
    if isinstance(value, str):
        return value
    return None


def normalise_reason(value: Any) -> str:
    """``rejected``, ``expired``, ``maxlen``, ``delivery_limit``; anything else (or nothing) ``unknown``."""
    text = _text(value)
    if not text:
        return UNKNOWN
    reason = text.strip().lower().replace("-", "_")
    return reason if reason in KNOWN_REASONS else UNKNOWN


def death_history(headers: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The ``x-death`` entries (newest first), JSON-safe; entries that are not tables are skipped."""
    deaths = headers.get("x-death")
    if not isinstance(deaths, list | tuple):
        return []
    return [json_safe(entry) for entry in deaths if isinstance(entry, Mapping)]


def latest_death(headers: Mapping[str, Any]) -> tuple[str, str]:
    """(reason, queue) of the message's most recent death: ``x-last-death-*`` (RabbitMQ 3.13+), else the
    first ``x-death`` entry, else ``x-first-death-*``."""
    deaths = headers.get("x-death")
    newest = (
        deaths[0] if isinstance(deaths, list | tuple) and deaths and isinstance(deaths[0], Mapping) else {}
    )
    for reason_raw, queue_raw in (
        (headers.get("x-last-death-reason"), headers.get("x-last-death-queue")),
        (newest.get("reason"), newest.get("queue")),
        (headers.get("x-first-death-reason"), headers.get("x-first-death-queue")),
    ):
        if _text(reason_raw):
            return normalise_reason(reason_raw), _text(queue_raw) or UNKNOWN
    return UNKNOWN, _text(headers.get("x-first-death-queue")) or UNKNOWN


def parse_body(body: bytes) -> dict[str, Any]:
    """The JSON object in the body, or ``{"raw": <text, cut>}`` for anything else."""
    try:
        parsed = json.loads(body)
    except ValueError:  # not JSON, or not UTF-8
        parsed = None
    if isinstance(parsed, dict):
        return parsed
    return {"raw": body.decode(errors="replace")[:RAW_TEXT_MAX]}


def _uuid(value: Any) -> UUID | None:
    text = _text(value)
    if not text:
        return None
    try:
        return UUID(text)
    except ValueError:
        return None


def specialist_of(message: Mapping[str, Any], queue: str, topology: Topology) -> str | None:
    """A work message names its specialist; otherwise a specialist or quarantine queue does."""
    named = message.get("specialist")
    if isinstance(named, str) and _SPECIALIST.match(named):
        return named
    for prefix in (topology.specialist_queue(""), topology.quarantine_queue("")):
        # A work queue's name ends with its level (``.high``, ``.low``; none for normal).
        name = queue[len(prefix) :].removesuffix(".high").removesuffix(".low")
        if queue.startswith(prefix) and _SPECIALIST.match(name):
            return name
    return None


def parse_dead_letter(
    body: bytes, headers: Mapping[str, Any] | None, message_id: str | None, topology: Topology
) -> DeadLetter:
    headers = headers or {}
    message = parse_body(body)
    reason, queue = latest_death(headers)
    return DeadLetter(
        task_id=_uuid(message_id) or _uuid(message.get("task_id")),
        reason=reason,
        queue=queue,
        deaths=storable(death_history(headers)),
        message=storable(message),
        specialist=specialist_of(message, queue, topology),
    )
