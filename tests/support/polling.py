"""Waiting for a condition in a test by polling it, never with a fixed sleep.

Starting, stopping and waiting for service processes is taskyard_devkit's job (the same code `make up` and
the benchmark use); ``eventually`` is the tests' own wait, for any condition they check.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable


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
