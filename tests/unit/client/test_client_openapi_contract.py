"""The SDK against the API's own OpenAPI document: every route it calls exists, and every field its models
read is in the answer's schema with a type the model accepts (and is always sent when the model requires
it). An API change that would break the SDK fails here, not in a user's program.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from taskyard_api.main import create_app
from taskyard_api.settings import get_settings
from taskyard_client import models
from taskyard_client.models import TaskStatus

JSON = "application/json"
PROBLEM = "application/problem+json"

# What the SDK sends (method, path as the API's template), the answer it reads, and the model it reads it as.
ENDPOINTS: list[tuple[str, str, str, str, type[BaseModel] | None]] = [
    ("post", "/v1/tasks", "202", JSON, models.Task),
    ("get", "/v1/tasks", "200", JSON, models.TaskPage),
    ("get", "/v1/tasks/{task_id}", "200", JSON, models.Task),
    ("get", "/v1/tasks/{task_id}", "304", "", None),
    ("get", "/v1/tasks/{task_id}", "404", PROBLEM, models.Problem),
    ("get", "/v1/tasks/{task_id}/result", "200", JSON, models.TaskResult),
    ("get", "/v1/tasks/{task_id}/result", "409", PROBLEM, models.Problem),
    ("get", "/v1/tasks/{task_id}/events", "200", JSON, models.EventPage),
    ("get", "/v1/tasks/{task_id}/events", "200", "text/event-stream", None),
    ("post", "/v1/tasks/{task_id}/cancel", "200", JSON, models.Task),
    ("post", "/v1/tasks/{task_id}/cancel", "202", JSON, models.Task),
    ("get", "/v1/specialists", "200", JSON, models.SpecialistList),
    ("get", "/v1/usage", "200", JSON, models.UsageReport),
    ("get", "/v1/dead-letters", "200", JSON, models.DeadLetterPage),
    ("get", "/v1/dead-letters/{task_id}", "200", JSON, models.DeadLetter),
    ("post", "/v1/dead-letters/{task_id}/replay", "202", JSON, models.Task),
    ("post", "/v1/dead-letters/{task_id}/replay", "503", PROBLEM, models.Problem),
    ("delete", "/v1/dead-letters/{task_id}", "204", "", None),
    ("post", "/v1/task-groups", "202", JSON, models.Group),
    ("get", "/v1/task-groups/{group_id}", "200", JSON, models.Group),
    ("post", "/v1/task-groups/{group_id}/cancel", "200", JSON, models.Group),
]


@pytest.fixture(scope="module")
def openapi() -> dict[str, Any]:
    document: dict[str, Any] = create_app(get_settings()).openapi()
    return document


class Schemas:
    """One side's schemas: ``$ref`` resolved against its root (``#/components/schemas`` or ``#/$defs``)."""

    def __init__(self, root: dict[str, Any]) -> None:
        self.root = root

    def resolve(self, schema: dict[str, Any]) -> dict[str, Any]:
        while "$ref" in schema:
            found: Any = self.root
            for part in schema["$ref"].removeprefix("#/").split("/"):
                found = found[part]
            schema = found
        return schema

    def alternatives(self, schema: dict[str, Any]) -> list[dict[str, Any]]:
        schema = self.resolve(schema)
        for key in ("anyOf", "oneOf"):
            if key in schema:
                return [alt for option in schema[key] for alt in self.alternatives(option)]
        if isinstance(schema.get("type"), list):
            return [{**schema, "type": kind} for kind in schema["type"]]
        return [schema]


def is_model(schema: dict[str, Any]) -> bool:
    return schema.get("type") == "object" and "properties" in schema


def kind(schema: dict[str, Any]) -> str:
    if "enum" in schema and "type" not in schema:
        return {str: "string", int: "integer"}.get(type(schema["enum"][0]), "any")
    return str(schema.get("type", "any"))


def compare_models(
    api: Schemas, api_model: dict[str, Any], sdk: Schemas, sdk_model: dict[str, Any], where: str
) -> list[str]:
    problems = []
    api_fields, required = api_model.get("properties", {}), set(api_model.get("required", []))
    for name, field in sdk_model.get("properties", {}).items():
        if name not in api_fields:
            problems.append(f"{where}.{name}: the SDK reads it, the API's schema has no such field")
            continue
        if name in sdk_model.get("required", []) and name not in required:
            problems.append(f"{where}.{name}: the SDK requires it, the API may leave it out")
        problems += compare(api, api_fields[name], sdk, field, f"{where}.{name}")
    return problems


def accepts(
    api: Schemas, sent: dict[str, Any], sdk: Schemas, taken: dict[str, Any], where: str
) -> list[str] | None:
    """Problems when the SDK takes ``sent`` as ``taken``; None when ``taken`` does not take it at all."""
    if not taken or kind(taken) == "any":
        return []
    if is_model(sent) or is_model(taken):
        if kind(taken) != "object":
            return None
        if is_model(taken) and is_model(sent):
            return compare_models(api, sent, sdk, taken, where)
        if is_model(taken) and taken.get("required"):
            return None  # the API promises an object, not the fields the SDK requires
        return []  # a plain dict, or a model without required fields, takes any object
    sent_kind, taken_kind = kind(sent), kind(taken)
    if sent_kind != taken_kind and not (sent_kind == "integer" and taken_kind == "number"):
        return None
    if sent_kind == "array" and "items" in sent and "items" in taken:
        return compare(api, sent["items"], sdk, taken["items"], f"{where}[]")
    if sent_kind == "object" and isinstance(sent.get("additionalProperties"), dict):
        values = taken.get("additionalProperties")
        if isinstance(values, dict):
            return compare(api, sent["additionalProperties"], sdk, values, f"{where}{{}}")
    return []


def compare(api: Schemas, sent: dict[str, Any], sdk: Schemas, taken: dict[str, Any], where: str) -> list[str]:
    problems = []
    options = sdk.alternatives(taken)
    for alternative in api.alternatives(sent):
        verdicts = [accepts(api, alternative, sdk, option, where) for option in options]
        fitting = [verdict for verdict in verdicts if verdict is not None]
        if not fitting:
            problems.append(
                f"{where}: the API may send {kind(alternative)}, the SDK takes {[kind(o) for o in options]}"
            )
        elif all(fitting):
            problems += fitting[0]
    return problems


def response_schema(
    openapi: dict[str, Any], method: str, path: str, status: str, media: str
) -> dict[str, Any]:
    operation = openapi["paths"][path][method]
    assert status in operation["responses"], f"{method.upper()} {path} does not document {status}"
    answer = operation["responses"][status]
    if not media:
        assert not answer.get("content"), f"{method.upper()} {path} {status} should have no body"
        return {}
    assert media in answer.get("content", {}), f"{method.upper()} {path} {status} is not {media}"
    schema: dict[str, Any] = answer["content"][media]["schema"]
    return schema


@pytest.mark.parametrize(
    ("method", "path", "status", "media", "model"), ENDPOINTS, ids=lambda v: getattr(v, "__name__", str(v))
)
def test_every_route_the_sdk_calls_answers_what_its_model_reads(
    openapi: dict[str, Any], method: str, path: str, status: str, media: str, model: type[BaseModel] | None
) -> None:
    assert path in openapi["paths"] and method in openapi["paths"][path], f"{method.upper()} {path} is gone"
    schema = response_schema(openapi, method, path, status, media)
    if model is None:
        return
    api = Schemas(openapi)
    sdk_schema = model.model_json_schema(mode="validation")
    sdk = Schemas(sdk_schema)
    assert compare(api, schema, sdk, sdk_schema, model.__name__) == []


def test_the_sdk_knows_every_status_of_the_api(openapi: dict[str, Any]) -> None:
    """Statuses are plain strings in the SDK (a new one never breaks it), but its constants, the terminal
    set and the CLI's exit codes must follow the API's."""
    assert set(openapi["components"]["schemas"]["TaskStatus"]["enum"]) == {s.value for s in TaskStatus}


def test_the_checker_catches_what_would_break_the_sdk(openapi: dict[str, Any]) -> None:
    """A renamed field, a changed type and an optional field the SDK requires are all reported."""
    api = Schemas(openapi)
    sdk_schema = models.Task.model_json_schema(mode="validation")
    sdk = Schemas(sdk_schema)
    document = api.resolve({"$ref": "#/components/schemas/TaskDocument"})
    renamed = {
        **document,
        "properties": {k if k != "attempts" else "tries": v for k, v in document["properties"].items()},
    }
    retyped = {**document, "properties": {**document["properties"], "attempts": {"type": "string"}}}
    optional = {**document, "required": [r for r in document["required"] if r != "created_at"]}
    routing = {**document, "properties": {**document["properties"], "routing": {"type": "string"}}}
    assert any(
        "attempts" in p and "no such field" in p for p in compare(api, renamed, sdk, sdk_schema, "Task")
    )
    assert any("attempts" in p for p in compare(api, retyped, sdk, sdk_schema, "Task"))
    assert any("created_at" in p for p in compare(api, optional, sdk, sdk_schema, "Task"))
    assert any("routing" in p for p in compare(api, routing, sdk, sdk_schema, "Task"))
    assert compare(api, document, sdk, sdk_schema, "Task") == []


def test_what_the_sdk_sends_is_what_the_api_takes(openapi: dict[str, Any]) -> None:
    from taskyard_client import _calls as calls

    schemas = openapi["components"]["schemas"]
    submission = calls.submit(
        {"k": "v"},
        specialist="general",
        metadata={"a": "b"},
        timeout_seconds=5,
        deadline="2030-01-01T00:00:00Z",
        webhook={"url": "https://hooks.example"},
        idempotency_key=None,
        priority="high",
        not_before="2029-01-01T00:00:00Z",
    )
    assert set(submission.json) == {
        "input",
        "specialist",
        "metadata",
        "timeout_seconds",
        "deadline",
        "webhook",
        "priority",
        "not_before",
    }
    assert set(submission.json) <= set(schemas["TaskSubmission"]["properties"])
    listing = openapi["paths"]["/v1/tasks"]["get"]
    sent = calls.task_page(status="queued", specialist="general", limit=10, cursor="c", priority="low").params
    assert set(sent) <= {p["name"] for p in listing["parameters"]}
    assert submission.headers["Idempotency-Key"]
    replay = calls.replay("x", specialist="general", from_scratch=True)
    assert set(replay.json) <= set(schemas["ReplayRequest"]["properties"])
    post = openapi["paths"]["/v1/tasks"]["post"]
    assert "Idempotency-Key" in {p["name"] for p in post["parameters"] if p["in"] == "header"}
    events = openapi["paths"]["/v1/tasks/{task_id}/events"]["get"]
    assert {"Last-Event-ID", "after", "limit"} <= {p["name"] for p in events["parameters"]}
    read = openapi["paths"]["/v1/tasks/{task_id}"]["get"]
    assert {"wait", "If-None-Match"} <= {p["name"] for p in read["parameters"]}
