"""Rebuilding a run's conversation from its step checkpoints: where a new attempt continues."""

import uuid

from taskyard_common.messages import Usage
from taskyard_common.store import Step
from taskyard_worker.conversation import resume

TASK = uuid.uuid4()


def reply(step: int, *calls: str, content: str | None = None) -> Step:
    message: dict = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = [
            {"id": c, "type": "function", "function": {"name": "calculator", "arguments": "{}"}}
            for c in calls
        ]
    return Step(task_id=TASK, step=step, message=message, usage=Usage(total_tokens=5))


def result(step: int, call_id: str, ok: bool = True) -> Step:
    message = {"role": "tool", "tool_call_id": call_id, "content": f"result of {call_id}"}
    return Step(task_id=TASK, step=step, call_id=call_id, message=message, ok=ok)


def test_nothing_recorded_starts_from_the_opening():
    state = resume("be brief", {"q": 1}, [])
    assert state.messages == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": '{"q": 1}'},
    ]
    assert (state.last_step, state.pending_calls, state.final_answer) == (0, [], None)


def test_whole_steps_replay_in_order_and_the_run_continues_after_the_last():
    steps = [result(1, "a"), reply(1, "a"), reply(2, "b", "c"), result(2, "c", ok=False), result(2, "b")]
    state = resume("sys", "go", steps)
    roles = [(m["role"], m.get("tool_call_id")) for m in state.messages]
    assert roles == [
        ("system", None),
        ("user", None),
        ("assistant", None),
        ("tool", "a"),
        ("assistant", None),
        ("tool", "b"),
        ("tool", "c"),
    ], "each reply, then its results in the order the reply asked for them"
    assert state.last_step == 2 and state.pending_calls == [] and state.final_answer is None
    assert state.tool_calls == [
        {"name": "calculator", "ok": True},
        {"name": "calculator", "ok": True},
        {"name": "calculator", "ok": False},
    ]


def test_only_the_tool_calls_without_a_recorded_result_run_again():
    state = resume("sys", "go", [reply(1, "a", "b"), result(1, "b")])
    assert state.last_step == 1
    assert [c["id"] for c in state.pending_calls] == ["a"]
    assert [m.get("tool_call_id") for m in state.messages if m["role"] == "tool"] == ["b"]


def test_a_recorded_final_answer_ends_the_run():
    state = resume("sys", "go", [reply(1, "a"), result(1, "a"), reply(2, content="42")])
    assert state.final_answer == "42" and state.last_step == 2


def test_steps_past_a_gap_are_ignored():
    # Step 2's reply is missing (its record failed): step 3 cannot follow from what is known.
    state = resume("sys", "go", [reply(1, "a"), result(1, "a"), result(2, "b"), reply(3, content="x")])
    assert state.last_step == 1 and state.final_answer is None
    # Results missing in a step that is not the last: the run continues inside that step.
    state = resume("sys", "go", [reply(1, "a", "b"), result(1, "a"), reply(2, content="x")])
    assert state.last_step == 1 and [c["id"] for c in state.pending_calls] == ["b"]
