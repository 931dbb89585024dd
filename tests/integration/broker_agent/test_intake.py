"""The broker agent in-process against the real broker, database and development LLM server."""

from __future__ import annotations

import logging
import socket
import uuid

import pytest
from prometheus_client import REGISTRY

from taskyard_broker_agent.routing.prompt import RoutingPrompt
from taskyard_common.catalog import Catalog
from taskyard_common.lifecycle import TaskStatus
from taskyard_common.messages import IntakeMessage, Priority, RoutingDecision, RoutingMethod
from taskyard_common.settings import LlmSettings
from taskyard_common.store import PostgresTaskStore
from tests.support.polling import eventually

pytestmark = pytest.mark.integration


def counter(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


async def assert_only(bus, specialist: str, catalog: Catalog) -> None:
    """Nothing else reached any specialist queue (call after the agent stopped: it publishes no more)."""
    for name in catalog.names:
        assert await bus.depth(bus.topology.specialist_queue(name)) == 0, name
    assert await bus.depth(bus.topology.intake_queue) == 0


async def test_explicit_specialist(run_agent, bus, new_task, store: PostgresTaskStore, catalog):
    message = await new_task("anything at all", requested="support-analyst", metadata={"tenant": "t1"})
    before = counter("taskyard_routing_decisions_total", method="explicit", specialist="support-analyst")
    async with run_agent():
        await bus.send(message)
        work = await bus.wait_work("support-analyst")
    await assert_only(bus, "support-analyst", catalog)

    expected = RoutingDecision(
        method=RoutingMethod.EXPLICIT,
        specialist="support-analyst",
        reason="requested by the client",
        confidence=1,
    )
    assert work.routing == expected
    assert (work.task_id, work.input, work.metadata) == (message.task_id, "anything at all", {"tenant": "t1"})
    assert work.traceparent == message.traceparent
    task = await store.get(message.task_id)
    assert task is not None
    assert (task.status, task.specialist, task.routing) == (TaskStatus.QUEUED, "support-analyst", expected)
    after = counter("taskyard_routing_decisions_total", method="explicit", specialist="support-analyst")
    assert after == before + 1


async def test_each_priority_is_taken_from_its_intake_queue_and_routed_to_its_level_queue(
    run_agent, bus, new_task, catalog
):
    """RabbitMQ 3.x: three intake queues consumed under one limit, three work queues per specialist."""
    messages = {
        level: await new_task(f"a {level.value} one", requested="general", priority=level)
        for level in Priority
    }
    async with run_agent():
        for message in messages.values():
            await bus.send(message)
        works = {level: await bus.wait_work("general", level) for level in Priority}
    for level, work in works.items():
        assert (work.task_id, work.priority) == (messages[level].task_id, level)
    for name in bus.topology.work_queue_names(catalog.names):
        assert await bus.depth(name) == 0, name


async def test_llm_answer_is_used(run_agent, bus, new_task, store, devllm, llm_settings, catalog):
    model = devllm.new_model()
    # The rules would choose researcher here ("sources"); the LLM's summarizer, with evidence, is used.
    answer = {"specialist": "summarizer", "reason": "a summary", "confidence": 0.87}
    await devllm.script(model, [{"tool_calls": [{"name": "route_task", "arguments": answer}]}])
    message = await new_task({"text": "Please summarize this report, with sources"})
    async with run_agent(llm=llm_settings(model)):
        await bus.send(message)
        work = await bus.wait_work("summarizer")
    await assert_only(bus, "summarizer", catalog)

    decided = RoutingDecision(method=RoutingMethod.LLM, **answer)
    assert work.routing.model_dump(
        include={"method", "specialist", "reason", "confidence"}
    ) == decided.model_dump(include={"method", "specialist", "reason", "confidence"})
    # What the decision cost is recorded with it: one LLM call, its tokens, the router's time.
    assert (work.routing.llm_calls, work.routing.cached, work.routing.guard) == (1, False, None)
    assert work.routing.tokens > 0 and work.routing.latency_ms is not None
    assert (await store.get(message.task_id)).routing == work.routing
    [request] = await devllm.requests(model)
    prompt = RoutingPrompt.from_catalog(catalog)
    assert request["model"] == model
    assert request["messages"] == prompt.messages({"text": "Please summarize this report, with sources"})
    assert request["tool_choice"] == {"type": "function", "function": {"name": "route_task"}}
    assert request["tools"] == [prompt.tool]
    assert request["temperature"] == 0


async def test_unscripted_dev_model_routes_by_the_catalog(run_agent, bus, new_task, devllm, llm_settings):
    # The development model fills the enum by word overlap with the system prompt's specialist lines.
    message = await new_task("Customer ticket: refund for a broken order")
    async with run_agent(llm=llm_settings(devllm.new_model())):
        await bus.send(message)
        work = await bus.wait_work("support-analyst")
    assert work.routing.method is RoutingMethod.LLM


@pytest.mark.parametrize(
    ("step", "reason", "cause"),
    [
        (
            {
                "tool_calls": [
                    {
                        "name": "route_task",
                        "arguments": {"specialist": "poet", "reason": "r", "confidence": 1},
                    }
                ]
            },
            "invalid_answer",
            "not in the catalog",
        ),
        ({"content": "I would pick the summarizer."}, "invalid_answer", "no route_task tool call"),
        ({"status": 500}, "llm_error", "LLM answered HTTP 500"),
    ],
    ids=["outside-catalog", "no-tool-call", "http-500"],
)
async def test_bad_llm_answers_fall_back_to_rules(
    run_agent, bus, new_task, store, devllm, llm_settings, catalog, step, reason, cause
):
    model = devllm.new_model()
    await devllm.script(model, [step])
    message = await new_task("Please summarize this document")
    before = counter("taskyard_routing_fallbacks_total", reason=reason)
    async with run_agent(llm=llm_settings(model)):
        await bus.send(message)
        work = await bus.wait_work("summarizer")
    await assert_only(bus, "summarizer", catalog)

    assert work.routing.method is RoutingMethod.RULES
    assert work.routing.reason.startswith("matched: ")
    assert cause in work.routing.reason
    assert (await store.get(message.task_id)).status is TaskStatus.QUEUED
    assert counter("taskyard_routing_fallbacks_total", reason=reason) == before + 1
    assert len(await devllm.requests(model)) == 1


async def test_unreachable_llm_falls_back_to_rules(run_agent, bus, new_task):
    with socket.socket() as sock:  # a port nobody listens on: bound, never listening
        sock.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
        message = await new_task({"ticket": "customer wants a refund"})
        before = counter("taskyard_routing_fallbacks_total", reason="llm_error")
        async with run_agent(llm=LlmSettings(base_url=closed, api_key=None, routing_timeout_seconds=5)):
            await bus.send(message)
            work = await bus.wait_work("support-analyst")
    assert work.routing.method is RoutingMethod.RULES
    assert "LLM unreachable" in work.routing.reason
    assert counter("taskyard_routing_fallbacks_total", reason="llm_error") == before + 1


async def test_without_llm_the_rules_route(run_agent, bus, new_task, devllm, llm_settings):
    message = await new_task("research this and cite sources: https://example.com")
    forced_off = await new_task("Please summarize this document")
    before = counter("taskyard_routing_fallbacks_total", reason="no_llm")
    async with run_agent():
        await bus.send(message)
        work = await bus.wait_work("researcher")
    assert (work.routing.method, work.routing.specialist) == (RoutingMethod.RULES, "researcher")
    assert "fallback" not in work.routing.reason

    # An LLM configured but switched off for routing: it is never called.
    model = devllm.new_model()
    async with run_agent(llm=llm_settings(model), llm_routing=False):
        await bus.send(forced_off)
        work = await bus.wait_work("summarizer")
    assert work.routing.method is RoutingMethod.RULES
    assert await devllm.requests(model) == []
    assert counter("taskyard_routing_fallbacks_total", reason="no_llm") == before + 2


async def test_redelivery_republishes_the_stored_decision(
    run_agent, bus, new_task, store, devllm, llm_settings, catalog
):
    # As if a previous agent recorded the decision and died before its publish was confirmed.
    message = await new_task("Please summarize this document")
    stored = RoutingDecision(method=RoutingMethod.LLM, specialist="general", reason="earlier", confidence=0.4)
    assert await store.route(message.task_id, stored)
    model = devllm.new_model()
    async with run_agent(llm=llm_settings(model)):
        await bus.send(message)
        work = await bus.wait_work("general")
    await assert_only(bus, "general", catalog)
    assert work.routing == stored
    assert await devllm.requests(model) == []  # not routed again


async def test_duplicates_of_started_tasks_are_acked_without_publishing(
    run_agent, bus, new_task, store, catalog, caplog
):
    caplog.set_level(logging.INFO, logger="taskyard_broker_agent")
    message = await new_task("Please summarize this document")
    decision = RoutingDecision(
        method=RoutingMethod.RULES, specialist="summarizer", reason="x", confidence=0.5
    )
    await store.route(message.task_id, decision)
    await store.start(message.task_id, owner="worker-1", lease_seconds=60, attempt=1)
    async with run_agent():
        await bus.send(message)

        async def ignored() -> bool:
            return "ignoring duplicate intake message" in caplog.text

        await eventually(ignored, timeout=15, what="the duplicate to be handled")
    await assert_only(bus, "summarizer", catalog)
    assert (await store.get(message.task_id)).status is TaskStatus.RUNNING


async def test_unknown_task_is_acked_and_nothing_published(run_agent, bus, catalog, caplog):
    caplog.set_level(logging.INFO, logger="taskyard_broker_agent")
    unknown = IntakeMessage(task_id=uuid.uuid4(), input="Please summarize this document")
    async with run_agent():
        await bus.send(unknown)

        async def dropped() -> bool:
            return f"unknown task {unknown.task_id}" in caplog.text

        await eventually(dropped, timeout=15, what="the unknown task to be dropped")
    await assert_only(bus, "summarizer", catalog)
    assert await bus.depth(bus.topology.dead_letter_queue) == 0


async def test_unknown_requested_specialist_fails_the_task(run_agent, bus, new_task, store, catalog):
    message = await new_task("hello", requested="astrologer")

    async def failed() -> bool:
        task = await store.get(message.task_id)
        return task is not None and task.status is TaskStatus.FAILED

    async with run_agent():
        await bus.send(message)
        await eventually(failed, timeout=15, what="the task to fail")
    await assert_only(bus, "general", catalog)
    task = await store.get(message.task_id)
    assert task.error.type == "unknown_specialist"
    assert "astrologer" in task.error.message
    assert task.routing is None


async def test_invalid_message_is_dead_lettered(run_agent, bus, catalog, caplog):
    caplog.set_level(logging.INFO, logger="taskyard_broker_agent")
    rejected = {"queue": bus.topology.intake_queue}
    before = counter("taskyard_dead_letters_total", reason="rejected")
    async with run_agent():
        await bus.send_raw(b'{"kind": "intake", "not": "a valid message"}')

        async def dropped() -> bool:
            return "dropping a dead letter that names no task (reason=rejected" in caplog.text

        # Rejected by the consume helper, then taken from the dead-letter queue by the agent itself: it
        # names no task, so there is nothing to record.
        await eventually(dropped, timeout=15, what="the dead letter to be dropped")
    assert counter("taskyard_messages_rejected_total", **rejected) == 1
    assert counter("taskyard_dead_letters_total", reason="rejected") == before + 1
    assert await bus.depth(bus.topology.dead_letter_queue) == 0
    await assert_only(bus, "general", catalog)


async def test_stop_lets_messages_in_flight_finish(run_agent, bus, new_task, store, devllm, llm_settings):
    model = devllm.new_model()
    answer = {"specialist": "general", "reason": "slow but sure", "confidence": 0.6}
    await devllm.script(
        model, [{"delay_seconds": 0.5, "tool_calls": [{"name": "route_task", "arguments": answer}]}]
    )
    message = await new_task("anything")

    async def asked() -> bool:
        return len(await devllm.requests(model)) == 1

    async with run_agent(llm=llm_settings(model)) as agent:
        await bus.send(message)
        await eventually(asked, timeout=15, what="the routing call to start")
        assert agent.in_flight == 1
    # Stopped while the LLM was still answering: the message was routed, published and acked all the same.
    assert await bus.depth(bus.topology.intake_queue) == 0
    work = await bus.wait_work("general")
    assert work.routing.reason == "slow but sure"
    assert (await store.get(message.task_id)).status is TaskStatus.QUEUED


async def test_stop_hands_back_what_outlives_the_grace_period(
    run_agent, bus, new_task, store, devllm, llm_settings
):
    model = devllm.new_model()
    await devllm.script(model, [{"delay_seconds": 3}])
    message = await new_task("anything")

    async def asked() -> bool:
        return len(await devllm.requests(model)) == 1

    async with run_agent(llm=llm_settings(model), shutdown_grace_seconds=0.05):
        await bus.send(message)
        await eventually(asked, timeout=15, what="the routing call to start")
    # Requeued for the next broker agent; nothing was recorded or published.
    assert await bus.depth(bus.topology.intake_queue) == 1
    assert await bus.depth(bus.topology.specialist_queue("general")) == 0
    assert (await store.get(message.task_id)).status is TaskStatus.PENDING
