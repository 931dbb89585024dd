"""`make up`'s supervisor: runs each service process, prefixes its output, restarts it when it dies.

Like Kubernetes would, it restarts a process that exits (with a backoff that doubles up to 30 s and starts
over once a process has run for a minute) and says so, so a crash shows in the output instead of a service
silently missing. Children run in their own session: Ctrl-C reaches the supervisor only, which then stops
them in order, model servers last (the others' calls in flight may still need them while they stop).
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from taskyard_devkit.process import BIN

COLORS = ["36", "32", "33", "35", "34", "96", "92", "93", "95", "94"]
MAX_BACKOFF = 30.0
STABLE_AFTER = 60.0  # a process that ran this long starts again from the smallest backoff


@dataclass
class Supervised:
    """One service under supervision: its command line and what happened to it so far."""

    name: str
    argv: list[str]  # a console script in BIN, or an absolute path (the model server's python)
    env: dict[str, str] = field(default_factory=dict)
    color: str = "0"
    process: asyncio.subprocess.Process | None = None
    restarts: int = 0
    started: bool = False
    retired: bool = False  # stopped for good while the others run on
    stop_last: bool = False  # a model server: the others' calls in flight may still need it while they stop


class Supervisor:
    def __init__(self, say: Callable[[str], None]) -> None:
        self.say = say
        self.services: list[Supervised] = []
        self.stopping = asyncio.Event()
        self.width = 12
        self.tasks: list[asyncio.Task[None]] = []

    def add(self, name: str, argv: list[str], *, stop_last: bool = False, **env: str) -> Supervised:
        service = Supervised(name, argv, env, COLORS[len(self.services) % len(COLORS)], stop_last=stop_last)
        self.services.append(service)
        self.width = max(self.width, len(name))
        return service

    def start(self, service: Supervised) -> None:
        service.started = True
        self.tasks.append(asyncio.create_task(self.supervise(service)))

    def start_all(self) -> None:
        """Start every service not started yet (a model server may have been started, and waited for,
        before the others)."""
        for service in self.services:
            if not service.started:
                self.start(service)

    async def retire(self, service: Supervised, grace: float = 10.0) -> None:
        """Stop one service for good (no restart) while the others keep running."""
        service.retired = True
        process = service.process
        if process is not None and process.returncode is None:
            process.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(process.wait(), grace)
            except TimeoutError:
                process.kill()

    async def _pipe(self, service: Supervised, stream: asyncio.StreamReader) -> None:
        prefix = f"\033[{service.color}m{service.name:<{self.width}}\033[0m | "
        while line := await stream.readline():
            sys.stdout.write(prefix + line.decode(errors="replace"))
            sys.stdout.flush()

    async def supervise(self, service: Supervised) -> None:
        backoff = 1.0
        while not self.stopping.is_set() and not service.retired:
            started = time.monotonic()
            service.process = await asyncio.create_subprocess_exec(
                str(BIN / service.argv[0]),  # an absolute argv[0] (the model server's python) stays as is
                *service.argv[1:],
                env={**os.environ, **service.env, "PYTHONUNBUFFERED": "1"},
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
                start_new_session=True,  # Ctrl-C reaches us only; we stop the children in order
            )
            assert service.process.stdout is not None
            await self._pipe(service, service.process.stdout)
            code = await service.process.wait()
            if self.stopping.is_set() or service.retired:
                return
            if time.monotonic() - started > STABLE_AFTER:
                backoff = 1.0
            service.restarts += 1
            self.say(
                f"{service.name} exited with code {code}; restart #{service.restarts} in {backoff:.0f} s"
            )
            try:
                await asyncio.wait_for(self.stopping.wait(), backoff)
                return
            except TimeoutError:
                backoff = min(backoff * 2, MAX_BACKOFF)

    async def stop(self, grace: float = 20.0) -> None:
        self.stopping.set()
        await self._stop([s for s in self.services if not s.stop_last], grace)
        await self._stop([s for s in self.services if s.stop_last], grace)

    async def _stop(self, services: list[Supervised], grace: float) -> None:
        running = [s.process for s in services if s.process and s.process.returncode is None]
        for process in running:
            process.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(asyncio.gather(*(p.wait() for p in running)), grace)
        except TimeoutError:
            for process in running:
                if process.returncode is None:
                    process.kill()
