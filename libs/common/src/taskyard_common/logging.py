"""Logging set-up shared by the services: one line per event, optionally JSON, never secrets or task input."""

from __future__ import annotations

import json
import logging
import re
import sys
from collections.abc import Sequence
from datetime import UTC, datetime

from taskyard_common.settings import LogSettings

# Context a service may stamp on records (with a ``logging.Filter`` on the handlers): printed when present.
CONTEXT_FIELDS = ("request_id",)


def _context(record: logging.LogRecord) -> dict[str, str]:
    return {field: str(value) for field in CONTEXT_FIELDS if (value := getattr(record, field, None))}


class _JsonFormatter(logging.Formatter):
    def __init__(self, service: str) -> None:
        super().__init__()
        self._service = service

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "level": record.levelname.lower(),
            "service": self._service,
            "logger": record.name,
            "msg": record.getMessage(),
            **_context(record),
        }
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry)


# Control characters (line breaks included) and the line separators of Unicode: escaped in text logs.
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029]")


def escape_controls(text: str) -> str:
    """``text`` on one line: every control character as ``\\xNN`` (``\\uNNNN``), so a value that came from a
    request (a percent-decoded path holding ``%0a``) cannot start a forged log line."""
    return _CONTROL.sub(lambda m: m.group(0).encode("unicode_escape").decode("ascii"), text)


class _TextFormatter(logging.Formatter):
    def __init__(self, service: str) -> None:
        super().__init__(f"%(asctime)s %(levelname)s {service} %(name)s%(log_context)s: %(message)s")

    def formatMessage(self, record: logging.LogRecord) -> str:
        context = " ".join(f"{key}={value}" for key, value in _context(record).items())
        record.log_context = f" [{context}]" if context else ""
        # One line per event: the message is escaped (a traceback, appended after this, keeps its lines).
        record.message = escape_controls(record.message)
        return super().formatMessage(record)


def configure_logging(settings: LogSettings, service: str, filters: Sequence[logging.Filter] = ()) -> None:
    """One handler on the root logger; ``filters`` (e.g. one adding a request id) see every record."""
    handler = logging.StreamHandler(sys.stderr)
    for log_filter in filters:
        handler.addFilter(log_filter)
    if settings.json_format:
        handler.setFormatter(_JsonFormatter(service))
    else:
        handler.setFormatter(_TextFormatter(service))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(settings.level.upper())
    # Per-request noise from the libraries; their warnings still show.
    for noisy in ("aiormq", "aio_pika", "httpx", "httpx2", "openai", "uvicorn.access"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))
