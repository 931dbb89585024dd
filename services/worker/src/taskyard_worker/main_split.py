"""The supervisor's adaptive split of the main queues: after a crash, more and smaller main children for a
while, then one again.

One main child runs a pod's whole ``concurrency``, which is what the clean throughput wants (more children
cost some of it, docs/worker.md); but a task that kills it takes every task running beside it into
quarantine and returns its whole prefetch. The bet: a task that kills a process often has others like it
behind it (one bad input format, one tool that crashes on it), so a pod that has just seen a main child die
by a signal is where the next crash is likeliest. So the supervisor then runs the main queues in
``after_crash`` children, each with its share of the concurrency (``supervision.main_share``), until
``calm_seconds`` pass without another main crash (and as many quarantine children, for the suspects those
crashes send there); then it stops them gracefully (their tasks finish their
step or are handed back, as on SIGTERM) and forks one main child again. Only for a pod that runs one main
child at rest (``TASKYARD_WORKER_MAIN_CHILDREN`` 1): one that chose more keeps them.

State and decisions only; ``supervisor.py`` forks and signals. Unit-tested without processes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from taskyard_worker.supervision import Role


@dataclass
class MainSplit:
    """How many children consume the main queues now, and when they go back to one."""

    base: int = 1  # main children at rest (``TASKYARD_WORKER_MAIN_CHILDREN``)
    after_crash: int = 1  # main children after a main child's crash (1: never split)
    calm_seconds: float = 300.0  # back to ``base`` once this long passed without a main crash
    quarantine_base: int = 0  # quarantine children at rest (``TASKYARD_WORKER_QUARANTINE_CHILDREN``)
    current: int = field(init=False)  # ``base`` at rest, ``after_crash`` while split
    calm_until: float | None = None
    # The main children told to stop for the merge; one main child is forked once they are all gone.
    retiring: set[int] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.current = self.base

    @property
    def adaptive(self) -> bool:
        return self.base == 1 and self.after_crash > 1

    def quarantine_children(self) -> int:
        """Quarantine children now: ``quarantine_base`` at rest; while split, at least as many as main
        children. Each crash of the split sends its tasks in flight there as suspects, healthy most of them,
        and each quarantine child runs one at a time: with the base's two, a pod's quarantine backlog grew
        while the split ran and its last healthy tasks waited for it long after the poison was gone."""
        if self.quarantine_base == 0:
            return 0
        return max(self.quarantine_base, self.current)

    def share_of(self, role: Role) -> int:
        """How many children split the concurrency that a child in ``role`` shares (1: it runs all of it)."""
        return self.current if role.main_queues else 1

    def crashed(self, now: float) -> bool:
        """A main child died by a signal at ``now``: True when the main queues split now (the caller forks
        the other main children); a crash while split only puts the merge off."""
        if not self.adaptive:
            return False
        self.calm_until = now + self.calm_seconds
        if self.current > 1:
            return False
        self.current = self.after_crash
        return True

    def merge_due(self, now: float) -> bool:
        """Whether the split main children should go back to one now."""
        return (
            self.adaptive
            and self.current > 1
            and not self.retiring
            and self.calm_until is not None
            and now >= self.calm_until
        )

    def next_deadline(self) -> float | None:
        """When ``merge_due`` next turns true (None: not while nothing changes)."""
        if not self.adaptive or self.current == 1 or self.retiring:
            return None
        return self.calm_until

    def merging(self, pids: set[int]) -> bool:
        """The merge starts: ``pids`` (every main child alive) are told to stop. True when none is alive (a
        restart waiting for its pause): back to ``base`` at once."""
        self.calm_until = None
        self.retiring = set(pids)
        if not pids:
            self.current = self.base
        return not pids

    def retired(self, pid: int) -> bool:
        """A retiring child ended: True when it was the last (the caller forks one main child again)."""
        self.retiring.discard(pid)
        if self.retiring:
            return False
        self.current = self.base
        return True
