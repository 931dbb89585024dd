"""Waiting until a process's HTTP endpoint answers 200 (``/readyz``, ``/healthz``, ``/v1/models``).

A service is ready when it says so, not after a fixed sleep: starting takes from a fraction of a second to
minutes (a model loading), and a process that dies while starting should fail the wait at once, with its
log, rather than at the timeout.

Two shapes: ``wait_http_ok`` (and ``_sync`` for code without an event loop) raises when the endpoint never
answers, for tests and benchmarks; ``wait_ready`` answers a bool and gives up early when asked to stop,
for `make up`, which keeps running and reports instead.
"""

from __future__ import annotations

import asyncio
import time
import urllib.request
from collections.abc import Callable

import httpx

from taskyard_devkit.process import Service

POLL_SECONDS = 0.05


class NotReady(AssertionError):
    """The endpoint never answered 200, or its process exited first (the message holds its log's tail).

    An ``AssertionError`` so that a test waiting on a service fails as a failed check, as before the wait
    moved here, and pytest shows the message."""


def _check_alive(service: Service | None) -> None:
    if service is not None and service.proc.poll() is not None:
        raise NotReady(f"{service.name} exited early:\n{service.log_tail()}")


async def wait_http_ok(url: str, service: Service | None = None, timeout: float = 30) -> None:
    """Poll ``url`` until it answers 200; raise ``NotReady`` after ``timeout`` or once ``service`` exits."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    async with httpx.AsyncClient(timeout=2) as client:
        while True:
            _check_alive(service)
            try:
                if (await client.get(url)).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if loop.time() > deadline:
                raise NotReady(f"timed out after {timeout}s waiting for {url}")
            await asyncio.sleep(POLL_SECONDS)


def wait_http_ok_sync(url: str, service: Service | None = None, timeout: float = 30) -> None:
    """``wait_http_ok`` for callers that have no event loop (pytest session fixtures)."""
    deadline = time.monotonic() + timeout
    with httpx.Client(timeout=2) as client:
        while True:
            _check_alive(service)
            try:
                if client.get(url).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise NotReady(f"timed out after {timeout}s waiting for {url}")
            time.sleep(POLL_SECONDS)


def _answers_200(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return bool(response.status == 200)
    except OSError:
        return False


async def wait_ready(
    url: str, timeout: float, stop: asyncio.Event, failed: Callable[[], bool] = lambda: False
) -> bool:
    """Whether ``url`` answered 200 within ``timeout``; False as soon as ``stop`` is set or ``failed()``
    holds (a supervised process that had to be restarted)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not stop.is_set() and not failed():
        if await asyncio.to_thread(_answers_200, url):
            return True
        try:
            await asyncio.wait_for(stop.wait(), 0.5)
        except TimeoutError:
            pass
    return False
