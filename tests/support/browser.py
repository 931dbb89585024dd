"""Debian's Chromium, driven by Playwright for Python through ``executable_path`` (Playwright's own
browser download is never used). Without it the browser tests are skipped, except under ``CI=true``,
where a missing browser is a failure, as a missing broker or database is (``infra``); ``make test`` installs
it (scripts/bootstrap.sh --browser)."""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
from playwright.async_api import Browser, async_playwright

# Headless, and quiet: no sandbox (containers run it as root), no GPU, no background traffic.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def chromium_path() -> str | None:
    """``TASKYARD_CHROMIUM`` when set, else Debian's ``chromium`` on the PATH."""
    return os.environ.get("TASKYARD_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")


@asynccontextmanager
async def chromium() -> AsyncIterator[Browser]:
    path = chromium_path()
    if path is None:
        message = "Debian's chromium is not installed (apt-get install chromium, or make test)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"{message} (CI=true: refusing to skip)")
        pytest.skip(message)
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=path, headless=True, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            await browser.close()
