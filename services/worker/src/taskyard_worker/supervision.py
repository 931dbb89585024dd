"""What the worker's supervisor (``supervisor.py``) does when a child process ends: the pure decisions.

A worker child killed by a signal (SIGKILL, SIGSEGV, the OOM killer: a poison task, a crash) is started again
at once: a fork of the warm parent costs a connection, not an interpreter start and its imports. A child that
keeps dying before it ever consumed (a crash loop: the start itself crashes) is started again after a
growing pause, so that it cannot spin. A child that exits with a code of its own ends the supervisor with the
same code, as the single process did: 0 (stopped: SIGTERM, job mode's idle exit), 1 (RabbitMQ or PostgreSQL
unreachable: the orchestrator restarts the pod with back-off), 2 (the configuration is wrong).

Pure functions, unit-tested without processes (like ``crashes.py``).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

# Crashes in a row before any consumption that restart at once; each one past them doubles the pause.
FREE_RESTARTS = 3
BACKOFF_BASE_SECONDS = 0.5
BACKOFF_MAX_SECONDS = 30.0


class Role(enum.StrEnum):
    """What a worker child consumes (besides its control queue)."""

    ALL = "all"  # the main queues and the quarantine queue (one process: unsupervised, or job mode)
    MAIN = "main"  # the main queues; serves health and metrics
    MAIN_MORE = "main-more"  # the main queues too, beside the MAIN child; serves nothing
    QUARANTINE = "quarantine"  # the quarantine queue only: a poison crash there kills no healthy task

    @property
    def main_queues(self) -> bool:
        return self is not Role.QUARANTINE

    @property
    def quarantine_queue(self) -> bool:
        return self in (Role.ALL, Role.QUARANTINE)

    @property
    def serves_health(self) -> bool:
        """One child per pod serves its health and metrics port (the others would find it taken)."""
        return self in (Role.ALL, Role.MAIN)


def child_roles(*, job_mode: bool, quarantine_children: int = 1, main_children: int = 1) -> tuple[Role, ...]:
    """The children one supervisor keeps running: ``main_children`` on the main queues, which share the
    specialist's concurrency (``main_share``), and ``quarantine_children`` quarantine ones (each runs one
    suspect at a time; 0: the first main child consumes the quarantine queue too). A job (KEDA ScaledJob)
    stays one process: its idle exit ends the Job, and another child would keep it alive."""
    if job_mode:
        return (Role.ALL,)
    more = (Role.MAIN_MORE,) * (max(1, main_children) - 1)
    if quarantine_children == 0:
        return (Role.ALL, *more)
    return (Role.MAIN, *more, *(Role.QUARANTINE,) * quarantine_children)


def main_share(concurrency: int, main_children: int) -> int:
    """One main child's concurrency: the specialist's, split between ``main_children`` (rounded up, at
    least one each). A poison task's crash takes only its own child's tasks with it, so the smaller each
    child's share the fewer healthy tasks a crash moves to quarantine and returns to the queue."""
    return max(1, -(-concurrency // max(1, main_children)))


@dataclass(frozen=True)
class Restart:
    """Start a new child in the dead one's role after ``delay_seconds``."""

    delay_seconds: float


@dataclass(frozen=True)
class Exit:
    """Stop the other children and exit with ``code``."""

    code: int


def restart_delay(unready_crashes: int) -> float:
    """The pause before restarting a child whose predecessors died ``unready_crashes`` times in a row before
    they consumed (0: the last one had consumed)."""
    past = unready_crashes - FREE_RESTARTS
    if past <= 0:
        return 0.0
    return min(BACKOFF_MAX_SECONDS, BACKOFF_BASE_SECONDS * 2.0 ** (past - 1))


def unready_streak(previous: int, *, was_ready: bool) -> int:
    """The crashes in a row before consuming, counting the one that just ended a child."""
    return 0 if was_ready else previous + 1


def after_child_exit(exit_code: int, *, stopping: bool, unready_crashes: int) -> Restart | Exit:
    """The decision for a child that ended with ``exit_code`` (``os.waitstatus_to_exitcode``: negative for
    a signal); ``stopping``: the supervisor is shutting down; ``unready_crashes``: as ``unready_streak``."""
    if stopping:
        return Exit(max(exit_code, 0))
    if exit_code < 0:
        return Restart(restart_delay(unready_crashes))
    return Exit(exit_code)


def stop_code(codes: list[int]) -> int:
    """The supervisor's exit code once every child ended while stopping: the first failure, else 0."""
    return next((code for code in codes if code > 0), 0)
