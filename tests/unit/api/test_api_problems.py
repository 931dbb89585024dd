import json

from taskyard_api.http.problems import (
    NOT_FOUND,
    PROBLEM_MEDIA_TYPE,
    TASK_NOT_COMPLETED,
    VALIDATION_ERROR,
    FieldError,
    Problem,
    generic_problem,
    problem_response,
    problem_responses,
)
from taskyard_common.lifecycle import TaskStatus


def test_kinds_have_stable_type_uris_and_fixed_titles():
    problem = NOT_FOUND("No task with this id.", instance="/v1/tasks/x")
    assert problem.type == "https://taskyard.dev/problems/not-found"
    assert problem.status == 404
    assert problem.title == NOT_FOUND("something else").title


def test_response_is_problem_json_without_empty_members():
    response = problem_response(TASK_NOT_COMPLETED("The task is running.", task_status=TaskStatus.RUNNING))
    assert response.status_code == 409
    assert response.headers["content-type"] == PROBLEM_MEDIA_TYPE
    assert json.loads(response.body) == {
        "type": "https://taskyard.dev/problems/task-not-completed",
        "title": "Task not completed",
        "status": 409,
        "detail": "The task is running.",
        "task_status": "running",
    }


def test_validation_problem_carries_field_errors():
    problem = VALIDATION_ERROR(
        "1 invalid field(s)", errors=[FieldError(loc=["body", "input"], msg="m", type="t")]
    )
    dumped = problem.model_dump(mode="json", exclude_none=True)
    assert dumped["errors"] == [{"loc": ["body", "input"], "msg": "m", "type": "t"}]
    assert Problem.model_validate(dumped) == problem


def test_statuses_without_taskyard_meaning_are_about_blank():
    problem = generic_problem(405)
    assert problem.type == "about:blank"
    assert problem.title == "Method Not Allowed"
    assert generic_problem(599).title == "Error"


def test_routes_can_say_what_a_status_means_for_them():
    generic = problem_responses(404, 503)
    specific = problem_responses(404, 409, descriptions={409: "Already finished"})
    assert specific[409]["description"] == "Already finished"
    assert specific[404] == generic[404]
    assert "Retry-After" in generic[503]["headers"]
