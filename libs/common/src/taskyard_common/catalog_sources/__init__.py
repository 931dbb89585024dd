"""Where the specialist catalog comes from, and how every service follows it without a restart.

One interface (``CatalogSource``), three sources chosen by ``TASKYARD_CATALOG_SOURCE``: the YAML file
(``file``), the ``Specialist`` resources of a cluster (``kubernetes``), the database (``database``). A
service opens ``open_live_catalog`` once and reads ``LiveCatalog.catalog`` where it used to hold a fixed
``Catalog``.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from taskyard_common.catalog import CatalogError, catalog_wide, load_catalog
from taskyard_common.catalog_sources.database import DatabaseSource
from taskyard_common.catalog_sources.file import FileSource
from taskyard_common.catalog_sources.kubernetes import KubernetesSource, in_cluster_namespace, in_cluster_url
from taskyard_common.catalog_sources.live import (
    CatalogDiff,
    CatalogSource,
    CatalogUnavailable,
    LiveCatalog,
    StaticSource,
    diff,
)
from taskyard_common.settings import CatalogSettings, DbSettings

__all__ = [
    "CatalogDiff",
    "CatalogSource",
    "CatalogUnavailable",
    "DatabaseSource",
    "FileSource",
    "KubernetesSource",
    "LiveCatalog",
    "StaticSource",
    "diff",
    "make_source",
    "open_live_catalog",
]


async def make_source(settings: CatalogSettings, db: DbSettings, *, sighup: bool = False) -> CatalogSource:
    """The configured source; ``sighup``: the file source reads again on SIGHUP (a service's own process)."""
    if settings.source == "file":
        return FileSource(settings.path, poll_seconds=settings.poll_seconds, sighup=sighup)
    if settings.source == "database":
        return await DatabaseSource.open(
            db, seed_path=settings.path, fallback=settings.fallback, poll_seconds=settings.poll_seconds
        )
    url = settings.kubernetes_url or in_cluster_url()
    if url is None:
        raise CatalogError(
            "TASKYARD_CATALOG_SOURCE=kubernetes outside a cluster needs TASKYARD_CATALOG_KUBERNETES_URL"
        )
    if not settings.fallback:
        raise CatalogError(
            "TASKYARD_CATALOG_SOURCE=kubernetes needs TASKYARD_CATALOG_FALLBACK (a specialist name)"
        )
    try:
        wide = catalog_wide(load_catalog(settings.path))
    except CatalogError:
        wide = {}  # no catalog file: the defaults (one specialist per request, no model table)
    return KubernetesSource(
        url,
        settings.kubernetes_namespace or in_cluster_namespace(),
        fallback=settings.fallback,
        token_path=settings.kubernetes_token_path,
        ca_path=settings.kubernetes_ca_path,
        retry_seconds=settings.poll_seconds,
        wide=wide,
    )


@contextlib.asynccontextmanager
async def open_live_catalog(
    settings: CatalogSettings, db: DbSettings, *, sighup: bool = False
) -> AsyncIterator[LiveCatalog]:
    """The configured source's catalog, followed until the block ends."""
    source = await make_source(settings, db, sighup=sighup)
    async with LiveCatalog.open(source, retry_seconds=settings.poll_seconds) as live:
        yield live
