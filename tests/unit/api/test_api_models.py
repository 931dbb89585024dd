import uuid
from datetime import UTC, datetime, timedelta, timezone

import pytest
from pydantic import ValidationError

from taskyard_api.json_values import MAX_INPUT_DEPTH
from taskyard_api.models import TaskDocument, TaskSubmission
from taskyard_common.lifecycle import TaskStatus
from taskyard_common.messages import RoutedPart, RoutingDecision, RoutingMethod, Usage
from taskyard_common.store import TaskRecord


@pytest.mark.parametrize(
    "body",
    [
        {"input": "Summarize this"},
        {"input": {"question": "why?", "context": [1, 2.5, None, True]}},
        {"input": "x", "specialist": "summarizer", "metadata": {"team": "ops", "empty": ""}},
    ],
)
def test_valid_submissions(body: dict):
    assert TaskSubmission.model_validate(body).input == body["input"]


def _nested(depth: int) -> dict:
    value: dict = {"leaf": 1}
    for _ in range(depth):
        value = {"n": value}
    return value


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"input": ""},
        {"input": " \n\t"},
        {"input": {}},
        {"input": 3},
        {"input": ["a"]},
        {"input": "x", "extra": 1},
        {"input": "x", "specialist": ""},
        {"input": "x", "metadata": {"k": 1}},
        {"input": "x", "metadata": {"": "v"}},
        {"input": "x", "metadata": {f"k{i}": "v" for i in range(65)}},
        {"input": "a\x00b"},
        {"input": {"a\x00": "b"}},
        {"input": {"a": [float("nan")]}},
        {"input": {"a": float("inf")}},
        {"input": "lone \ud800"},
        {"input": "x", "metadata": {"k": "v\x00"}},
        {"input": _nested(MAX_INPUT_DEPTH + 1)},
    ],
)
def test_invalid_submissions(body: dict):
    with pytest.raises(ValidationError):
        TaskSubmission.model_validate(body)


def test_nesting_up_to_the_limit_is_fine():
    TaskSubmission.model_validate({"input": _nested(MAX_INPUT_DEPTH - 1)})


def test_deadline_and_timeout_limits():
    ahead = (datetime.now(UTC) + timedelta(days=1)).replace(microsecond=0)
    submission = TaskSubmission.model_validate(
        {
            "input": "x",
            "timeout_seconds": 90,
            "deadline": ahead.astimezone(timezone(timedelta(hours=-7))).isoformat(),
        }
    )
    assert submission.timeout_seconds == 90
    assert submission.deadline == ahead and submission.deadline.utcoffset() == timedelta(0)
    assert TaskSubmission.model_validate({"input": "x"}).deadline is None


@pytest.mark.parametrize(
    "fields",
    [
        {"timeout_seconds": 0},
        {"timeout_seconds": -1},
        {"timeout_seconds": float("inf")},
        {"timeout_seconds": float("nan")},
        {"deadline": "2000-01-01T00:00:00Z"},
        {"deadline": "2099-01-01T00:00:00"},
        {"deadline": "2099-01-01"},
        {"deadline": "1700000000"},
        {"deadline": 4102444800},
        {"deadline": "9999-12-31T23:59:59-05:00"},
    ],
)
def test_invalid_limits(fields: dict):
    with pytest.raises(ValidationError) as caught:
        TaskSubmission.model_validate({"input": "x", **fields})
    assert caught.value.errors()[0]["loc"] == (next(iter(fields)),)


def _record(**fields) -> TaskRecord:
    now = datetime.now(UTC)
    base = {
        "id": uuid.uuid4(),
        "status": TaskStatus.QUEUED,
        "input": {"q": 1},
        "metadata": {"k": "v"},
        "requested_specialist": None,
        "specialist": "general",
        "routing": RoutingDecision(
            method=RoutingMethod.LLM, specialist="general", reason="r", confidence=0.7
        ),
        "attempts": 0,
        "result": None,
        "error": None,
        "usage": Usage(),
        "created_at": now,
        "published_at": None,
        "routed_at": now,
        "started_at": None,
        "finished_at": None,
        "updated_at": now,
        "deadline": now + timedelta(hours=1),
        "timeout_seconds": 12.5,
    }
    return TaskRecord.model_validate({**base, **fields})


def test_task_document_shows_the_dead_letter_only_while_dead_lettered():
    summary = {
        "reason": "maxlen",
        "queue": "p.work.general",
        "count": 1,
        "deaths": [],
        "at": "2025-05-01T09:30:00Z",
    }
    dead = TaskDocument.from_record(_record(status=TaskStatus.DEAD_LETTERED, dead_letter=summary))
    assert dead.dead_letter is not None and dead.dead_letter.reason == "maxlen"
    assert TaskDocument.from_record(_record(dead_letter=summary)).dead_letter is None, "replayed since"
    odd = TaskDocument.from_record(_record(status=TaskStatus.DEAD_LETTERED, dead_letter={"reason": 7}))
    assert odd.dead_letter is not None and odd.dead_letter.reason == "7"


def test_task_document_shows_the_parts_of_a_split_request():
    parts = (
        RoutedPart(specialist="summarizer", job="sum it up"),
        RoutedPart(specialist="researcher", job="sources"),
    )
    routing = RoutingDecision(method=RoutingMethod.RULES, specialist="general", reason="distinct jobs", confidence=0.6,
                              parts=parts)  # fmt: skip
    group = uuid.uuid4()
    document = TaskDocument.from_record(
        _record(status=TaskStatus.WAITING, routing=routing, group_id=group, group_role="reduce")
    )
    assert document.routing is not None
    assert [(p.specialist, p.job) for p in document.routing.parts] == [("summarizer", "sum it up"),
                                                                         ("researcher", "sources")]  # fmt: skip
    assert document.group is not None and (document.group.id, document.group.role) == (group, "reduce")
    assert TaskDocument.from_record(_record()).routing.parts == []  # type: ignore[union-attr]
