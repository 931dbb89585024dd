"""The chart's KEDA objects, run through tests/deploy/keda_model.py over scripted timelines.

Every number comes from the rendered chart: the ScaledObject or ScaledJob (triggers, targets, activation,
cooldown, polling, HPA behaviour, fallback), the catalog ConfigMap (each worker's concurrency) and the worker's
env (its shutdown grace, the most work one hand-back can lose; when it settles a message early). The world
around the autoscaler is kept small: a worker runs up to `concurrency` tasks, acks a task's message early once
it has run `settle_after` seconds on that worker, and on SIGTERM hands its running tasks back (each resumes
from its last checkpoint on another worker, losing at most one step). KEDA cannot choose which pod a scale-in
stops: the world stops the busiest one.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from taskyard_common.catalog import parse_catalog
from taskyard_worker.settings import WorkerSettings
from tests.deploy.conftest import CHART, of_kind, pod_specs, render
from tests.deploy.keda_model import ScaledJobSpec, ScaledObjectModel, ScaledObjectSpec, jobs_to_create

pytestmark = pytest.mark.deploy

HOUR = 3600


@dataclass
class Task:
    work: float
    pod: int | None = None
    since: float = 0.0
    settled: bool = False
    done_at: float | None = None


@dataclass
class World:
    concurrency: int
    settle_after: float
    step: float
    tasks: list[Task]
    pods: list[int] = field(default_factory=list)
    ready: list[Task] = field(default_factory=list)
    hand_backs: int = 0
    created: int = 0

    def __post_init__(self) -> None:
        self.ready = list(self.tasks)

    def running(self, pod: int | None = None) -> list[Task]:
        return [t for t in self.tasks if t.pod is not None and (pod is None or t.pod == pod)]

    def unfinished(self) -> int:
        return sum(t.done_at is None for t in self.tasks)

    def metrics(self) -> dict[str, float | None]:
        """What each trigger reads: the store's unfinished tasks, the queue's ready + unacked messages."""
        unacked = sum(not t.settled for t in self.running())
        return {"unfinished-tasks": self.unfinished(), "work-queue": len(self.ready) + unacked,
                "quarantine-queue": 0}  # fmt: skip

    def resize(self, replicas: int) -> None:
        while len(self.pods) < replicas:
            self.created += 1
            self.pods.append(self.created)
        while len(self.pods) > replicas:
            victim = max(self.pods, key=lambda p: len(self.running(p)))
            self.pods.remove(victim)
            for task in self.running(victim):  # handed back: resumes elsewhere from its last checkpoint
                task.pod, task.settled, task.work = None, False, task.work + self.step
                self.ready.append(task)
                self.hand_backs += 1

    def deliver(self, now: float) -> None:
        for pod in self.pods:
            while self.ready and len(self.running(pod)) < self.concurrency:
                task = self.ready.pop(0)
                task.pod, task.since = pod, now

    def advance(self, now: float, dt: float) -> None:
        for task in self.running():
            task.work -= dt
            if task.work <= 0:
                task.pod, task.done_at = None, now + dt
            elif not task.settled and now + dt - task.since >= self.settle_after:
                task.settled = True


@dataclass
class Run:
    world: World
    history: list[dict[str, Any]]

    def while_unfinished(self) -> list[dict[str, Any]]:
        return [h for h in self.history if h["unfinished"]]


def simulate(
    so: dict[str, Any], world: World, horizon: float, failing: tuple[float, float] | None = None
) -> Run:
    """One KEDA poll (and HPA sync) per pollingInterval; `failing`: when the store's scaler errors."""
    model = ScaledObjectModel(ScaledObjectSpec.from_manifest(so))
    history = []
    now = 0.0
    while now < horizon:
        metrics = world.metrics()
        if failing and failing[0] <= now < failing[1]:
            metrics["unfinished-tasks"] = None
        world.resize(model.poll(now, metrics))
        world.deliver(now)
        history.append({"t": now, "replicas": model.replicas, "running": len(world.running()),
                        "unfinished": world.unfinished()})  # fmt: skip
        world.advance(now, model.spec.polling)
        now += model.spec.polling
    return Run(world, history)


def _chart(*sets: str) -> list[dict[str, Any]]:
    return render(sets=tuple(sets))


def _worker(objects: list[dict[str, Any]], specialist: str) -> tuple[dict[str, Any], World]:
    """The specialist's ScaledObject, and a world built from its rendered config, with no tasks yet."""
    (so,) = [
        o for o in of_kind(objects, "ScaledObject") if o["metadata"]["name"].endswith(f"worker-{specialist}")
    ]
    (catalog,) = [o for o in of_kind(objects, "ConfigMap") if o["metadata"]["name"].endswith("-catalog")]
    spec = parse_catalog(catalog["data"]["specialists.yaml"]).get(specialist)
    (pod,) = [s for n, s in pod_specs(objects) if n.endswith(f"worker-{specialist}")]
    env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
    settle_after = float(
        env.get("TASKYARD_WORKER_SETTLE_AFTER_SECONDS")
        or WorkerSettings.model_fields["settle_after_seconds"].default
    )
    step = float(env["TASKYARD_WORKER_SHUTDOWN_GRACE_SECONDS"])  # the most one hand-back can lose
    return so, World(spec.concurrency, settle_after, step, [])


def _queue_only(so: dict[str, Any]) -> dict[str, Any]:
    """The same ScaledObject without the task-store trigger: what the chart scaled on before."""
    triggers = [t for t in so["spec"]["triggers"] if t["type"] == "rabbitmq"]
    return {**so, "spec": {**so["spec"], "triggers": triggers}}


def _with_tasks(world: World, *works: float) -> World:
    return World(world.concurrency, world.settle_after, world.step, [Task(w) for w in works])


def test_an_hour_long_task_settled_early_keeps_its_worker():
    so, world = _worker(_chart(), "researcher")
    assert so["spec"]["minReplicaCount"] == 0
    assert world.settle_after < HOUR, "the task outlives its message"
    run = simulate(so, _with_tasks(world, HOUR), horizon=2 * HOUR)
    (task,) = run.world.tasks
    assert task.done_at is not None and task.done_at <= HOUR + so["spec"]["pollingInterval"]
    assert run.world.hand_backs == 0
    for h in run.while_unfinished():
        assert h["replicas"] >= max(1, math.ceil(h["running"] / world.concurrency)), h
    assert run.history[-1]["replicas"] == 0, "idle again: back to zero after the cooldown"


def test_the_queue_only_trigger_scales_the_same_task_to_zero_over_and_over():
    so, world = _worker(_chart(), "researcher")
    run = simulate(_queue_only(so), _with_tasks(world, HOUR), horizon=2 * HOUR)
    zero_while_busy = [h for h in run.while_unfinished() if h["replicas"] == 0 and h["t"] > 0]
    assert zero_while_busy, "scaled to zero while the task ran"
    assert run.world.hand_backs >= 2, "a scale-in livelock: handed back, started again, handed back"
    (task,) = run.world.tasks
    assert task.done_at is None or task.done_at > HOUR + 2 * world.step


def test_with_one_warm_replica_busy_workers_are_not_scaled_in():
    so, world = _worker(_chart("worker.autoscaling.minReplicaCount=1"), "researcher")
    burst = _with_tasks(world, *[HOUR] * (3 * world.concurrency))
    run = simulate(so, burst, horizon=HOUR + 600)
    assert run.world.hand_backs == 0
    assert all(t.done_at is not None for t in run.world.tasks)
    for h in run.while_unfinished()[1:]:
        assert h["replicas"] >= math.ceil(h["running"] / world.concurrency), h
    queue_only = simulate(_queue_only(so), _with_tasks(world, *[HOUR] * (3 * world.concurrency)), HOUR + 600)
    assert queue_only.world.hand_backs > 0, "the queue-only trigger scales busy workers in once settled"


def test_scale_in_is_slow_and_never_below_the_running_work():
    """The work thins out over an hour: replicas follow it down one pod a minute, only after the window, and
    never below what the running tasks need. The tasks the stopped pods held are handed back (KEDA cannot
    pick an idle pod; the world stops the busiest): at most one worker's tasks per pod removed, each losing
    one step."""
    so, world = _worker(_chart("worker.autoscaling.minReplicaCount=1"), "general")
    rules = so["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]["scaleDown"]
    (policy,) = rules["policies"]
    # Ten workers' worth of tasks, one worker's worth finishing every two minutes from the tenth minute on.
    works = [600 + 120 * (i // world.concurrency) for i in range(10 * world.concurrency)]
    run = simulate(so, _with_tasks(world, *works), horizon=3 * HOUR)
    assert all(t.done_at is not None for t in run.world.tasks)
    for h in run.history:
        assert h["replicas"] >= math.ceil(h["running"] / world.concurrency), h
    replicas = [(h["t"], h["replicas"]) for h in run.history]
    drops = [(t, prev - r) for (_, prev), (t, r) in itertools.pairwise(replicas) if r < prev]
    assert len(drops) == 9 and replicas[-1][1] == 1
    first_lower_need = min(h["t"] for h in run.history if 0 < h["unfinished"] < 10 * world.concurrency)
    assert drops[0][0] >= first_lower_need + rules["stabilizationWindowSeconds"]
    for (t1, d1), (t2, _) in itertools.pairwise(drops):
        assert d1 <= policy["value"] and t2 - t1 >= policy["periodSeconds"], drops
    assert run.world.hand_backs <= len(drops) * world.concurrency


@pytest.mark.parametrize("fallback", [0, 1])
def test_a_failing_store_scaler_holds_the_workers_unless_a_low_fallback_is_set(fallback):
    so, world = _worker(_chart(f"worker.autoscaling.fallback.replicas={fallback}"), "researcher")
    assert ("fallback" in so["spec"]) == bool(fallback)
    burst = _with_tasks(world, *[HOUR] * (3 * world.concurrency))
    run = simulate(so, burst, horizon=HOUR + 600, failing=(1200, 3000))
    if fallback:
        assert run.world.hand_backs > 0, "a fallback below the running work scales busy workers in"
    else:
        assert run.world.hand_backs == 0, (
            "the HPA never scales in on a missing metric; KEDA keeps its replicas"
        )
        assert all(t.done_at is not None for t in run.world.tasks)


def _scaled_job() -> dict[str, Any]:
    (job,) = of_kind(render(CHART / "ci" / "job-mode-values.yaml"), "ScaledJob")
    return job


@pytest.mark.parametrize("queued", [1, 15, 16, 17, 40, 500])
@pytest.mark.parametrize("running", [0, 1, 3])
def test_default_strategy_starts_ceil_of_the_work_over_concurrency_minus_running_jobs(queued, running):
    spec = ScaledJobSpec.from_manifest(_scaled_job())
    concurrency = int(next(t for t in spec.triggers if t.name == "work-queue").target)
    created = jobs_to_create(spec, {"work-queue": queued, "quarantine-queue": 0}, running=running, pending=0)
    expected = min(math.ceil(queued / concurrency), spec.max_replicas) - running
    assert created == max(expected, 0)


def _jobs_over_polls(strategy: str, queued: int, polls: int = 10) -> int:
    """Jobs after some polls while `queued` messages sit with them (each Job holds up to concurrency of them,
    unacked, so the queue's ready + unacked count stays `queued` until they finish)."""
    spec = ScaledJobSpec.from_manifest(_scaled_job())
    spec = ScaledJobSpec(spec.min_replicas, spec.max_replicas, strategy, spec.triggers)
    jobs = 0
    for _ in range(polls):
        jobs += jobs_to_create(spec, {"work-queue": queued, "quarantine-queue": 0}, running=jobs, pending=0)
    return jobs


def test_default_never_starts_jobs_beyond_the_work_where_accurate_fills_to_the_maximum():
    spec = ScaledJobSpec.from_manifest(_scaled_job())
    assert spec.strategy == "default"
    concurrency = int(next(t for t in spec.triggers if t.name == "work-queue").target)
    assert _jobs_over_polls("default", 40) == math.ceil(40 / concurrency)
    assert _jobs_over_polls("accurate", 40) == spec.max_replicas, "what the chart's former strategy did"


def test_a_redelivered_message_in_quarantine_starts_a_job():
    spec = ScaledJobSpec.from_manifest(_scaled_job())
    assert jobs_to_create(spec, {"work-queue": 0, "quarantine-queue": 1}, running=0, pending=0) == 1


def test_the_model_reads_the_rendered_values(tmp_path: Path):
    """Changing the chart changes the model's input: nothing above is a constant of the test."""
    values = tmp_path / "v.yaml"
    values.write_text(yaml.safe_dump({"worker": {"specialists": {"researcher": {"tasksPerReplica": 4,
                                      "cooldownPeriod": 900}}}}))  # fmt: skip
    (so,) = [
        o for o in of_kind(render(values), "ScaledObject") if o["metadata"]["name"].endswith("researcher")
    ]
    spec = ScaledObjectSpec.from_manifest(so)
    assert spec.cooldown == 900 and {t.name: t.target for t in spec.triggers}["unfinished-tasks"] == 4
    model = ScaledObjectModel(spec, replicas=1)
    assert model.poll(0, {"unfinished-tasks": 9, "work-queue": 0, "quarantine-queue": 0}) == 3
