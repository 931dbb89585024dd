"""The one way a taskyard service process starts and ends: settings, logging, run, exit code.

Exit codes are the contract with Kubernetes and ``make up``:

- ``0``: stopped cleanly (SIGTERM, SIGINT, job mode's idle exit);
- ``1`` (``EXIT_UNAVAILABLE``): RabbitMQ or PostgreSQL unreachable, or the topology conflicts: restarting
  later may help, so the orchestrator restarts the process with back-off;
- ``2`` (``EXIT_CONFIG``): the configuration is wrong (settings, catalog, specialist, tools): restarting
  cannot help until someone changes it.

Configuration errors are printed by field name and reason only: a rejected value may be a URL with a
password or an API key.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import NoReturn, TypeVar

from pydantic import ValidationError

from taskyard_common.catalog import CatalogError
from taskyard_common.errors import TaskyardError
from taskyard_common.logging import configure_logging
from taskyard_common.settings import LogSettings

EXIT_OK = 0
EXIT_UNAVAILABLE = 1
EXIT_CONFIG = 2

S = TypeVar("S")

log = logging.getLogger(__name__)


class ConfigurationError(Exception):
    """A service's configuration cannot work (an unknown specialist, a tool that does not exist): say so
    and exit with ``EXIT_CONFIG``. Never carries a secret in its message."""


def describe_invalid_settings(exc: ValidationError) -> str:
    """Each invalid setting by name and reason, never its value (it may be a credential)."""
    lines = []
    for error in exc.errors():
        where = ".".join(str(part) for part in error.get("loc", ())) or "<settings>"
        lines.append(f"  {where}: {error.get('msg', 'invalid')}")
    return "\n".join(lines)


def fail_config(program: str, message: str) -> NoReturn:
    print(f"{program}: {message}", file=sys.stderr)
    sys.exit(EXIT_CONFIG)


def run_service(
    program: str,
    *,
    load_settings: Callable[[], S],
    log_settings: Callable[[S], LogSettings],
    run: Callable[[S], None],
    log_filters: Sequence[logging.Filter] = (),
    unavailable: Iterable[type[BaseException]] = (TaskyardError, OSError),
) -> None:
    """Build the settings (invalid: print and exit 2), configure logging, call ``run`` (which blocks until
    the service stops) and map how it ended onto an exit code. ``program`` names the process in logs."""
    try:
        settings = load_settings()
    except ValidationError as exc:
        fail_config(program, f"invalid configuration:\n{describe_invalid_settings(exc)}")
    configure_logging(log_settings(settings), program, filters=list(log_filters))
    code = exit_code(lambda: run(settings), unavailable)
    if code != EXIT_OK:
        sys.exit(code)
    log.info("exited cleanly")


def exit_code(
    run: Callable[[], None], unavailable: Iterable[type[BaseException]] = (TaskyardError, OSError)
) -> int:
    """Call ``run`` (it blocks until the service stops) and map how it ended onto an exit code (see the
    module); anything else propagates. Also what a forked child of a supervisor (the worker's) exits with."""
    try:
        run()
    except (ConfigurationError, CatalogError) as exc:
        log.error("cannot start: %s", exc)
        return EXIT_CONFIG
    except tuple(unavailable) as exc:
        # One line: the broker or the database is away, or the topology conflicts. The orchestrator
        # restarts the process (with back-off).
        log.error("cannot run: %s: %s", type(exc).__name__, exc)
        return EXIT_UNAVAILABLE
    return EXIT_OK
