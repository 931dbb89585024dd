"""The agent loop alone, against the development LLM over HTTP through the real openai client."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any, ClassVar

import openai
import pytest

from taskyard_common.catalog import SpecialistSpec
from taskyard_common.errors import TransientError
from taskyard_common.llm import make_client
from taskyard_common.messages import Usage
from taskyard_common.metrics import LLM_STEP_RETRIES
from taskyard_common.settings import LlmSettings
from taskyard_common.store import Step
from taskyard_devkit.devllm import DevLlm
from taskyard_devkit.ports import free_port
from taskyard_worker.llm_calls import AttemptTimeout, LlmRateLimited, LlmRejected, MaxStepsExceeded
from taskyard_worker.run_state import HandBackAfterStep, RunTrace
from taskyard_worker.runtime import Agent
from taskyard_worker.tools import Tool, ToolRegistry
from taskyard_worker.tools.calculator import Calculator

pytestmark = pytest.mark.integration

TASK = uuid.uuid4()


def counter(metric: Any, *labels: str) -> float:
    return float(metric.labels(*labels)._value.get())


class Shout(Tool):
    """A test tool: long output, and a crash on demand."""

    name = "shout"
    description = "repeat a word many times"
    parameters: ClassVar[dict[str, Any]] = {"type": "object", "properties": {"word": {"type": "string"}}}

    async def run(self, arguments: dict[str, Any]) -> str:
        if arguments.get("word") == "crash":
            raise RuntimeError("a bug in the tool")
        return str(arguments["word"]) * 1000


class FakeFetch(Tool):
    """Stands in for http_fetch (same name): a page for any URL but /missing."""

    name = "http_fetch"
    description = "fetch a page"
    parameters: ClassVar[dict[str, Any]] = {"type": "object", "properties": {"url": {"type": "string"}}}

    async def run(self, arguments: dict[str, Any]) -> str:
        status = 404 if str(arguments["url"]).endswith("/missing") else 200
        return f"HTTP {status}\ncontent-type: text/html\n\nAldermoor was founded in 1962."


def spec(**overrides: Any) -> SpecialistSpec:
    fields: dict[str, Any] = {
        "name": "general",
        "description": "test specialist",
        "instructions": "You are a test assistant.",
        "tools": ["calculator"],
        "max_steps": 4,
        "timeout_seconds": 30,
        **overrides,
    }
    return SpecialistSpec(**fields)


@pytest.fixture
async def client(devllm: DevLlm) -> AsyncIterator[openai.AsyncOpenAI]:
    llm = make_client(LlmSettings(base_url=devllm.base_url, api_key=None, timeout_seconds=10))
    try:
        yield llm
    finally:
        await llm.close()


@pytest.fixture
async def tools() -> AsyncIterator[ToolRegistry]:
    registry = ToolRegistry([Calculator(), Shout()])
    try:
        yield registry
    finally:
        await registry.close()


def agent(client: openai.AsyncOpenAI, default_model: str, registry: ToolRegistry, **overrides: Any) -> Agent:
    return Agent(spec(**overrides), client, default_model, registry, max_tool_output_chars=200)


async def test_bad_tool_calls_become_error_results_the_model_reads(
    client: openai.AsyncOpenAI, tools: ToolRegistry, devllm: DevLlm
) -> None:
    model = devllm.new_model()
    calls = [
        {"name": "calculator", "arguments": {"expression": "2 + 2"}},
        {"name": "calculator", "arguments": {"expression": "__import__('os')"}},
        {"name": "rm_rf", "arguments": {}},
        {"name": "calculator", "arguments": "{not json"},
        {"name": "shout", "arguments": {"word": "crash"}},
        {"name": "shout", "arguments": {"word": "ab"}},
    ]
    await devllm.script(model, [{"tool_calls": calls}, {"content": "final"}])
    result = await agent(client, model, tools).run("go")
    assert result.output == "final" and result.steps == 2
    assert result.tool_calls == [
        {"name": "calculator", "ok": True},
        {"name": "calculator", "ok": False},
        {"name": "rm_rf", "ok": False},
        {"name": "calculator", "ok": False},
        {"name": "shout", "ok": False},
        {"name": "shout", "ok": True},
    ]
    second = (await devllm.requests(model))[1]
    results = [m["content"] for m in second["messages"] if m["role"] == "tool"]
    assert results[0] == "4"
    assert results[1].startswith("error: ")
    assert results[2].startswith("error: there is no tool named 'rm_rf'")
    assert results[3] == "error: the arguments are not valid JSON"
    assert results[4] == "error: the tool failed unexpectedly"
    # Tool output is cut to max_tool_output_chars before it reaches the model.
    assert results[5].startswith("ab" * 100)
    assert results[5].endswith("[tool output truncated to 200 characters]")
    # One result per call, in order, answering the call ids.
    ids = [c["id"] for c in second["messages"][-7]["tool_calls"]]
    assert ids == [m["tool_call_id"] for m in second["messages"] if m["role"] == "tool"]


async def test_the_tool_calls_of_one_reply_are_bounded(
    client: openai.AsyncOpenAI, tools: ToolRegistry, devllm: DevLlm
) -> None:
    """Past ``max_tool_calls_per_reply`` the calls of a reply are answered with an error, not run: one
    step never holds more than that many results (each http_fetch holds up to its byte cap)."""
    model = devllm.new_model()
    calls = [{"name": "calculator", "arguments": {"expression": f"{n} + 1"}} for n in range(5)]
    await devllm.script(model, [{"tool_calls": calls}, {"content": "final"}])
    bounded = Agent(spec(), client, model, tools, max_tool_output_chars=200, max_tool_calls_per_reply=3)
    result = await bounded.run("go")
    assert result.output == "final"
    assert [c["ok"] for c in result.tool_calls] == [True, True, True, False, False]
    second = (await devllm.requests(model))[1]
    results = [m["content"] for m in second["messages"] if m["role"] == "tool"]
    assert results[:3] == ["1", "2", "3"]
    assert (
        results[3]
        == results[4]
        == ("error: at most 3 tool calls run per reply; this one was not run, call it again")
    )
    ids = [c["id"] for c in second["messages"][-6]["tool_calls"]]
    assert ids == [m["tool_call_id"] for m in second["messages"] if m["role"] == "tool"]


async def test_an_answer_from_fetched_pages_lists_those_it_does_not_cite(
    client: openai.AsyncOpenAI, devllm: DevLlm
) -> None:
    model = devllm.new_model()
    page, missing = "http://127.0.0.1:1/about", "http://127.0.0.1:1/missing"
    calls = [{"name": "http_fetch", "arguments": {"url": url}} for url in (page, missing)]
    await devllm.script(model, [{"tool_calls": calls}, {"content": "Founded in 1962."}])
    researcher = agent(client, model, ToolRegistry([FakeFetch()]), tools=["http_fetch"])
    result = await researcher.run("When was Aldermoor founded?")
    assert result.output == f"Founded in 1962.\n\nSources:\n- {page}"  # the page that loaded only
    cited = devllm.new_model()
    await devllm.script(cited, [{"tool_calls": calls[:1]}, {"content": f"Founded in 1962 ({page})."}])
    result = await agent(client, cited, ToolRegistry([FakeFetch()]), tools=["http_fetch"]).run("When?")
    assert result.output == f"Founded in 1962 ({page})."


async def test_a_specialist_that_requires_a_tool_first_asks_for_one_on_its_first_call_only(
    client: openai.AsyncOpenAI, tools: ToolRegistry, devllm: DevLlm
) -> None:
    model = devllm.new_model()
    step = {"tool_calls": [{"name": "calculator", "arguments": {"expression": "1 + 1"}}]}
    await devllm.script(model, [step, {"content": "2"}])
    result = await agent(client, model, tools, require_tool_first=True).run("1 + 1?")
    assert result.output == "2"
    first, second = await devllm.requests(model)
    assert first["tool_choice"] == "required" and "tool_choice" not in second
    plain = devllm.new_model()
    await agent(client, plain, tools).run("hello")
    [request] = await devllm.requests(plain)
    assert "tool_choice" not in request


async def test_a_tool_is_required_first_only_for_inputs_that_match_the_specialists_patterns(
    client: openai.AsyncOpenAI, tools: ToolRegistry, devllm: DevLlm
) -> None:
    model = devllm.new_model()
    step = {"tool_calls": [{"name": "calculator", "arguments": {"expression": "48 * 27"}}]}
    await devllm.script(model, [step, {"content": "1296"}, {"content": "Hello!"}])
    computing = agent(client, model, tools, require_tool_first_when=[r"\d\s+(?:times|mal)\s+\d"])
    assert (await computing.run({"question": "Wie viel ist 48 MAL 27?"})).output == "1296"
    assert (await computing.run("Say hello")).output == "Hello!"
    first, second, greeting = await devllm.requests(model)
    assert first["tool_choice"] == "required" and "tool_choice" not in second
    assert "tool_choice" not in greeting and greeting["tools"]


async def test_no_tools_offered_when_the_specialist_has_none(
    client: openai.AsyncOpenAI, devllm: DevLlm
) -> None:
    model = devllm.new_model()
    result = await agent(client, model, ToolRegistry([]), tools=[]).run("What is 1 + 1?")
    assert result.steps == 1 and result.tool_calls == []
    [request] = await devllm.requests(model)
    assert "tools" not in request


async def test_the_specialists_model_overrides_the_default(
    client: openai.AsyncOpenAI, tools: ToolRegistry, devllm: DevLlm
) -> None:
    own = devllm.new_model()
    await agent(client, "the-default-model", tools, model=own).run("hello")
    assert len(await devllm.requests(own)) == 1


async def test_max_steps_keeps_the_usage_of_the_failed_run(
    client: openai.AsyncOpenAI, tools: ToolRegistry, devllm: DevLlm
) -> None:
    model = devllm.new_model()
    step = {"tool_calls": [{"name": "calculator", "arguments": {"expression": "1"}}]}
    await devllm.script(model, [step], repeat_last=True)
    trace = RunTrace()
    with pytest.raises(MaxStepsExceeded):
        await agent(client, model, tools, max_steps=3).run("go", trace)
    assert trace.steps == 3 and trace.usage.total_tokens > 0
    # The tools of the last step are not run: no call is left to read their results.
    assert len(trace.tool_calls) == 2


@pytest.mark.parametrize(
    ("status", "error"),
    [(400, LlmRejected), (404, LlmRejected), (429, TransientError), (500, TransientError)],
)
async def test_llm_errors_are_classified(
    client: openai.AsyncOpenAI, tools: ToolRegistry, devllm: DevLlm, status: int, error: type[Exception]
) -> None:
    model = devllm.new_model()
    await devllm.script(model, [{"status": status}])
    with pytest.raises(error, match=f"HTTP {status}"):
        await agent(client, model, tools, llm_retries=0).run("hello")


async def test_a_providers_refusal_text_never_reaches_the_task_error(
    client: openai.AsyncOpenAI,
    tools: ToolRegistry,
    devllm: DevLlm,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """An OpenAI 401 names the worker's (masked) key: the task's error, which the tenant reads, says what
    the status means in words of ours; the provider's text goes to the log only, with the key taken out."""
    model = devllm.new_model()
    leaked = "Incorrect API key provided: sk-proj-Ab12****************************wXyZ. You can find your key"
    await devllm.script(model, [{"status": 401, "error_message": leaked}])
    with pytest.raises(LlmRejected) as raised:
        await agent(client, model, tools, llm_retries=0).run("hello")
    message = str(raised.value)
    assert message == (
        "LLM answered HTTP 401: the provider refused the worker's credentials: an operator must fix the LLM "
        "settings"
    )
    assert "sk-proj" not in caplog.text and "Ab12" not in caplog.text
    assert "Incorrect API key provided: [redacted]" in caplog.text


async def test_provider_blips_are_absorbed_inside_the_step(
    client: openai.AsyncOpenAI, tools: ToolRegistry, devllm: DevLlm
) -> None:
    model = devllm.new_model()
    await devllm.script(model, [{"status": 500}, {"status": 503}, {"content": "fine"}])
    before = counter(LLM_STEP_RETRIES, "general", "server_error")
    result = await agent(client, model, tools).run("hello")  # llm_retries: 2 by default
    assert result.output == "fine" and result.steps == 1
    assert len(await devllm.requests(model)) == 3
    assert counter(LLM_STEP_RETRIES, "general", "server_error") == before + 2
    # One blip more than the retries allow fails the attempt (transiently).
    await devllm.script(model, [{"status": 500}, {"status": 500}])
    with pytest.raises(TransientError, match="HTTP 500"):
        await agent(client, model, tools, llm_retries=1).run("hello")


class Recorder:
    """A checkpoint in memory: what a run records, as the store would keep it."""

    def __init__(self, fail_from_step: int | None = None) -> None:
        self.steps: list[Step] = []
        self._fail_from = fail_from_step

    async def record(
        self,
        step: int,
        message: dict[str, Any],
        *,
        call_id: str = "",
        usage: Usage | None = None,
        ok: bool | None = None,
        name: str | None = None,
        latency_ms: float | None = None,
    ) -> bool:
        if self._fail_from is not None and step >= self._fail_from:
            return False
        self.steps.append(Step(task_id=TASK, step=step, call_id=call_id, message=message, usage=usage, ok=ok))
        return True


TOOL_STEP = {"tool_calls": [{"name": "calculator", "arguments": {"expression": "6 * 7"}}]}


async def test_a_run_resumes_after_its_recorded_steps_and_reuses_their_tool_results(
    client: openai.AsyncOpenAI, tools: ToolRegistry, devllm: DevLlm
) -> None:
    model = devllm.new_model()
    await devllm.script(model, [TOOL_STEP, TOOL_STEP, {"content": "done"}], by_turn=True)
    first = Recorder(fail_from_step=3)
    await agent(client, model, tools).run("go", checkpoint=first)
    assert len(await devllm.requests(model)) == 3
    assert [(s.step, s.call_id == "") for s in first.steps] == [(1, True), (1, False), (2, True), (2, False)]
    # A new attempt with the first two steps: one call (step 3), no tool run again.
    trace = RunTrace()
    second = Recorder()
    result = await agent(client, model, tools).run("go", trace, steps=first.steps, checkpoint=second)
    assert result.output == "done" and result.steps == 3
    assert trace.resumed_from_step == 2 and len(await devllm.requests(model)) == 4
    assert len(result.tool_calls) == 2, "the recorded tool calls count, none ran again"
    resumed = (await devllm.requests(model))[-1]["messages"]
    assert [m["role"] for m in resumed] == ["system", "user", "assistant", "tool", "assistant", "tool"]
    # Steps recorded by the first attempt carry their usage; the new call is recorded by this one.
    assert trace.unrecorded == Usage() and [s.step for s in second.steps] == [3]
    # The answer itself recorded: the next attempt completes without calling the LLM.
    again = await agent(client, model, tools).run("go", steps=first.steps + second.steps)
    assert again.output == "done" and len(await devllm.requests(model)) == 4


async def test_a_stop_between_steps_hands_back_after_the_current_step(
    client: openai.AsyncOpenAI, tools: ToolRegistry, devllm: DevLlm
) -> None:
    model = devllm.new_model()
    await devllm.script(
        model, [{**TOOL_STEP, "delay_seconds": 0.3}, TOOL_STEP, {"content": "done"}], by_turn=True
    )
    stop = asyncio.Event()
    recorder = Recorder()
    run = asyncio.create_task(
        agent(client, model, tools).run("go", checkpoint=recorder, stop_after_step=stop)
    )
    await asyncio.sleep(0.1)  # inside step 1's LLM call
    stop.set()
    with pytest.raises(HandBackAfterStep) as handed_back:
        await run
    assert handed_back.value.step == 1
    assert [(s.step, bool(s.call_id)) for s in recorder.steps] == [(1, False), (1, True)], "step 1 finished"
    assert len(await devllm.requests(model)) == 1


async def test_unreachable_llm_is_transient(tools: ToolRegistry) -> None:
    llm = make_client(LlmSettings(base_url=f"http://127.0.0.1:{free_port()}/v1", timeout_seconds=5))
    try:
        with pytest.raises(TransientError, match="unreachable"):
            await agent(llm, "any", tools).run("hello")
    finally:
        await llm.close()


async def test_the_attempt_timeout_is_transient(
    client: openai.AsyncOpenAI, tools: ToolRegistry, devllm: DevLlm
) -> None:
    model = devllm.new_model()
    await devllm.script(model, [{"delay_seconds": 1, "content": "too late"}])
    with pytest.raises(AttemptTimeout, match=r"within 0\.3 s") as caught:
        await agent(client, model, tools, timeout_seconds=0.3).run("hello")
    assert isinstance(caught.value, TransientError)


async def test_a_task_may_ask_for_its_own_timeout_up_to_the_specialists_maximum(
    client: openai.AsyncOpenAI, tools: ToolRegistry, devllm: DevLlm
) -> None:
    model = devllm.new_model()
    runner = agent(client, model, tools, timeout_seconds=30, max_timeout_seconds=60)
    assert runner.attempt_timeout(None) == 30
    assert runner.attempt_timeout(5) == 5
    assert runner.attempt_timeout(600) == 60
    await devllm.script(model, [{"delay_seconds": 1, "content": "too late"}])
    with pytest.raises(AttemptTimeout, match=r"within 0\.3 s"):
        await runner.run("hello", timeout_seconds=0.3)


async def test_a_429_carries_the_wait_the_llm_asked_for(
    client: openai.AsyncOpenAI, tools: ToolRegistry, devllm: DevLlm
) -> None:
    model = devllm.new_model()
    await devllm.script(model, [{"status": 429, "headers": {"Retry-After": "7"}}, {"status": 429}])
    with pytest.raises(LlmRateLimited, match="HTTP 429") as first:
        await agent(client, model, tools).run("hello")
    assert first.value.retry_after == 7
    with pytest.raises(LlmRateLimited) as second:
        await agent(client, model, tools).run("hello")
    assert second.value.retry_after is None


async def test_a_slow_llm_call_within_the_deadline_is_transient(tools: ToolRegistry, devllm: DevLlm) -> None:
    model = devllm.new_model()
    # Every try too slow: the in-step retries are used up, then the attempt fails transiently.
    await devllm.script(model, [{"delay_seconds": 1, "content": "too late"}], repeat_last=True)
    llm = make_client(LlmSettings(base_url=devllm.base_url, timeout_seconds=0.3))
    try:
        with pytest.raises(TransientError, match="APITimeoutError"):
            await agent(llm, model, tools).run("hello")
    finally:
        await llm.close()
