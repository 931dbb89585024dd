"""What the broker agent's parts work with: one typed context, built once at start and passed to each of
them (intake, dead letters, reaper, queue metrics) instead of their own lists of arguments. The catalog is
read through it at each use: it follows the catalog source."""

from __future__ import annotations

from dataclasses import dataclass

from taskyard_broker_agent.routing.router import Router
from taskyard_broker_agent.settings import ServiceSettings
from taskyard_common.amqp import Publisher
from taskyard_common.catalog import Catalog
from taskyard_common.catalog_sources import LiveCatalog
from taskyard_common.store import TaskStore
from taskyard_common.topology import Topology


@dataclass(frozen=True, kw_only=True)
class AgentContext:
    settings: ServiceSettings
    # The catalog now: it changes while the agent runs (the router follows it, see ``Resources``).
    live: LiveCatalog
    topology: Topology
    store: TaskStore
    publisher: Publisher
    router: Router

    @property
    def catalog(self) -> Catalog:
        return self.live.catalog

    @property
    def specialists(self) -> frozenset[str]:
        """The catalog's names now: the only values of the bounded ``specialist`` metric labels."""
        return frozenset(self.catalog.names)
