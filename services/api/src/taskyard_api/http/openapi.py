"""Make the OpenAPI document say what the API really answers for errors.

FastAPI files every documented response model under ``application/json`` and adds its own 422 schema to any
route with parameters; this API answers every error as ``application/problem+json`` with ``Problem``, and
every answer with an ``X-Request-ID`` header.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

from taskyard_api.http.problems import PROBLEM_MEDIA_TYPE
from taskyard_api.http.request_id import HEADER as REQUEST_ID_HEADER

_REF_PREFIX = "#/components/schemas/"
_FASTAPI_VALIDATION_SCHEMAS = ("HTTPValidationError", "ValidationError")
# Every answer carries it (RequestIdMiddleware), so every documented response lists it.
_REQUEST_ID_DOC = {
    "description": "The request's id: the client's X-Request-ID when it sent a sane one (1-128 characters of "
    "A-Z a-z 0-9 . _ : -), otherwise a generated one; also request_id in problem documents",
    "schema": {"type": "string", "pattern": "^[A-Za-z0-9._:-]{1,128}$"},
    "required": True,
}


# Every read under /v1 takes a token of the tenant's read limit (tenancy/read_limit.py).
_READ_LIMITED_DOC = {
    "description": "This tenant's read rate limit (per API process) is spent: retry after Retry-After seconds",
    "headers": {
        "Retry-After": {"description": "Seconds to wait before reading again", "schema": {"type": "integer"}},
        "RateLimit-Policy": {
            "description": 'The read quota: "read";q=<burst>;w=<seconds to refill it>',
            "schema": {"type": "string"},
        },
        "RateLimit": {
            "description": '"read";r=<reads left>;t=<seconds until the next one>',
            "schema": {"type": "string"},
        },
    },
}


def _file_read_limits(schema: dict[str, Any]) -> None:
    for path, path_item in schema.get("paths", {}).items():
        read = path_item.get("get")
        if path.startswith("/v1/") or path == "/v1":
            if read is not None:
                read.setdefault("responses", {}).setdefault("429", dict(_READ_LIMITED_DOC))


def _file_problems(schema: dict[str, Any]) -> None:
    problem_ref = {"$ref": _REF_PREFIX + "Problem"}
    for path_item in schema.get("paths", {}).values():
        for operation in path_item.values():
            for code, response in operation.get("responses", {}).items():
                response.setdefault("headers", {})[REQUEST_ID_HEADER] = dict(_REQUEST_ID_DOC)
                if not code.startswith(("4", "5")):
                    continue
                # Whatever FastAPI put there (its own validation schema included), errors are Problems.
                response["content"] = {PROBLEM_MEDIA_TYPE: {"schema": dict(problem_ref)}}
    schemas = schema.get("components", {}).get("schemas", {})
    for name in _FASTAPI_VALIDATION_SCHEMAS:
        schemas.pop(name, None)


def install_openapi(app: FastAPI) -> None:
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        schema = generate()  # also kept as ``app.openapi_schema``: filed once, served as filed
        _file_read_limits(schema)
        _file_problems(schema)
        return schema

    # Replacing the method is FastAPI's documented way to extend the schema; mypy refuses any assignment.
    app.openapi = openapi  # type: ignore[method-assign]
