"""Reading the API's documents and errors: known fields typed, unknown ones kept, problems as exceptions."""

from __future__ import annotations

import httpx

from taskyard_client import NotFound, Task, TaskyardError
from taskyard_client.errors import ApiError, ServerError, ValidationFailed, api_error
from taskyard_client.models import TaskResult
from tests.unit.client.fakes import problem, task_document


def test_a_completed_task_document():
    document = task_document(
        "completed",
        specialist="summarizer",
        routing={"method": "llm", "reason": "asks for a summary", "confidence": 0.93, "latency_ms": 1284.5},
        result={"output": "TL;DR: May.", "steps": 1, "tool_calls": []},
        usage={"prompt_tokens": 412, "completion_tokens": 88, "total_tokens": 500},
        input={"ticket": 4211},
        future_field={"added": "later"},
    )
    task = Task.model_validate(document)
    assert task.terminal and task.output == "TL;DR: May."
    assert task.routing is not None and task.routing.llm_calls == 0 and task.routing.confidence == 0.93
    assert task.usage.total_tokens == 500 and task.input == {"ticket": 4211}
    # Fields this SDK does not know are kept as they came, and come back out in a dump.
    assert task.model_extra is not None and task.model_extra["future_field"] == {"added": "later"}
    assert task.model_dump(mode="json")["links"]["self"].startswith("/v1/tasks/")


def test_statuses_the_sdk_does_not_know_still_parse():
    task = Task.model_validate(task_document("paused_by_a_future_api"))
    assert not task.terminal and task.output is None


def test_a_result_without_text_output():
    result = TaskResult.model_validate({"task_id": task_document()["id"], "result": {"data": [1, 2]}})
    assert result.output is None and result.usage.total_tokens == 0


def test_problems_become_exceptions_by_status():
    error = api_error(problem(404, "not-found", "No task with this id.", instance="/v1/tasks/x"))
    assert isinstance(error, NotFound) and isinstance(error, ApiError) and isinstance(error, TaskyardError)
    assert error.problem.slug == "not-found" and error.problem.request_id == "r1"
    assert str(error) == "404 Not found: No task with this id."
    invalid = api_error(
        problem(422, "validation-error", errors=[{"loc": ["body", "input"], "msg": "too large", "type": "x"}])
    )
    assert isinstance(invalid, ValidationFailed)
    assert invalid.problem.errors == [{"loc": ["body", "input"], "msg": "too large", "type": "x"}]


def test_an_answer_that_is_no_problem_document_still_makes_one():
    error = api_error(httpx.Response(502, text="<html>Bad gateway</html>"))
    assert isinstance(error, ServerError)
    assert error.problem.status == 502 and error.problem.title == "Bad Gateway"
    assert error.problem.detail == "<html>Bad gateway</html>"
