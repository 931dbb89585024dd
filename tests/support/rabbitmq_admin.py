"""Operate the local RabbitMQ node the way an operator would (rabbitmqctl), for restart and timeout tests.

These change the shared broker, so the tests that use them run serially and restore what they change.
"""

from __future__ import annotations

import asyncio
import os
import shutil

import pytest


def require_rabbitmqctl() -> None:
    if shutil.which("rabbitmqctl") is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("rabbitmqctl is needed for this test (CI=true: refusing to skip)")
        pytest.skip("rabbitmqctl is not available on this host")


async def rabbitmqctl(*args: str, timeout: float = 120) -> str:
    process = await asyncio.create_subprocess_exec(
        "rabbitmqctl", *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    output, _ = await asyncio.wait_for(process.communicate(), timeout)
    if process.returncode != 0:
        raise AssertionError(f"rabbitmqctl {' '.join(args)} failed: {output.decode(errors='replace')}")
    return output.decode(errors="replace")


async def set_env(key: str, value: str) -> None:
    await rabbitmqctl("eval", f"application:set_env(rabbit, {key}, {value}).")


async def get_env(key: str) -> str:
    return (await rabbitmqctl("eval", f"application:get_env(rabbit, {key}).")).strip()
