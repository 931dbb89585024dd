"""FastAPI dependencies: typed handles on the resources the lifespan opened."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from taskyard_api.broker import BrokerLink
from taskyard_api.lifespan import Resources
from taskyard_api.settings import ServiceSettings
from taskyard_common.catalog import Catalog
from taskyard_common.store import TaskStore
from taskyard_common.topology import Topology


def get_resources(request: Request) -> Resources:
    # On ``app.state`` rather than the lifespan state: it also works under transports without lifespan.
    resources: Resources = request.app.state.resources
    return resources


ResourcesDep = Annotated[Resources, Depends(get_resources)]


def get_store(resources: ResourcesDep) -> TaskStore:
    return resources.store


def get_catalog(resources: ResourcesDep) -> Catalog:
    return resources.catalog


def get_broker(resources: ResourcesDep) -> BrokerLink:
    return resources.broker


def get_topology(resources: ResourcesDep) -> Topology:
    return resources.topology


def get_service_settings(resources: ResourcesDep) -> ServiceSettings:
    return resources.settings


StoreDep = Annotated[TaskStore, Depends(get_store)]
CatalogDep = Annotated[Catalog, Depends(get_catalog)]
BrokerDep = Annotated[BrokerLink, Depends(get_broker)]
TopologyDep = Annotated[Topology, Depends(get_topology)]
SettingsDep = Annotated[ServiceSettings, Depends(get_service_settings)]
