"""The agent loop: chat completions with the specialist's tools until the model answers without a tool call.

A *step* is one LLM call and the tool calls it asks for. With a checkpoint, every reply and every tool result
is recorded as it completes, and a new attempt continues from them (``conversation.resume``) instead of
starting over: an interruption costs at most the step in progress. A stop asked for between steps (a worker
shutting down) ends the run with ``HandBackAfterStep`` once the current step is done and recorded. A specialist
with ``stream: true`` has each call streamed (``streaming``), its text going out as ``token`` events (``tokens``).

One ``Agent`` per process (it holds the shared LLM clients and tools); each attempt gets a fresh ``RunTrace``,
which the caller reads even when the run fails, so the tokens a failed attempt used are still recorded.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from typing import Any

import openai

from taskyard_common import metrics
from taskyard_common.catalog import SpecialistSpec
from taskyard_common.errors import TransientError
from taskyard_common.llm import ClientPool
from taskyard_common.llm_limits import LlmLimits
from taskyard_common.messages import TaskInput
from taskyard_common.model_specs import ModelSpec, fallback_chain
from taskyard_common.store import Step
from taskyard_worker.answer_shape import AnswerShape, canonical
from taskyard_worker.conversation import Resumed, resume, tool_calls_of, user_content
from taskyard_worker.llm_caller import LlmCaller, ModelRoute
from taskyard_worker.llm_calls import (
    AttemptTimeout,
    CostCap,
    InvalidToolCall,
    MaxStepsExceeded,
    reply_of,
    usage_of,
)
from taskyard_worker.run_state import AgentResult, Checkpoint, HandBackAfterStep, RunTrace, record
from taskyard_worker.sources import with_sources
from taskyard_worker.text_tool_calls import TextCalls, Verdict, as_tool_calls, correction, echoes_correction
from taskyard_worker.tokens import TokenStream
from taskyard_worker.tool_steps import ToolSteps
from taskyard_worker.tools import ToolRegistry
from taskyard_worker.tools.delegate import DelegationLimits


class Agent:
    def __init__(
        self,
        spec: SpecialistSpec,
        client: openai.AsyncOpenAI | ClientPool,
        default_model: str,
        tools: ToolRegistry,
        *,
        max_tool_output_chars: int,
        max_tool_calls_per_reply: int = 8,
        models: Mapping[str, ModelSpec] | None = None,
        limits: LlmLimits | None = None,
        endpoints: Mapping[str, ClientPool] | None = None,
    ) -> None:
        """``models``: the catalog's entries (prices, limits, fallbacks); ``endpoints``: the clients of the
        fallback models served elsewhere than ``client`` (by model name)."""
        self.spec = spec
        self.model = spec.model or default_model
        clients = client if isinstance(client, ClientPool) else ClientPool([client])
        table = models or {}
        # The model, then its fallbacks: each with its endpoint's clients and its entry (for its prices).
        routes = [
            ModelRoute(name, (endpoints or {}).get(name, clients), table.get(name))
            for name in fallback_chain(table, self.model)
        ]
        self._llm = LlmCaller(spec, routes, limits)
        self._tools = tools
        self._tool_schemas = tools.openai_tools()
        self._tool_steps = ToolSteps(
            tools, max_tool_output_chars=max_tool_output_chars, max_calls=max_tool_calls_per_reply
        )

    def attempt_timeout(self, requested: float | None) -> float:
        """The run time one attempt gets: what the task asked for (capped by the specialist's
        ``max_timeout_seconds``), else the specialist's ``timeout_seconds``."""
        if requested is None:
            return self.spec.timeout_seconds
        return min(requested, self.spec.max_timeout_seconds)

    async def run(
        self,
        task_input: TaskInput,
        trace: RunTrace | None = None,
        *,
        timeout_seconds: float | None = None,
        steps: Sequence[Step] = (),
        checkpoint: Checkpoint | None = None,
        stop_after_step: asyncio.Event | None = None,
        tokens: TokenStream | None = None,
        instructions: str | None = None,
        delegation: DelegationLimits | None = None,
        cost_cap: CostCap | None = None,
    ) -> AgentResult:
        """Run one attempt, continuing after the recorded ``steps`` (a streaming specialist's text to
        ``tokens``). Raises ``AgentError`` (fail the task),
        ``HandBackAfterStep`` (stopped between steps), ``Delegating`` (parked until the tasks it delegates to
        are done) or ``TransientError`` (try again later; ``AttemptTimeout`` when the attempt ran out of
        time; ``BudgetExceeded``, an ``AgentError``, when ``cost_cap`` is reached before a call).
        ``instructions``: the task's own, after the specialist's."""
        trace = trace if trace is not None else RunTrace()
        limit = self.attempt_timeout(timeout_seconds)
        system = self.spec.instructions + (f"\n\n{instructions}" if instructions else "")
        state = resume(system, task_input, steps)
        if state.last_step:
            trace.resumed_from_step = state.last_step
            trace.steps = state.last_step
            trace.tool_calls.extend(state.tool_calls)
        if state.final_answer is not None:
            # The answer was recorded before the attempt that got it could complete the task.
            data = AnswerShape(self.spec).recorded(state.final_answer)
            answer = canonical(data) if data is not None else with_sources(state.final_answer, state.messages)
            return AgentResult(answer, trace.steps, list(trace.tool_calls), trace.usage, data)
        try:
            async with asyncio.timeout(limit) as deadline:
                tool_first = self.spec.tool_first_for(user_content(task_input))
                return await self._loop(
                    state, trace, checkpoint, stop_after_step, tokens, delegation, cost_cap, tool_first
                )
        except TimeoutError:
            if deadline.expired():
                raise AttemptTimeout(f"the attempt did not finish within {limit:g} s") from None
            raise

    async def _loop(
        self,
        state: Resumed,
        trace: RunTrace,
        checkpoint: Checkpoint | None,
        stop: asyncio.Event | None,
        tokens: TokenStream | None,
        delegation: DelegationLimits | None,
        cost_cap: CostCap | None,
        tool_first: bool,
    ) -> AgentResult:
        messages = state.messages
        corrected = False  # a garbled tool call is answered with a correction once per attempt
        shape = AnswerShape(self.spec)  # and an answer outside the output_schema, once as well
        if state.pending_calls:
            await self._tool_steps.run(state.pending_calls, trace, messages, checkpoint, delegation)
        while trace.steps < self.spec.max_steps:
            if stop is not None and stop.is_set():
                raise HandBackAfterStep(trace.steps)
            if cost_cap is not None:
                cost_cap.check(trace.usage.cost)
            body: dict[str, Any] = {"model": self.model, "messages": messages}
            shape.ask(body)
            if self.spec.temperature is not None:
                body["temperature"] = self.spec.temperature
            if self._tool_schemas:
                body["tools"] = self._tool_schemas
                if tool_first and not any(m.get("role") == "tool" for m in messages):
                    body["tool_choice"] = "required"  # no tool has run yet: this call must make one
            if tokens is not None:
                tokens.begin(trace.steps + 1)
            called = time.perf_counter()
            answer = await self._llm.complete(body, tokens)
            response = answer.response
            latency_ms = round((time.perf_counter() - called) * 1000, 1)
            # Priced by, and recorded with, the model that answered (a fallback's after a failover).
            used = usage_of(response, answer.model, answer.spec)
            metrics.LLM_COST.labels(answer.model, self.spec.name).inc(used.cost)
            trace.usage += used
            if not response.choices:
                trace.steps += 1
                trace.unrecorded += used
                raise TransientError("the LLM answered no choices")
            raw = reply_of(response)
            data, problem = shape.read(raw)
            if data is not None:
                reply, read = raw, TextCalls(Verdict.ANSWER)  # even with "name" and "arguments" keys
            else:
                reply, read = as_tool_calls(raw, self._tools.names)
            if read.verdict is Verdict.CALLS:
                metrics.TEXT_TOOL_CALLS.labels(self.spec.name, "recovered").inc()
            if read.verdict is not Verdict.ANSWER and tokens is not None:
                tokens.restart()  # its text, streamed already, was a tool call, not part of the answer
                await tokens.finish()
            if read.verdict is Verdict.GARBLED:
                # Neither recorded nor counted as a step: a resumed run must not take it for the answer,
                # and the step is asked again (once) after the correction.
                trace.unrecorded += used
                if corrected:
                    metrics.TEXT_TOOL_CALLS.labels(self.spec.name, "failed").inc()
                    raise InvalidToolCall(f"the model's tool call could not be read twice: {read.problem}")
                corrected = True
                metrics.TEXT_TOOL_CALLS.labels(self.spec.name, "corrected").inc()
                messages.extend([reply, correction(read.problem, self._tools.names)])
                continue
            if corrected and read.verdict is Verdict.ANSWER and echoes_correction(reply.get("content") or ""):
                # Our own correction given back as the answer: never stored; the task fails as a call garbled twice.
                trace.unrecorded += used
                metrics.TEXT_TOOL_CALLS.labels(self.spec.name, "failed").inc()
                raise InvalidToolCall("the model repeated the correction instead of answering")
            if problem is not None and read.verdict is Verdict.ANSWER:
                # Not recorded: a resumed run must find a valid answer or none.
                trace.unrecorded += used
                correcting = shape.refuse(problem)  # InvalidOutput the second time
                if tokens is not None:
                    tokens.restart()
                    await tokens.finish()
                messages.extend([reply, correcting])
                continue
            trace.steps += 1
            messages.append(reply)
            if not await record(checkpoint, trace.steps, reply, usage=used, latency_ms=latency_ms):
                trace.unrecorded += used
            calls = tool_calls_of(reply)
            if not calls and data is not None:
                return AgentResult(canonical(data), trace.steps, list(trace.tool_calls), trace.usage, data)
            if not calls:
                # The pages it read and does not cite are listed after it (``sources``).
                content = with_sources(reply["content"], messages)
                return AgentResult(content, trace.steps, list(trace.tool_calls), trace.usage)
            if trace.steps >= self.spec.max_steps:
                break  # no call left to read the results: running the tools would be wasted work
            await self._tool_steps.run(calls, trace, messages, checkpoint, delegation)
        raise MaxStepsExceeded(
            f"no final answer within {self.spec.max_steps} steps (the model kept calling tools)"
        )
