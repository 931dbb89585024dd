"""What the API logged for the answers a client must never see: any 5xx but a 503 (the API's last-resort
middleware logs each unhandled error with its traceback as ``unhandled error in <method> <path>``)."""

from __future__ import annotations

import logging
import re
from pathlib import Path

log = logging.getLogger("chaos")

# A log line of taskyard's text format starts with its date; a traceback's lines do not.
_LOG_LINE = re.compile(r"^\d{4}-\d{2}-\d{2} ")


def unhandled_errors(log_path: Path) -> list[str]:
    """Each ``unhandled error`` entry of the API's log, with its traceback."""
    entries: list[str] = []
    current: list[str] | None = None
    try:
        lines = log_path.read_text(errors="replace").splitlines()
    except OSError:
        return entries
    for line in lines:
        if _LOG_LINE.match(line):
            if current is not None:
                entries.append("\n".join(current))
            current = [line] if "unhandled error" in line else None
        elif current is not None:
            current.append(line)
    if current is not None:
        entries.append("\n".join(current))
    return entries


def error_class(entry: str) -> str:
    """The exception named on a traceback's last line (``module.Class: message`` → ``Class``)."""
    last = entry.rstrip().splitlines()[-1]
    name = last.split(":", 1)[0].strip()
    return name.rsplit(".", 1)[-1] if name and " " not in name else "unknown"


def report(log_path: Path) -> str | None:
    """Log every unhandled error of the API in full; a note naming their classes (None: there were none)."""
    entries = unhandled_errors(log_path)
    if not entries:
        return None
    for entry in entries:
        log.error("chaos: the API answered 5xx (not 503) for:\n%s", entry)
    counts: dict[str, int] = {}
    for entry in entries:
        counts[error_class(entry)] = counts.get(error_class(entry), 0) + 1
    return "API's unhandled errors: " + ", ".join(f"{n}x {name}" for name, n in sorted(counts.items()))
