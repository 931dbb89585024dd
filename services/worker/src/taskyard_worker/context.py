"""What the parts of a worker share: the work handler, the attempt runner, the heartbeat and the control
consumer each take this one typed context instead of the same seven loose constructor arguments."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from taskyard_common.amqp import Publisher
from taskyard_common.catalog import SpecialistSpec
from taskyard_common.slots import WeightedSlots
from taskyard_common.store import TaskStore
from taskyard_common.store.budgets import BudgetCache
from taskyard_common.topology import Topology
from taskyard_worker.checkpoints import StepWriter
from taskyard_worker.flights import Flights
from taskyard_worker.resources import WorkerResources
from taskyard_worker.runtime import Agent
from taskyard_worker.settings import WorkerSettings

# How long a worker trusts a tenant's budget it read: a changed max_cost_per_task applies to the tasks it
# starts after that (a task that has started keeps the limit it started with).
BUDGET_CACHE_SECONDS = 5.0


@dataclass(frozen=True, kw_only=True)
class WorkerContext:
    spec: SpecialistSpec
    settings: WorkerSettings
    # The queues' x-delivery-limit (TASKYARD_AMQP_DELIVERY_LIMIT): it also bounds a task's crashes (crashes.py).
    delivery_limit: int
    store: TaskStore
    publisher: Publisher
    topology: Topology
    # This process's lease owner id: every transition out of ``running`` names it.
    owner: str
    agent: Agent
    # Writes the step checkpoints of every run of this worker, in batches.
    steps: StepWriter
    # One per task this worker may run at once (the specialist's concurrency), shared by the deliveries of
    # every priority level and granted by weighted selection (taskyard_common.slots). The prefetch alone
    # does not bound it: each level's queue has its own, and a long task's message is acked early.
    slots: WeightedSlots
    # The tenants' budgets (their max_cost_per_task), read at most every few seconds per tenant.
    budgets: BudgetCache
    flights: Flights = field(default_factory=Flights)
    # How deliveries ended since start (completed, retry_scheduled, quarantined, ...): logged at exit.
    outcomes: Counter[str] = field(default_factory=Counter)

    @classmethod
    def build(cls, resources: WorkerResources) -> WorkerContext:
        settings = resources.settings
        agent = Agent(
            resources.spec,
            resources.llm,
            settings.llm.model,
            resources.tools,
            max_tool_output_chars=settings.worker.max_tool_output_chars,
            max_tool_calls_per_reply=settings.worker.max_tool_calls_per_reply,
            models=resources.catalog.model_table,
            limits=resources.limits,
            endpoints=resources.endpoints,
        )
        return cls(
            spec=resources.spec,
            settings=settings.worker,
            delivery_limit=settings.amqp.delivery_limit,
            store=resources.store,
            publisher=resources.publisher,
            topology=resources.topology,
            owner=resources.owner,
            agent=agent,
            steps=StepWriter(resources.store, owner=resources.owner),
            slots=WeightedSlots(resources.spec.concurrency),
            budgets=BudgetCache(resources.budgets.get, ttl_seconds=BUDGET_CACHE_SECONDS),
        )

    @property
    def specialist(self) -> str:
        return self.spec.name

    def count(self, outcome: str) -> None:
        self.outcomes[outcome] += 1
