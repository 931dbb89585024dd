"""A catalog that follows its source: the interface every source implements, and ``LiveCatalog``, which
holds the current catalog of one source and tells listeners when it changes.

A source answers two questions: what the catalog is now (``read``), and when it may have changed
(``changed``: a poll that saw other content, a signal, a watch event). ``LiveCatalog`` reads after each
``changed`` and compares with what it holds: an equal catalog is no change, an invalid one is logged and the
last valid one stays in force. Listeners run BEFORE the new catalog takes effect, so that, say, a new
specialist's queues exist before anything may route to it; a listener that fails leaves the old catalog in
force and the read is tried again after ``retry_seconds``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

from taskyard_common.catalog import Catalog, CatalogError
from taskyard_common.errors import TransientError

log = logging.getLogger(__name__)

Listener = Callable[[Catalog, Catalog], Awaitable[None]]


class CatalogUnavailable(TransientError):
    """The source cannot be read right now (the API server or the database is away)."""


class CatalogSource(ABC):
    """Where a catalog comes from: a file, Kubernetes resources, the database."""

    kind: str

    @abstractmethod
    async def read(self) -> Catalog:
        """The catalog as the source holds it now: ``CatalogError`` when it is not a valid catalog,
        ``CatalogUnavailable`` when the source cannot be reached."""

    @abstractmethod
    async def changed(self) -> None:
        """Return when the catalog may have changed since the last ``read``."""

    async def close(self) -> None:  # noqa: B027 (most sources hold nothing)
        """Release what the source holds."""


class StaticSource(CatalogSource):
    """One catalog that never changes (tests, tools that read a catalog once)."""

    kind = "static"

    def __init__(self, catalog: Catalog) -> None:
        self._catalog = catalog

    async def read(self) -> Catalog:
        return self._catalog

    async def changed(self) -> None:
        await asyncio.Event().wait()


@dataclass(frozen=True)
class CatalogDiff:
    added: tuple[str, ...]
    removed: tuple[str, ...]
    changed: tuple[str, ...]


def diff(old: Catalog, new: Catalog) -> CatalogDiff:
    """The specialists ``new`` adds, removes and changes relative to ``old``."""
    before = {s.name: s for s in old.specialists}
    after = {s.name: s for s in new.specialists}
    return CatalogDiff(
        added=tuple(n for n in after if n not in before),
        removed=tuple(n for n in before if n not in after),
        changed=tuple(n for n in after if n in before and after[n] != before[n]),
    )


class LiveCatalog:
    """The current catalog of one source, kept current by a background task while ``open``'s block runs."""

    def __init__(self, source: CatalogSource, catalog: Catalog, *, retry_seconds: float = 1.0) -> None:
        self.source = source
        self._catalog = catalog
        self._retry = retry_seconds
        self._listeners: list[Listener] = []
        self._lock = asyncio.Lock()
        self._changed = asyncio.Event()
        # Bumped on every change that took effect: ``wait_changed`` compares against it.
        self.version = 0
        self._task: asyncio.Task[None] | None = None

    @classmethod
    @contextlib.asynccontextmanager
    async def open(cls, source: CatalogSource, *, retry_seconds: float = 1.0) -> AsyncIterator[LiveCatalog]:
        """Read the first catalog (an invalid one raises ``CatalogError``: a service cannot start without a
        catalog), follow the source until the block ends, then close it."""
        try:
            live = cls(source, await source.read(), retry_seconds=retry_seconds)
            live._task = asyncio.create_task(live._follow(), name=f"catalog ({source.kind})")
            try:
                yield live
            finally:
                live._task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await live._task
        finally:
            await source.close()

    @classmethod
    def fixed(cls, catalog: Catalog) -> LiveCatalog:
        """A catalog that never changes, with nothing to follow or close."""
        return cls(StaticSource(catalog), catalog)

    @property
    def catalog(self) -> Catalog:
        return self._catalog

    def on_change(self, listener: Listener) -> None:
        """Call ``listener(old, new)`` before each change takes effect."""
        self._listeners.append(listener)

    async def wait_changed(self, version: int) -> None:
        """Return once a change after ``version`` took effect."""
        while self.version == version:
            await self._changed.wait()

    async def refresh(self) -> bool:
        """Read the source now (not waiting for the next poll or event); True when the catalog changed.
        What cannot be read or is invalid is logged and changes nothing."""
        async with self._lock:
            try:
                new = await self.source.read()
            except (CatalogError, CatalogUnavailable) as exc:
                log.error(
                    "the %s catalog was not applied; the last valid one stays: %s", self.source.kind, exc
                )
                return False
            old = self._catalog
            if new == old:
                return False
            for listener in self._listeners:
                await listener(old, new)
            self._catalog = new
            self.version += 1
            self._changed.set()
            self._changed = asyncio.Event()
            change = diff(old, new)
            log.info(
                "catalog changed (%s): added %s, removed %s, changed %s; %d specialists",
                self.source.kind, list(change.added), list(change.removed), list(change.changed),
                len(new.specialists),
            )  # fmt: skip
            return True

    async def _follow(self) -> None:
        retry = False
        while True:
            try:
                if retry:
                    await asyncio.sleep(self._retry)
                else:
                    await self.source.changed()
                await self.refresh()
                retry = False
            except asyncio.CancelledError:
                raise
            except Exception:
                # A listener (declaring queues on a broker that is away) or the source failed: the old catalog
                # stays in force, and the read is tried again.
                log.warning("following the %s catalog failed; trying again", self.source.kind, exc_info=True)
                retry = True
