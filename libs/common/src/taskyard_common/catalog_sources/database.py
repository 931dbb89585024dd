"""The catalog stored in PostgreSQL (``TASKYARD_CATALOG_SOURCE=database``), for installs without
Kubernetes: changed with ``PUT/DELETE /v1/specialists/{name}``, followed by polling the catalog's version
(one indexed single-row read every ``poll_seconds``) and reading the whole catalog when it moved.

A store that never held a catalog is seeded from the catalog file, once (the first process to start wins;
the others see version 1). The catalog-wide fields (``multi_route``, ``combine_specialist``, ``models``) are
the catalog file's, read when the source opens: the store holds the specialists and the fallback.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import asyncpg

from taskyard_common.catalog import Catalog, CatalogError, SpecialistSpec, catalog_wide, load_catalog
from taskyard_common.catalog_sources.live import CatalogSource, CatalogUnavailable
from taskyard_common.errors import StoreUnavailable
from taskyard_common.settings import DbSettings
from taskyard_common.store._pg import UNAVAILABLE, init_connection
from taskyard_common.store.connecting import connection_options
from taskyard_common.store.specialists import SpecialistStore

log = logging.getLogger(__name__)


class DatabaseSource(CatalogSource):
    kind = "database"

    def __init__(
        self,
        store: SpecialistStore,
        *,
        fallback: str | None,
        poll_seconds: float,
        wide: dict[str, Any] | None = None,
    ) -> None:
        self.store = store
        self._fallback = fallback
        self._wide = wide or {}
        self._poll = poll_seconds
        self._version: int | None = None

    @classmethod
    async def open(
        cls, db: DbSettings, *, seed_path: Path, fallback: str | None, poll_seconds: float
    ) -> DatabaseSource:
        """A small pool of its own (two connections at most: a version poll, and a read), then the seed."""
        try:
            pool = await asyncpg.create_pool(
                db.url.get_secret_value(),
                min_size=1,
                max_size=2,
                command_timeout=db.command_timeout_seconds,
                timeout=db.command_timeout_seconds,
                init=init_connection,
                **connection_options(db, "taskyard-catalog"),
            )
        except UNAVAILABLE as exc:
            raise CatalogUnavailable(f"cannot connect to PostgreSQL: {type(exc).__name__}") from exc
        source = cls(
            SpecialistStore(pool, acquire_timeout=db.command_timeout_seconds),
            fallback=fallback,
            poll_seconds=poll_seconds,
        )
        try:
            await source._seed(seed_path)
        except BaseException:
            await pool.close()
            raise
        return source

    async def _seed(self, path: Path) -> None:
        try:
            catalog: Catalog | None = load_catalog(path)
        except CatalogError as exc:
            catalog = None
            log.warning("no catalog file to seed from or to take the catalog-wide fields of: %s", exc)
        self._wide = catalog_wide(catalog)
        try:
            if await self.store.version() != 0 or catalog is None:
                return
            if await self.store.seed(catalog):
                log.info("seeded the stored catalog from %s (%d specialists)", path, len(catalog.specialists))
        except StoreUnavailable as exc:
            raise CatalogUnavailable(str(exc)) from exc

    async def read(self) -> Catalog:
        try:
            stored = await self.store.snapshot()
        except StoreUnavailable as exc:
            raise CatalogUnavailable(str(exc)) from exc
        self._version = stored.version
        return stored.catalog(self._fallback, self._wide)

    async def put(self, spec: SpecialistSpec) -> tuple[bool, Catalog]:
        """Create or replace one specialist in the store (see ``SpecialistStore.put``)."""
        return await self.store.put(spec, self._fallback, self._wide)

    async def delete(self, name: str) -> Catalog | None:
        """Remove one specialist from the store (see ``SpecialistStore.delete``)."""
        return await self.store.delete(name, self._fallback, self._wide)

    async def changed(self) -> None:
        while True:
            await asyncio.sleep(self._poll)
            try:
                if await self.store.version() != self._version:
                    return
            except StoreUnavailable as exc:
                log.warning("cannot poll the stored catalog's version: %s", exc)

    async def close(self) -> None:
        await self.store.close()
