"""FastAPI dependencies: typed handles on the resources the lifespan opened.

They are ``async def`` although they never await: FastAPI runs a plain ``def`` dependency in a worker
thread, a hop on every request for a field read.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from taskyard_api.bus import BusLink
from taskyard_api.resources import Resources
from taskyard_api.settings import ServiceSettings
from taskyard_api.watching.watcher import Watcher
from taskyard_common.catalog import Catalog
from taskyard_common.store import TaskStore
from taskyard_common.topology import Topology


async def get_resources(request: Request) -> Resources:
    # On ``app.state`` rather than the lifespan state: it also works under transports without lifespan.
    resources: Resources = request.app.state.resources
    return resources


ResourcesDep = Annotated[Resources, Depends(get_resources)]


async def get_store(resources: ResourcesDep) -> TaskStore:
    return resources.store


async def get_catalog(resources: ResourcesDep) -> Catalog:
    return resources.catalog


async def get_bus(resources: ResourcesDep) -> BusLink:
    return resources.bus


async def get_topology(resources: ResourcesDep) -> Topology:
    return resources.topology


async def get_service_settings(resources: ResourcesDep) -> ServiceSettings:
    return resources.settings


async def get_watcher(resources: ResourcesDep) -> Watcher:
    return resources.watcher


StoreDep = Annotated[TaskStore, Depends(get_store)]
CatalogDep = Annotated[Catalog, Depends(get_catalog)]
BusDep = Annotated[BusLink, Depends(get_bus)]
TopologyDep = Annotated[Topology, Depends(get_topology)]
SettingsDep = Annotated[ServiceSettings, Depends(get_service_settings)]
WatcherDep = Annotated[Watcher, Depends(get_watcher)]
