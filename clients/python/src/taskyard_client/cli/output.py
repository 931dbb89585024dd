"""How the command line speaks: exit codes, JSON on stdout, messages on stderr, errors turned into both.

Everything a task or the API says is untrusted text: it reaches the terminal through ``rich.text.Text``
(never parsed as markup) after ``terminal_safe`` took out control characters (escape sequences could
rewrite the screen or the window title)."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, NoReturn

import typer
from pydantic import BaseModel
from rich.console import Console
from rich.table import Table
from rich.text import Text

from taskyard_client.config import ConfigError
from taskyard_client.errors import ApiError, StreamBroken, TaskyardError, TransportError
from taskyard_client.models import TaskStatus

# Exit codes: 0 completed (or any command that did what it was asked), then one per way a task ends.
OK = 0
ERROR = 1  # the API refused the request, or could not be reached
USAGE = 2  # a command line or profile file mistake (click's own code for usage errors)
FAILED = 3
CANCELLED = 4
DEAD_LETTERED = 5
NOT_FINISHED = 6  # --timeout ran out, or a result was asked of an unfinished task
INTERRUPTED = 130

EXIT_BY_STATUS: dict[str, int] = {
    TaskStatus.COMPLETED: OK,
    TaskStatus.FAILED: FAILED,
    TaskStatus.CANCELLED: CANCELLED,
    TaskStatus.DEAD_LETTERED: DEAD_LETTERED,
}

# C0 and C1 control characters but tab and newline, and DEL.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def exit_code(status: str) -> int:
    """The exit code for a task in ``status``: its own for a final status, NOT_FINISHED otherwise."""
    return EXIT_BY_STATUS.get(status, NOT_FINISHED)


def terminal_safe(text: str) -> str:
    return _CONTROL.sub("", text.replace("\r\n", "\n"))


def safe(text: object, style: str = "") -> Text:
    """Untrusted text as a rich ``Text``: printed as it is, never read as markup."""
    return Text(terminal_safe(str(text)), style=style)


def stdout() -> Console:
    # Into a pipe or file, rich would squeeze tables into 80 columns: give them room instead.
    return Console(highlight=False, soft_wrap=True, width=None if sys.stdout.isatty() else 200)


def table(*columns: str, rest: str, fold: bool = False) -> Table:
    """A borderless table: ``columns`` never wrap; ``rest``, the last, takes the width left (cut with an
    ellipsis, or folded onto more lines with ``fold``)."""
    found = Table(box=None, header_style="dim")
    for name in columns:
        found.add_column(name, no_wrap=True)
    found.add_column(rest, ratio=1, no_wrap=not fold, overflow="fold" if fold else "ellipsis")
    return found


def stderr() -> Console:
    return Console(stderr=True, highlight=False, soft_wrap=True)


def jsonable(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, list):
        return [jsonable(item) for item in value]
    if isinstance(value, dict):
        return {key: jsonable(item) for key, item in value.items()}
    return value


def print_json(value: Any) -> None:
    """One JSON document on stdout, as it is (not through rich: it must stay byte-exact for scripts)."""
    sys.stdout.write(json.dumps(jsonable(value), indent=2, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def print_json_line(value: Any) -> None:
    sys.stdout.write(json.dumps(jsonable(value), ensure_ascii=False, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def print_answer(text: str) -> None:
    """The answer on stdout: as it is into a pipe or file, without control characters on a terminal."""
    sys.stdout.write((terminal_safe(text) if sys.stdout.isatty() else text).rstrip("\n") + "\n")
    sys.stdout.flush()


def fail(message: str, code: int = ERROR) -> NoReturn:
    stderr().print(safe(f"taskyard: {message}", "red"))
    raise typer.Exit(code)


@contextmanager
def reporting_errors(json_mode: bool) -> Iterator[None]:
    """Errors as a message on stderr (with ``--json``: the problem document on stdout too) and an exit
    code; never a traceback."""
    try:
        yield
    except ApiError as exc:
        if json_mode:
            print_json({"error": exc.problem})
        hint = (
            " (an API key is needed: --api-key, TASKYARD_API_KEY or a profile)" if exc.status == 401 else ""
        )
        fail(f"{exc}{hint}")
    except StreamBroken as exc:
        fail(f"{exc}; resume with: taskyard watch <id>")
    except TransportError as exc:
        fail(f"cannot reach the API: {exc}")
    except ConfigError as exc:
        fail(str(exc), USAGE)
    except TaskyardError as exc:
        fail(str(exc))
    except KeyboardInterrupt:
        raise typer.Exit(INTERRUPTED) from None
