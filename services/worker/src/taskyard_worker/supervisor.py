"""The worker process model: a warm parent that forks the worker children and forks them again when they die.

A poison task kills the process that runs it. A new process costs an interpreter start and every import,
seconds on a busy machine; a fork of a parent that imported everything costs the child's connections only.
So ``taskyard-worker`` runs as a supervisor (``TASKYARD_WORKER_SUPERVISOR``, on by default): the parent
imports everything but starts no event loop, thread or connection, then forks one child per role
(``supervision.child_roles``): one consuming the main queues (it serves health and metrics), one consuming the
quarantine queue alone, so that a suspect that crashes there takes no healthy task with it.

When a child dies by a signal the parent forks its successor at once (``supervision.py``: a pause only for a
crash loop before consuming), then ends the dead child's leases in the store (each child has an owner id of
its own, known to the parent): the messages that its death returned start again at once on the other
children instead of waiting a lease (``crashes.lease_wait``). The tasks stay ``running`` until then, so a
redelivery still counts the crash.

SIGTERM or SIGINT to the parent goes to every child (each stops gracefully, ``app.py``) and the parent exits
after them; SIGHUP (re-read the catalog) goes to every child. A child dies with the parent
(``PR_SET_PDEATHSIG`` on Linux): a SIGKILLed pod leaves no orphan consuming.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import gc
import logging
import os
import select
import signal
import socket
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from taskyard_common.pod_metrics import process_ended
from taskyard_common.settings import DbSettings
from taskyard_common.store import PostgresTaskStore
from taskyard_worker.supervision import Exit, Restart, Role, after_child_exit, stop_code, unready_streak

log = logging.getLogger(__name__)

# A child's body: (role, lease owner id, call once consuming, a child of this supervisor consumed before,
# so the topology is declared) -> exit code.
ChildMain = Callable[[Role, str, Callable[[], None], bool], int]
_PR_SET_PDEATHSIG = 1
_FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def owner_id(pid: int, token: str) -> str:
    """A child's lease owner id: readable (host, pid) and unique (``token``: a pid comes back in a pod)."""
    return f"{socket.gethostname()}:{pid}:{token}"


@dataclass
class Child:
    slot: int  # its index in the supervisor's roles
    role: Role
    owner: str
    ready_fd: int
    started: float
    ready: bool = False
    # For a successor: when its predecessor died (the time to restart is measured from there).
    crashed_at: float | None = None


@dataclass
class _Slot:
    """The restart state of one of the supervisor's children (one per entry of its roles)."""

    role: Role
    unready_crashes: int = 0
    restarts: int = 0
    due: float | None = None  # a restart waiting for its pause
    crashed_at: float | None = None


@dataclass
class Supervisor:
    roles: tuple[Role, ...]
    child_main: ChildMain
    db: DbSettings
    metrics_dir: str | None = None  # ``pod_metrics.share_between_processes``: a dead child's gauges go
    children: dict[int, Child] = field(default_factory=dict)
    stopping: bool = False
    codes: list[int] = field(default_factory=list)
    _slots: list[_Slot] = field(default_factory=list)
    _wake: tuple[int, int] = (-1, -1)
    _consumed: bool = False  # a child consumed: it had declared the topology (a successor need not)
    _pid: int = 0

    def run(self) -> int:
        """Fork the children, keep them running until told to stop (or one exits on its own); the exit code."""
        self._pid = os.getpid()
        self._slots = [_Slot(role) for role in self.roles]
        self._wake = os.pipe()
        for fd in self._wake:
            os.set_blocking(fd, False)
        previous = signal.set_wakeup_fd(self._wake[1])
        handlers = {sig: signal.signal(sig, self._on_signal) for sig in (*_FORWARDED, signal.SIGCHLD)}
        try:
            for index in range(len(self._slots)):
                self._spawn(index, None)
            while self.children or any(s.due is not None for s in self._slots):
                self._wait()
                for pid, status in _reap():
                    self._ended(pid, status)
                now = time.monotonic()
                for index, slot in enumerate(self._slots):
                    if slot.due is not None and (self.stopping or now >= slot.due):
                        slot.due = None
                        if not self.stopping:
                            self._spawn(index, slot.crashed_at)
        finally:
            signal.set_wakeup_fd(previous)
            for sig, handler in handlers.items():
                signal.signal(sig, handler)
            for fd in self._wake:
                os.close(fd)
        return stop_code(self.codes)

    def _on_signal(self, signum: int, _frame: object) -> None:
        if signum == signal.SIGCHLD or os.getpid() != self._pid:
            return  # SIGCHLD: the wakeup fd woke the loop, which reaps; a child not yet past its fork: ignore
        if signum in (signal.SIGTERM, signal.SIGINT) and not self.stopping:
            log.info("%s: stopping the worker children", signal.Signals(signum).name)
            self.stopping = True
        for pid in self.children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signum)

    def _wait(self) -> None:
        """Until a signal, a child's readiness or a pending restart's time."""
        dues = [s.due for s in self._slots if s.due is not None]
        timeout = max(0.0, min(dues) - time.monotonic()) if dues else None
        watched = {c.ready_fd: pid for pid, c in self.children.items() if c.ready_fd >= 0}
        readable, _, _ = select.select([self._wake[0], *watched], [], [], timeout)
        for fd in readable:
            if fd == self._wake[0]:
                with contextlib.suppress(BlockingIOError):
                    os.read(fd, 4096)
                continue
            pid = watched[fd]
            child = self.children[pid]
            ready = bool(os.read(fd, 64))
            os.close(fd)  # once is enough: a child consuming again (a catalog change) says nothing new
            child.ready_fd = -1
            child.ready = ready
            self._consumed = self._consumed or ready
            if ready and child.crashed_at is not None:  # a warning as the death was: both or neither
                log.warning(
                    "%s worker child %d consuming, %.2f s after its predecessor died",
                    child.role, pid, time.monotonic() - child.crashed_at,
                )  # fmt: skip

    def _spawn(self, index: int, crashed_at: float | None) -> None:
        role = self._slots[index].role
        token = uuid.uuid4().hex[:6]
        ready_r, ready_w = os.pipe()
        # Everything the parent allocated so far out of the collector's reach: a child's collections then
        # do not touch (and so copy) the pages it shares with the parent.
        gc.freeze()
        pid = os.fork()
        if pid == 0:  # the child: never returns
            os.close(ready_r)
            _become_child(self._pid, [*self._wake, *(c.ready_fd for c in self.children.values())])

            def ready() -> None:
                with contextlib.suppress(OSError):
                    os.write(ready_w, b"r")

            code = 1
            try:
                code = self.child_main(role, owner_id(os.getpid(), token), ready, self._consumed)
            finally:
                logging.shutdown()
                with contextlib.suppress(Exception):
                    sys.stdout.flush()
                    sys.stderr.flush()
                os._exit(code)
        os.close(ready_w)
        self.children[pid] = Child(
            index, role, owner_id(pid, token), ready_r, time.monotonic(), crashed_at=crashed_at
        )
        log.info("%s worker child started: pid %d", role, pid)

    def _ended(self, pid: int, status: int) -> None:
        child = self.children.pop(pid, None)
        if child is None:
            return  # not ours (a tool's grandchild reparented to a pod's pid 1)
        if child.ready_fd >= 0:
            os.close(child.ready_fd)
        code = os.waitstatus_to_exitcode(status)
        if self.metrics_dir is not None:
            process_ended(pid, self.metrics_dir)
        slot = self._slots[child.slot]
        slot.unready_crashes = unready_streak(slot.unready_crashes, was_ready=child.ready)
        decision = after_child_exit(code, stopping=self.stopping, unready_crashes=slot.unready_crashes)
        if isinstance(decision, Restart):
            slot.restarts += 1
            slot.crashed_at = time.monotonic()
            log.warning(
                "%s worker child %d died (%s): restart #%d in %.1f s",
                child.role, pid, _describe(code), slot.restarts, decision.delay_seconds,
            )  # fmt: skip
            # The leases first: the dead child's messages are being redelivered to the other children now,
            # and each start that finds its task's lease still held waits (a fork takes a moment only).
            self._expire_leases(child.owner)
            if decision.delay_seconds > 0:
                slot.due = slot.crashed_at + decision.delay_seconds
            else:
                self._spawn(child.slot, slot.crashed_at)
            return
        assert isinstance(decision, Exit)
        self.codes.append(decision.code)
        if not self.stopping:
            log.info("%s worker child %d exited (%s): stopping", child.role, pid, _describe(code))
            self.stopping = True
            for other in self.children:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(other, signal.SIGTERM)

    def _expire_leases(self, owner: str) -> None:
        """End the dead child's leases now; a failure only leaves them to run out."""
        try:
            ended = asyncio.run(expire_leases(self.db, owner))
        except Exception as exc:  # the store away: the leases run out as they would without a supervisor
            log.warning("could not end the leases of %s: %s: %s", owner, type(exc).__name__, exc)
            return
        if ended:
            log.info("ended %d leases of the dead child %s", ended, owner)


async def expire_leases(db: DbSettings, owner: str) -> int:
    """One connection, one statement (``TaskStore.expire_leases``)."""
    settings = db.model_copy(update={"pool_min_size": 1, "pool_max_size": 1})
    store = await PostgresTaskStore.open(settings)
    try:
        return await store.expire_leases(owner)
    finally:
        await store.close()


def _become_child(parent: int, inherited: list[int]) -> None:
    """In a new child: the default signal handling back (``app.py`` installs its own), the parent's pipes
    closed, and death with the parent."""
    signal.set_wakeup_fd(-1)
    for sig in (*_FORWARDED, signal.SIGCHLD):
        signal.signal(sig, signal.SIG_DFL)
    for fd in inherited:
        if fd >= 0:
            with contextlib.suppress(OSError):
                os.close(fd)
    if sys.platform == "linux":
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # the parent died before the prctl: it would never fire
        os._exit(1)


def _reap() -> list[tuple[int, int]]:
    ended: list[tuple[int, int]] = []
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return ended
        if pid == 0:
            return ended
        ended.append((pid, status))


def _describe(code: int) -> str:
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"signal {signal.Signals(-code).name}"
        return f"signal {-code}"
    return f"exit code {code}"
