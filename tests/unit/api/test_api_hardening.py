"""Pure parts of the API's hardening: key format, RateLimit headers, the idempotency request hash."""

from __future__ import annotations

import re

from taskyard_api.models import TaskSubmission
from taskyard_api.submission.idempotency import request_hash
from taskyard_api.submission.rate_limit import rate_limit_headers
from taskyard_common.store.keys import hash_secret, new_key, parse_key


def test_a_new_key_parses_back_to_its_id_and_secret():
    key_id, key = new_key()
    assert re.fullmatch(r"tyk_[0-9a-f]{8}", key_id)
    parsed = parse_key(key)
    assert parsed is not None and parsed[0] == key_id
    assert len(parsed[1]) >= 43  # 32 random bytes, base64url
    assert len(hash_secret(parsed[1])) == 64
    assert new_key()[1] != key


def test_malformed_keys_do_not_parse():
    _, key = new_key()
    for bad in ("", "tyk_", key[:20], key.upper(), "Bearer " + key, key.replace("tyk_", "tyx_"), key + " "):
        assert parse_key(bad) is None, bad


def test_ratelimit_headers_follow_the_structured_field_draft():
    full = rate_limit_headers(99.0, per_second=50, burst=100)
    assert full == {"RateLimit-Policy": '"submit";q=100;w=2', "RateLimit": '"submit";r=99;t=1'}
    # Empty: t is the wait for the next token, at least a second.
    assert rate_limit_headers(0.2, per_second=0.5, burst=10)["RateLimit"] == '"submit";r=0;t=2'
    assert rate_limit_headers(0.99, per_second=50, burst=100)["RateLimit"] == '"submit";r=0;t=1'
    assert rate_limit_headers(2.5, per_second=1, burst=3)["RateLimit"] == '"submit";r=2;t=1'


def test_the_request_hash_ignores_key_order_but_not_content():
    a = TaskSubmission.model_validate({"input": {"a": 1, "b": 2}, "metadata": {"x": "1", "y": "2"}})
    b = TaskSubmission.model_validate({"metadata": {"y": "2", "x": "1"}, "input": {"b": 2, "a": 1}})
    c = TaskSubmission.model_validate({"input": {"a": 1, "b": 3}, "metadata": {"x": "1", "y": "2"}})
    assert request_hash(a) == request_hash(b) != request_hash(c)
