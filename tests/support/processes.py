"""Run taskyard's services as real subprocesses, from the same console scripts users run."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx

BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Service:
    """One service process; its output goes to a log file that a failing test prints."""

    def __init__(self, name: str, argv: list[str], env: dict[str, str], log_dir: Path) -> None:
        self.name = name
        self.log_path = log_dir / f"{name}.log"
        self._log = self.log_path.open("wb")
        full_env = {**os.environ, **env, "PYTHONUNBUFFERED": "1"}
        self.proc = subprocess.Popen(
            [str(BIN / argv[0]), *argv[1:]], env=full_env, stdout=self._log, stderr=subprocess.STDOUT
        )

    def log_tail(self, lines: int = 60) -> str:
        text = self.log_path.read_text(errors="replace").splitlines()
        return "\n".join(text[-lines:])

    def stop(self, timeout: float = 15) -> int | None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self._log.close()
        return self.proc.returncode


async def eventually(
    check: Callable[[], Awaitable[bool]], *, timeout: float = 30, what: str = "condition"
) -> None:
    """Wait for a condition by polling it; fails with ``what`` when it never holds (no fixed sleeps)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        if await check():
            return
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.05)


async def wait_http_ok(url: str, service: Service | None = None, timeout: float = 30) -> None:
    async with httpx.AsyncClient(timeout=2) as client:

        async def ok() -> bool:
            if service is not None and service.proc.poll() is not None:
                raise AssertionError(f"{service.name} exited early:\n{service.log_tail()}")
            try:
                return (await client.get(url)).status_code == 200
            except httpx.HTTPError:
                return False

        await eventually(ok, timeout=timeout, what=url)


def wait_http_ok_sync(url: str, service: Service | None = None, timeout: float = 30) -> None:
    """For session fixtures that have no event loop: poll until ``url`` answers 200."""
    deadline = time.monotonic() + timeout
    with httpx.Client(timeout=2) as client:
        while True:
            if service is not None and service.proc.poll() is not None:
                raise AssertionError(f"{service.name} exited early:\n{service.log_tail()}")
            try:
                if client.get(url).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout}s waiting for {url}")
            time.sleep(0.05)
