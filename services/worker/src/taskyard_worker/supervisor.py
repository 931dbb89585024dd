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

After a main child's crash the main queues run in more, smaller children for a while (``main_split.py``):
the parent forks them (and as many quarantine children, for the suspects), and once calm stops them
gracefully and forks one main child again.

SIGTERM or SIGINT to the parent goes to every child (each stops gracefully, ``app.py``) and the parent exits
after them; SIGHUP (re-read the catalog) goes to every child. A child dies with the parent
(``PR_SET_PDEATHSIG`` on Linux): a SIGKILLed pod leaves no orphan consuming.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import select
import signal
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from taskyard_common.pod_metrics import process_ended
from taskyard_common.settings import DbSettings
from taskyard_common.store import PostgresTaskStore
from taskyard_worker.child_processes import FORWARDED, become_child, describe, owner_id, reap
from taskyard_worker.main_split import MainSplit
from taskyard_worker.supervision import Exit, Restart, Role, after_child_exit, stop_code, unready_streak

log = logging.getLogger(__name__)

# A child's body: (role, lease owner id, call once consuming, a child of this supervisor consumed before,
# so the topology is declared, how many children split the concurrency it shares) -> exit code.
ChildMain = Callable[[Role, str, Callable[[], None], bool, int], int]


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
    active: bool = True  # a child added by a split runs only while the main queues are split
    extra: bool = False  # a quarantine child added by a split (a main one has its own role, MAIN_MORE)


@dataclass
class Supervisor:
    roles: tuple[Role, ...]
    child_main: ChildMain
    db: DbSettings
    metrics_dir: str | None = None  # ``pod_metrics.share_between_processes``: a dead child's gauges go
    split: MainSplit = field(default_factory=MainSplit)  # how many main children, now and after a crash
    children: dict[int, Child] = field(default_factory=dict)
    stopping: bool = False
    codes: list[int] = field(default_factory=list)
    _slots: list[_Slot] = field(default_factory=list)
    _wake: tuple[int, int] = (-1, -1)
    _consumed: bool = False  # a child consumed: it had declared the topology (a successor need not)
    _dismissed: set[int] = field(default_factory=set)  # a split's quarantine children stopped by the merge
    _pid: int = 0

    def run(self) -> int:
        """Fork the children, keep them running until told to stop (or one exits on its own); the exit code."""
        self._pid = os.getpid()
        self._slots = [_Slot(role) for role in self.roles]
        self._wake = os.pipe()
        for fd in self._wake:
            os.set_blocking(fd, False)
        previous = signal.set_wakeup_fd(self._wake[1])
        handlers = {sig: signal.signal(sig, self._on_signal) for sig in (*FORWARDED, signal.SIGCHLD)}
        try:
            for index in range(len(self._slots)):
                self._spawn(index, None)
            while self.children or any(s.due is not None for s in self._slots):
                self._wait()
                for pid, status in reap():
                    self._ended(pid, status)
                now = time.monotonic()
                if not self.stopping and self.split.merge_due(now):
                    self._merge()
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
        merge = self.split.next_deadline()
        if merge is not None:
            dues.append(merge)
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
            become_child(self._pid, [*self._wake, *(c.ready_fd for c in self.children.values())])

            def ready() -> None:
                with contextlib.suppress(OSError):
                    os.write(ready_w, b"r")

            code = 1
            try:
                share = self.split.share_of(role)
                code = self.child_main(role, owner_id(os.getpid(), token), ready, self._consumed, share)
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
        if pid in self.split.retiring and not self.stopping:
            self._retired(pid, child, code)
            return
        if pid in self._dismissed and not self.stopping:
            self._dismissed.discard(pid)
            if code < 0:  # it crashed while it drained: its lease ends as on any crash
                self._expire_leases(child.owner)
            return
        slot = self._slots[child.slot]
        slot.unready_crashes = unready_streak(slot.unready_crashes, was_ready=child.ready)
        decision = after_child_exit(code, stopping=self.stopping, unready_crashes=slot.unready_crashes)
        if isinstance(decision, Restart):
            slot.restarts += 1
            slot.crashed_at = time.monotonic()
            log.warning(
                "%s worker child %d died (%s): restart #%d in %.1f s",
                child.role, pid, describe(code), slot.restarts, decision.delay_seconds,
            )  # fmt: skip
            # The leases first: the dead child's messages are being redelivered to the other children now,
            # and each start that finds its task's lease still held waits (a fork takes a moment only).
            self._expire_leases(child.owner)
            if child.role.main_queues and self.split.crashed(slot.crashed_at):
                self._split_main()
            if not slot.active:
                return
            if decision.delay_seconds > 0:
                slot.due = slot.crashed_at + decision.delay_seconds
            else:
                self._spawn(child.slot, slot.crashed_at)
            return
        assert isinstance(decision, Exit)
        self.codes.append(decision.code)
        if not self.stopping:
            log.info("%s worker child %d exited (%s): stopping", child.role, pid, describe(code))
            self.stopping = True
            for other in self.children:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(other, signal.SIGTERM)

    def _split_main(self) -> None:
        """A main child died: fork the other main children of the split (``main_split.py``); the dead one's
        successor, forked next, runs its share too."""
        more = [i for i, s in enumerate(self._slots) if s.role is Role.MAIN_MORE]
        while len(more) < self.split.current - 1:
            self._slots.append(_Slot(Role.MAIN_MORE))
            more.append(len(self._slots) - 1)
        quarantine = [i for i, s in enumerate(self._slots) if s.role is Role.QUARANTINE]
        while len(quarantine) < self.split.quarantine_children():
            self._slots.append(_Slot(Role.QUARANTINE, extra=True))
            quarantine.append(len(self._slots) - 1)
        log.warning(
            "main worker child crashed: the main queues run in %d children, the quarantine queue in %d, for"
            " at least %.0f s",
            self.split.current, len(quarantine), self.split.calm_seconds,
        )  # fmt: skip
        for index in [*more, *(i for i in quarantine if self._slots[i].extra)]:
            self._slots[index].active = True
            self._spawn(index, None)

    def _merge(self) -> None:
        """No main crash for the calm period: stop the split main children gracefully, then fork one."""
        for slot in self._slots:
            if slot.role is Role.MAIN_MORE or slot.extra:
                slot.active, slot.due = False, None
        mains = {pid for pid, c in self.children.items() if c.role.main_queues}
        extras = {pid for pid, c in self.children.items() if self._slots[c.slot].extra}
        log.info("no main worker crash for %.0f s: back to one main child", self.split.calm_seconds)
        # The split's quarantine children finish the suspect they run (or hand it back) and are not replaced.
        self._dismissed |= extras
        for pid in extras:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        # None alive (a restart waiting for its pause): that restart runs the whole concurrency.
        self.split.merging(mains)
        for pid in mains:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)

    def _retired(self, pid: int, child: Child, code: int) -> None:
        """A main child stopped for the merge ended (a crash while it drained ends its leases as any crash
        does); after the last, one main child again."""
        if code < 0:
            self._expire_leases(child.owner)
        if self.split.retired(pid):
            main = next(i for i, s in enumerate(self._slots) if s.role is Role.MAIN)
            if self._slots[main].due is None:
                self._spawn(main, None)

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
