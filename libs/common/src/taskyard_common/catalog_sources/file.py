"""The catalog in a YAML file (``TASKYARD_CATALOG_SOURCE=file``): read again when its content changes.

The file is polled (its SHA-256, every ``poll_seconds``) rather than watched with inotify: a Kubernetes
ConfigMap volume replaces the file through a symlink swap, which a poll of the content sees like any edit.
SIGHUP asks for a read at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import signal
from pathlib import Path

from taskyard_common.catalog import Catalog, CatalogError, parse_catalog
from taskyard_common.catalog_sources.live import CatalogSource

log = logging.getLogger(__name__)


def _digest(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


class FileSource(CatalogSource):
    kind = "file"

    def __init__(self, path: Path, *, poll_seconds: float = 1.0, sighup: bool = False) -> None:
        self.path = path
        self._poll = poll_seconds
        self._sighup = sighup
        self._handler_installed = False
        self._wake = asyncio.Event()
        self._last: str | None = None

    async def read(self) -> Catalog:
        # From the first read on (a service's start), so that a SIGHUP never meets the default action.
        self._install_handler()
        try:
            data = self.path.read_bytes()
        except OSError as exc:
            self._last = None
            raise CatalogError(f"cannot read specialist catalog {self.path}: {exc.strerror}") from None
        # Remembered before parsing: a broken file is reported once, not at every poll.
        self._last = hashlib.sha256(data).hexdigest()
        return parse_catalog(data.decode("utf-8", errors="replace"), str(self.path))

    def _install_handler(self) -> None:
        if self._sighup and not self._handler_installed:
            try:
                asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, self._wake.set)
                self._handler_installed = True
            except (ValueError, RuntimeError, NotImplementedError):
                log.info("SIGHUP cannot be handled here; the catalog file is polled only")
                self._sighup = False

    async def changed(self) -> None:
        self._install_handler()
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._poll):
                    await self._wake.wait()
            if self._wake.is_set():
                self._wake.clear()
                log.info("SIGHUP: reading the catalog file again")
                return
            if _digest(self.path) != self._last:
                return

    async def close(self) -> None:
        if self._handler_installed:
            with contextlib.suppress(ValueError, RuntimeError):
                asyncio.get_running_loop().remove_signal_handler(signal.SIGHUP)
            self._handler_installed = False
