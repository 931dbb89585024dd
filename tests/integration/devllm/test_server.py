"""The development model server, driven through the real openai client over HTTP."""

import json

import httpx
import openai
import pytest

from taskyard_devllm.replies import MARK

ROUTE_TOOL = {
    "type": "function",
    "function": {
        "name": "route_task",
        "parameters": {
            "type": "object",
            "properties": {
                "specialist": {"type": "string", "enum": ["summarizer", "support-analyst", "general"]},
                "reason": {"type": "string"},
                "confidence": {"type": "number"},
            },
            "required": ["specialist", "reason", "confidence"],
        },
    },
}


@pytest.fixture
async def client(devllm):
    async with openai.AsyncOpenAI(base_url=devllm.base_url, api_key="unused", max_retries=0) as llm:
        yield llm


async def test_forced_tool_call_picks_enum_by_overlap(client, devllm):
    model = devllm.new_model()
    response = await client.chat.completions.create(
        model=model,
        messages=[
            {
                "role": "system",
                "content": "- summarizer: summarizes documents\n- support-analyst: refund tickets",
            },
            {"role": "user", "content": "Please handle this refund ticket"},
        ],
        tools=[ROUTE_TOOL],
        tool_choice={"type": "function", "function": {"name": "route_task"}},
    )
    call = response.choices[0].message.tool_calls[0]
    assert call.function.name == "route_task"
    assert '"support-analyst"' in call.function.arguments
    assert MARK in call.function.arguments
    assert response.usage.total_tokens > 0
    assert len(await devllm.requests(model)) == 1


async def test_scripted_errors_then_default(client, devllm):
    model = devllm.new_model()
    await devllm.script(model, [{"status": 429, "headers": {"Retry-After": "3"}}, {"status": 500}])
    with pytest.raises(openai.RateLimitError) as rate_limited:
        await client.chat.completions.create(model=model, messages=[{"role": "user", "content": "hi"}])
    assert rate_limited.value.response.headers["retry-after"] == "3"
    with pytest.raises(openai.InternalServerError):
        await client.chat.completions.create(model=model, messages=[{"role": "user", "content": "hi"}])
    response = await client.chat.completions.create(model=model, messages=[{"role": "user", "content": "hi"}])
    assert response.choices[0].message.content.startswith(MARK)


async def test_calculator_round_trip(client, devllm):
    model = devllm.new_model()
    tools = [{"type": "function", "function": {"name": "calculator", "parameters": {"type": "object"}}}]
    first = await client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": "What is 12 * (3 + 4)?"}], tools=tools
    )
    call = first.choices[0].message.tool_calls[0]
    assert call.function.name == "calculator"
    second = await client.chat.completions.create(
        model=model,
        messages=[
            {"role": "user", "content": "What is 12 * (3 + 4)?"},
            {"role": "assistant", "tool_calls": [call.model_dump()]},
            {"role": "tool", "tool_call_id": call.id, "content": "84"},
        ],
        tools=tools,
    )
    assert "84" in second.choices[0].message.content
    # One conversation (named by its first user message): two calls, one final answer.
    assert await devllm.conversations(model) == ({"What is 12 * (3 + 4)?": 2}, {"What is 12 * (3 + 4)?": 1})


async def test_a_required_tool_choice_calls_the_calculator_with_the_requests_arithmetic(client, devllm):
    tools = [{"type": "function", "function": {"name": "calculator", "parameters": {"type": "object"}}}]
    reply = await client.chat.completions.create(
        model=devllm.new_model(),
        messages=[{"role": "user", "content": "What is 12 * (3 + 4)?"}],
        tools=tools,
        tool_choice="required",
    )
    call = reply.choices[0].message.tool_calls[0]
    assert call.function.name == "calculator"
    assert json.loads(call.function.arguments) == {"expression": "12 * (3 + 4)"}


async def test_final_answers_are_counted_per_conversation_and_errors_are_not(client, devllm):
    model = devllm.new_model()
    await devllm.script(model, [{"status": 500}])
    with pytest.raises(openai.InternalServerError):
        await client.chat.completions.create(model=model, messages=[{"role": "user", "content": "task 1"}])
    for text in ("task 1", "task 1", "task 2"):
        await client.chat.completions.create(model=model, messages=[{"role": "user", "content": text}])
    assert await devllm.conversations(model) == ({"task 1": 3, "task 2": 1}, {"task 1": 2, "task 2": 1})
    callers = await devllm.callers(model)
    assert sorted(callers) == ["task 1", "task 2"] and callers["task 1"].startswith("127.0.0.1:")
    async with httpx.AsyncClient() as control:  # a watcher asks for the conversations it looks for only
        calls, watched = await devllm.watch_conversations(model, control, contains="2")
    assert calls == {"task 2": 1} and list(watched) == ["task 2"]


async def test_a_by_turn_script_answers_each_turn_the_same_every_time(client, devllm):
    model = devllm.new_model()
    steps = [
        {"tool_calls": [{"name": "calculator", "arguments": {"expression": "1 + 1"}}]},
        {"content": "two"},
    ]
    await devllm.script(model, steps, by_turn=True)
    question = [{"role": "user", "content": "1 + 1?"}]
    for _ in range(2):  # a resumed run asks for the same turn again: same answer
        first = await client.chat.completions.create(model=model, messages=question)
        assert first.choices[0].message.tool_calls[0].function.name == "calculator"
    call = first.choices[0].message.tool_calls[0]
    answered = [
        *question,
        {"role": "assistant", "tool_calls": [call.model_dump()]},
        {"role": "tool", "tool_call_id": call.id, "content": "2"},
    ]
    second = await client.chat.completions.create(model=model, messages=answered)
    assert second.choices[0].message.content == "two"
    assert len(await devllm.requests(model)) == 3


async def streamed(client, model, **kwargs):
    """Every chunk of a streamed completion."""
    stream = await client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": "hi"}], stream=True, **kwargs
    )
    return [chunk async for chunk in stream]


async def test_a_streamed_answer_comes_in_word_pieces_then_its_usage(client, devllm):
    model = devllm.new_model()
    await devllm.script(model, [{"content": "Queues decouple  the sender\nfrom the receiver."}])
    chunks = await streamed(client, model, stream_options={"include_usage": True})
    assert {c.object for c in chunks} == {"chat.completion.chunk"}
    assert len({c.id for c in chunks}) == 1
    first, *middle, finish, usage = chunks
    assert first.choices[0].delta.role == "assistant"
    texts = [c.choices[0].delta.content for c in middle]
    assert texts == ["Queues", " decouple", "  the", " sender", "\nfrom", " the", " receiver."]
    assert finish.choices[0].finish_reason == "stop" and finish.usage is None
    assert usage.choices == [] and usage.usage.completion_tokens == 7
    assert usage.usage.total_tokens == usage.usage.prompt_tokens + 7
    [request] = await devllm.requests(model)
    assert request["stream"] is True


async def test_a_streamed_tool_call_comes_as_deltas_without_usage_unless_asked(client, devllm):
    model = devllm.new_model()
    expression = {"expression": "12 * (3 + 4) - 5"}
    await devllm.script(model, [{"tool_calls": [{"name": "calculator", "arguments": expression}]}])
    chunks = await streamed(client, model)
    assert all(c.usage is None for c in chunks)
    calls = [c.choices[0].delta.tool_calls[0] for c in chunks if c.choices[0].delta.tool_calls]
    assert calls[0].id and calls[0].function.name == "calculator" and calls[0].function.arguments == ""
    assert len(calls) > 2, "the arguments come in fragments"
    assert all(c.index == 0 and c.id is None for c in calls[1:])
    assert json.loads("".join(c.function.arguments for c in calls)) == expression
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


async def test_scripted_errors_come_before_the_stream(client, devllm):
    model = devllm.new_model()
    await devllm.script(model, [{"status": 503}])
    with pytest.raises(openai.InternalServerError):
        await streamed(client, model)


@pytest.mark.parametrize(
    ("fail_with", "error"), [("error", openai.APIError), ("disconnect", openai.APIConnectionError)]
)
async def test_a_stream_broken_off_mid_way(client, devllm, fail_with, error):
    model = devllm.new_model()
    await devllm.script(
        model, [{"content": "one two three four", "fail_after_chunks": 3, "fail_with": fail_with}]
    )
    stream = await client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": "hi"}], stream=True
    )
    received = []
    with pytest.raises(error):
        async for chunk in stream:
            received.append(chunk.choices[0].delta.content)
    assert received == ["", "one", " two"]
    # The next request is served as usual.
    chunks = await streamed(client, model)
    assert "".join(c.choices[0].delta.content or "" for c in chunks).startswith(MARK)
