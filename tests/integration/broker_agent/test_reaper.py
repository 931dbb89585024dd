"""The lease reaper against the real database and broker: requeue, dead-letter, re-publish, concurrency."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from datetime import UTC, datetime, timedelta
from urllib.parse import urlsplit, urlunsplit

import pytest
from prometheus_client import REGISTRY

from taskyard_broker_agent.reaper import Reaper
from taskyard_common.amqp import Publisher
from taskyard_common.errors import StoreUnavailable
from taskyard_common.lifecycle import TaskStatus
from taskyard_common.messages import WorkMessage
from taskyard_common.settings import DbSettings
from taskyard_common.store import PostgresTaskStore
from taskyard_common.topology import declare
from tests.support.polling import eventually
from tests.support.tcp_proxy import TcpProxy

pytestmark = pytest.mark.integration

FAST = {"reaper_interval_seconds": 0.05}


def counter(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


async def lose_lease(store, task_id, attempt: int = 1) -> None:
    """A worker starts the task, settles its message early and dies: its lease (0 s) has already expired."""
    started = await store.start(task_id, owner="ghost", lease_seconds=0, attempt=attempt)
    assert started.outcome.value == "started"
    assert await store.settle(task_id, "ghost")


def reclaimed(store, task_id, expirations: int):
    async def check() -> bool:
        task = await store.get(task_id)
        return task.status is not TaskStatus.RUNNING and task.lease_expirations == expirations

    return check


def published(store, task_id):
    async def check() -> bool:
        return (await store.get(task_id)).published_at is not None

    return check


async def test_expired_lease_is_requeued_and_published_again(run_agent, bus, routed_task, store):
    deadline = datetime.now(UTC) + timedelta(hours=1)
    work = await routed_task("summarizer", deadline=deadline, timeout_seconds=30)
    await lose_lease(store, work.task_id, attempt=2)
    requeued = counter("taskyard_leases_reclaimed_total", outcome="requeued")
    async with run_agent(**FAST) as agent:
        again = await bus.wait_work("summarizer")
        await eventually(published(store, work.task_id), what="the publish to be marked")
        assert await agent.ready()
    # The same task, its limits, and its attempt number: a lost lease is not a charged attempt.
    assert again == work.model_copy(update={"attempt": 2, "sent_at": again.sent_at})
    task = await store.get(work.task_id)
    assert (task.status, task.lease_expirations, task.lease_owner) == (TaskStatus.QUEUED, 1, None)
    assert counter("taskyard_leases_reclaimed_total", outcome="requeued") == requeued + 1


async def test_lease_expiring_too_often_dead_letters_the_task(
    run_agent, bus, routed_task, store, amqp_settings
):
    work = await routed_task("researcher")
    limit = amqp_settings.delivery_limit
    dead = counter("taskyard_dead_letters_total", reason="delivery_limit")
    async with run_agent(**FAST):
        for expirations in range(1, limit + 2):
            await lose_lease(store, work.task_id)
            await eventually(reclaimed(store, work.task_id, expirations), what=f"reclaim {expirations}")
    task = await store.get(work.task_id)
    assert task.status is TaskStatus.DEAD_LETTERED
    assert (task.dead_letter["reason"], task.dead_letter["queue"]) == ("delivery_limit", "lease")
    letter = await store.get_dead_letter(work.task_id)
    assert (letter.reason, letter.queue, letter.specialist) == ("delivery_limit", "lease", "researcher")
    kept = WorkMessage.model_validate(letter.message)
    assert (kept.task_id, kept.specialist, kept.input, kept.routing) == (
        work.task_id,
        "researcher",
        work.input,
        work.routing,
    )
    listed = await store.list_dead_letters(specialist=None, reason="delivery_limit", limit=10, after=None)
    assert [d.task_id for d in listed] == [work.task_id]
    assert counter("taskyard_dead_letters_total", reason="delivery_limit") == dead + 1
    # Published again after each of the first ``limit`` expirations, never after the last.
    assert await bus.depth(bus.topology.specialist_queue("researcher")) == limit


async def test_two_reapers_at_once_reclaim_each_task_once(
    bus, routed_task, store, amqp_settings, catalog, make_context
):
    await declare(bus.channel, bus.topology, catalog.names, amqp_settings)
    works = [await routed_task("general") for _ in range(5)]
    for work in works:
        await lose_lease(store, work.task_id)
    publishers = [await Publisher.open(bus.connection, amqp_settings) for _ in range(2)]
    try:
        reapers = [
            Reaper(make_context(publisher, reaper_interval_seconds=1, republish_after_seconds=60))
            for publisher in publishers
        ]
        first, second = await asyncio.gather(*(r.sweep() for r in reapers))
        assert not set(first.requeued) & set(second.requeued)
        assert set(first.requeued) | set(second.requeued) == {w.task_id for w in works}
        again = await asyncio.gather(*(r.sweep() for r in reapers))
        assert [s.requeued for s in again] == [[], []]
    finally:
        for publisher in publishers:
            await publisher.close()
    assert await bus.depth(bus.topology.specialist_queue("general")) == len(works)
    for work in works:
        assert (await store.get(work.task_id)).lease_expirations == 1


async def test_requeued_task_never_published_is_published_later(run_agent, bus, routed_task, store):
    work = await routed_task("summarizer")
    await lose_lease(store, work.task_id)
    # Another broker agent reclaimed it and died before its publish.
    assert await store.reclaim(work.task_id, max_expirations=3) is TaskStatus.QUEUED
    assert (await store.get(work.task_id)).published_at is None
    async with run_agent(**FAST, republish_after_seconds=0.2):
        again = await bus.wait_work("summarizer")
        await eventually(published(store, work.task_id), what="the publish to be marked")
    assert again.task_id == work.task_id


async def test_replays_whose_publish_is_unconfirmed_are_published_once_with_their_limits(
    run_agent, bus, routed_task, store
):
    # A dead-letter replay whose publish failed (or whose API died before it): queued, published_at NULL.
    # The reaper is the one owner of such tasks (the API's sweeper announces only pending ones).
    deadline = datetime.now(UTC) + timedelta(days=1)
    work = await routed_task("summarizer", deadline=deadline, timeout_seconds=42.5)
    queue = bus.topology.specialist_queue("summarizer")
    assert await store.dead_letter(
        work.task_id, reason="rejected", queue=queue, deaths=[], message={}, specialist="summarizer"
    )
    assert await store.replay(work.task_id, None) is not None
    # Waiting in a long queue, announced long ago: never published again.
    waiting = await routed_task("summarizer")
    await store.mark_published(waiting.task_id)
    async with run_agent(**FAST, republish_after_seconds=0.2):
        again = await bus.wait_work("summarizer")
        await eventually(published(store, work.task_id), what="the publish to be marked")
    assert (again.task_id, again.attempt) == (work.task_id, 1)
    assert (again.deadline, again.timeout_seconds) == (deadline, 42.5)
    assert await bus.depth(queue) == 0


async def test_refused_publish_is_retried_next_round(
    run_agent, bus, routed_task, store, amqp_settings, caplog
):
    caplog.set_level(logging.INFO, logger="taskyard_broker_agent")
    work = await routed_task("summarizer")
    async with run_agent(**FAST):
        await bus.fill("summarizer", amqp_settings.max_length)
        await lose_lease(store, work.task_id)

        async def refused() -> bool:
            return f"could not publish task {work.task_id} to summarizer" in caplog.text

        await eventually(refused, timeout=15, what="the publish to be refused")
        assert (await store.get(work.task_id)).published_at is None
        await (await bus.queue(bus.topology.specialist_queue("summarizer"))).purge()
        again = await bus.wait_work("summarizer")
        await eventually(published(store, work.task_id), what="the publish to be marked")
    assert again.task_id == work.task_id


async def test_leases_that_ran_out_while_the_database_was_away_are_left_to_their_workers_heartbeats(
    bus, routed_task, store, db_settings, amqp_settings, make_context
):
    # An outage longer than the lease: the worker's heartbeat could not renew it, the worker is alive.
    alive = (await routed_task("general")).task_id
    await lose_lease(store, alive)
    url = urlsplit(db_settings.url.get_secret_value())
    user = url.netloc.rsplit("@", 1)[0] + "@" if "@" in url.netloc else ""
    async with TcpProxy(url.hostname or "127.0.0.1", url.port or 5432) as proxy:
        proxied = DbSettings(
            url=urlunsplit(url._replace(netloc=f"{user}127.0.0.1:{proxy.port}")),
            db_schema=db_settings.db_schema,
            command_timeout_seconds=2,
        )
        reaper_store = await PostgresTaskStore.open(proxied)
        publisher = await Publisher.open(bus.connection, amqp_settings)
        try:
            context = make_context(publisher, reaper_interval_seconds=0.05, reaper_recovery_grace_seconds=1)
            reaper = Reaper(dataclasses.replace(context, store=reaper_store))
            await proxy.stop()
            with pytest.raises(StoreUnavailable):
                await reaper.sweep()
            await proxy.resume()
            back = await reaper.sweep()
            assert (back.requeued, back.held_back) == ([], 1)
            # The live worker's first heartbeat through renews its lease; a dead worker's stays expired.
            assert (await store.heartbeat("ghost", [alive], 30))[0] == {alive}
            dead = (await routed_task("general")).task_id
            await lose_lease(store, dead)

            async def dead_one_reclaimed() -> bool:
                return (await reaper.sweep()).requeued == [dead]

            await eventually(dead_one_reclaimed, what="the dead worker's task reclaimed after the grace")
        finally:
            await publisher.close()
            await reaper_store.close()
    task = await store.get(alive)
    assert (task.status, task.lease_owner, task.lease_expirations) == (TaskStatus.RUNNING, "ghost", 0)


async def test_tasks_it_cannot_republish_never_fill_its_batch(
    bus, routed_task, store, amqp_settings, catalog, make_context
):
    """Stale tasks whose specialist has no queue (deleted by hand) come back unroutable every round: they
    are left out for a while, so a batch full of them never starves a task that can be sent."""
    await declare(bus.channel, bus.topology, catalog.names, amqp_settings)
    stuck = [await routed_task("general") for _ in range(2)]
    sendable = await routed_task("summarizer")
    for work in (*stuck, sendable):  # reclaimed by an agent that died before its publish, oldest first
        await lose_lease(store, work.task_id)
        assert await store.reclaim(work.task_id, max_expirations=3) is TaskStatus.QUEUED
    await bus.channel.queue_delete(bus.topology.specialist_queue("general"))
    publisher = await Publisher.open(bus.connection, amqp_settings)
    try:
        reaper = Reaper(make_context(publisher, republish_after_seconds=0.001), batch_size=2)
        await asyncio.sleep(0.01)
        first = await reaper.sweep()
        assert first.republished == []
        second = await reaper.sweep()
        assert second.republished == [sendable.task_id]
    finally:
        await publisher.close()
