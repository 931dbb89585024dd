"""The specialists stored in PostgreSQL (``TASKYARD_CATALOG_SOURCE=database``): reads for the catalog
source, and the admin's changes (``PUT/DELETE /v1/specialists/{name}``).

Every change locks ``catalog_state``, reads the whole catalog, applies itself and validates the result as
a ``Catalog`` before writing, then bumps the version, all in one transaction: the stored catalog is always
valid (the fallback cannot be deleted, nor the last specialist), and two admins' changes never interleave.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from taskyard_common.catalog import Catalog, CatalogError, SpecialistSpec
from taskyard_common.errors import StoreUnavailable
from taskyard_common.store._pg import UNAVAILABLE, Connection, PoolStore


@dataclass(frozen=True)
class StoredCatalog:
    version: int
    fallback: str | None
    # Name → catalog entry (without its name), in the catalog's order.
    entries: dict[str, dict[str, Any]]

    def catalog(self, fallback: str | None = None, wide: Mapping[str, Any] | None = None) -> Catalog:
        """As a ``Catalog`` (``fallback`` replaces the stored one; ``wide``: the catalog-wide fields, see
        ``catalog_wide``); ``CatalogError`` when it is not valid."""
        try:
            return Catalog(
                **(wide or {}),
                fallback=fallback or self.fallback or "",
                specialists=tuple(
                    SpecialistSpec.model_validate({**entry, "name": name})
                    for name, entry in self.entries.items()
                ),
            )
        except ValidationError as exc:
            raise CatalogError(f"the stored catalog (version {self.version}) is not valid:\n{exc}") from None


def entry_of(spec: SpecialistSpec) -> dict[str, Any]:
    """A spec as stored: its JSON fields without the name (the row's key)."""
    return spec.model_dump(mode="json", exclude={"name"})


class SpecialistStore(PoolStore):
    async def version(self) -> int:
        row = await self._fetchrow("SELECT version FROM catalog_state")
        return int(row["version"]) if row is not None else 0

    async def snapshot(self) -> StoredCatalog:
        try:
            async with self._connection() as conn, conn.transaction(isolation="repeatable_read"):
                return await _snapshot(conn)
        except UNAVAILABLE as exc:
            raise StoreUnavailable(f"database unavailable: {type(exc).__name__}") from exc

    async def seed(self, catalog: Catalog) -> bool:
        """Store ``catalog`` when nothing was ever stored (version 0); True when it did."""
        try:
            async with self._connection() as conn, conn.transaction():
                row = await conn.fetchrow("SELECT version FROM catalog_state FOR UPDATE")
                if row is None or row["version"] != 0:
                    return False
                await conn.executemany(
                    "INSERT INTO specialists (name, spec) VALUES ($1, $2)",
                    [(spec.name, entry_of(spec)) for spec in catalog.specialists],
                )
                await conn.execute("UPDATE catalog_state SET version = 1, fallback = $1", catalog.fallback)
                return True
        except UNAVAILABLE as exc:
            raise StoreUnavailable(f"database unavailable: {type(exc).__name__}") from exc

    async def put(
        self, spec: SpecialistSpec, fallback: str | None = None, wide: Mapping[str, Any] | None = None
    ) -> tuple[bool, Catalog]:
        """Create or replace one specialist: (created, the catalog now); ``CatalogError`` when the result
        would not be a valid catalog."""
        return await self._change(spec.name, spec, fallback, wide)

    async def delete(
        self, name: str, fallback: str | None = None, wide: Mapping[str, Any] | None = None
    ) -> Catalog | None:
        """Remove one specialist: the catalog now, None when there was none of that name; ``CatalogError``
        when the rest would not be a valid catalog (it was the fallback, the combiner, or the last one)."""
        found, catalog = await self._change(name, None, fallback, wide)
        return catalog if found else None

    async def _change(
        self, name: str, spec: SpecialistSpec | None, fallback: str | None, wide: Mapping[str, Any] | None
    ) -> tuple[bool, Catalog]:
        try:
            async with self._connection() as conn, conn.transaction():
                await conn.execute("SELECT version FROM catalog_state FOR UPDATE")
                stored = await _snapshot(conn)
                existed = name in stored.entries
                entries = dict(stored.entries)
                if spec is None:
                    if not existed:
                        return False, stored.catalog(fallback, wide)
                    del entries[name]
                else:
                    entries[name] = entry_of(spec)
                catalog = StoredCatalog(stored.version + 1, stored.fallback, entries).catalog(fallback, wide)
                if spec is None:
                    await conn.execute("DELETE FROM specialists WHERE name = $1", name)
                else:
                    await conn.execute(
                        "INSERT INTO specialists (name, spec) VALUES ($1, $2) ON CONFLICT (name)"
                        " DO UPDATE SET spec = EXCLUDED.spec, updated_at = clock_timestamp()",
                        name,
                        entry_of(spec),
                    )
                await conn.execute("UPDATE catalog_state SET version = version + 1")
                return (existed if spec is None else not existed), catalog
        except UNAVAILABLE as exc:
            raise StoreUnavailable(f"database unavailable: {type(exc).__name__}") from exc


async def _snapshot(conn: Connection) -> StoredCatalog:
    state = await conn.fetchrow("SELECT version, fallback FROM catalog_state")
    rows = await conn.fetch("SELECT name, spec FROM specialists ORDER BY position")
    return StoredCatalog(
        version=int(state["version"]) if state is not None else 0,
        fallback=state["fallback"] if state is not None else None,
        entries={r["name"]: r["spec"] for r in rows},
    )
