"""`make up`'s workers: one process per specialist of the catalog, following the catalog while it runs.

A specialist added to the catalog (the file, the database or the cluster's resources, whichever
``TASKYARD_CATALOG_SOURCE`` names) gets a worker process of its own, on the next free health port; a
deleted one's worker is stopped for good. A changed specialist needs nothing here: its worker follows its
own spec, and no other process restarts.
"""

from __future__ import annotations

import itertools

from taskyard_common.catalog import Catalog
from taskyard_common.catalog_sources import diff
from taskyard_devkit.supervisor import Supervised, Supervisor
from taskyard_devkit.up.say import say


class Workers:
    def __init__(self, supervisor: Supervisor, health_base_port: int) -> None:
        self._supervisor = supervisor
        # The broker agent has health_base_port; workers take the ports after it, never reused.
        self._ports = itertools.count(health_base_port + 1)
        self.services: dict[str, Supervised] = {}
        self.ports: dict[str, int] = {}

    def add(self, name: str) -> Supervised:
        port = next(self._ports)
        service = self._supervisor.add(
            f"worker-{name}", ["taskyard-worker", "--specialist", name], TASKYARD_HEALTH_PORT=str(port)
        )
        self.services[name], self.ports[name] = service, port
        return service

    async def follow(self, old: Catalog, new: Catalog) -> None:
        """A ``LiveCatalog`` listener: start the added specialists' workers, stop the removed ones'."""
        change = diff(old, new)
        for name in change.added:
            self._supervisor.start(self.add(name))
            say(f"specialist {name} added: worker-{name} started (health and metrics on :{self.ports[name]})")
        for name in change.removed:
            service = self.services.pop(name, None)
            self.ports.pop(name, None)
            if service is not None:
                await self._supervisor.retire(service)
                say(f"specialist {name} deleted: worker-{name} stopped")
