"""Webhook signatures as docs/api.md tells receivers to verify them (Standard Webhooks)."""

import base64
import hashlib
import hmac
import json

from taskyard_broker_agent.webhooks.signing import body_of, headers, sign
from taskyard_common.store.webhook_secrets import new_secret, signing_key

# The Standard Webhooks specification's published test vector.
SPEC_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
SPEC_ID = "msg_p5jXN8AQM9LWM0D4loKWxJek"
SPEC_TIMESTAMP = 1614265330
SPEC_BODY = b'{"test": 2432232314}'
SPEC_SIGNATURE = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="


def verify(secret: str, msg_id: str, timestamp: str, body: bytes, signature_header: str) -> bool:
    """The receiver's check, written from the documentation alone (docs/api.md, Webhooks)."""
    key = base64.b64decode(secret.removeprefix("whsec_"))
    signed = f"{msg_id}.{timestamp}.".encode() + body
    expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
    return any(
        hmac.compare_digest(sig, expected)
        for version, _, sig in (part.partition(",") for part in signature_header.split())
        if version == "v1"
    )


def test_the_specification_test_vector():
    assert sign(SPEC_SECRET, SPEC_ID, SPEC_TIMESTAMP, SPEC_BODY) == SPEC_SIGNATURE
    assert verify(SPEC_SECRET, SPEC_ID, str(SPEC_TIMESTAMP), SPEC_BODY, SPEC_SIGNATURE)


def test_every_header_of_an_attempt_and_its_signature_verifies():
    secret = new_secret()
    body = body_of({"type": "task.completed", "data": {"task_id": "x", "result": {"output": "é"}}})
    sent = headers(secret, "msg_abc_7", 1700000000, body)
    assert sent["webhook-id"] == "msg_abc_7" and sent["webhook-timestamp"] == "1700000000"
    assert sent["content-type"] == "application/json"
    assert verify(secret, "msg_abc_7", "1700000000", body, sent["webhook-signature"])
    # Any change to the id, the timestamp or the body breaks it.
    assert not verify(secret, "msg_abc_8", "1700000000", body, sent["webhook-signature"])
    assert not verify(secret, "msg_abc_7", "1700000001", body, sent["webhook-signature"])
    assert not verify(secret, "msg_abc_7", "1700000000", body + b" ", sent["webhook-signature"])
    assert not verify(new_secret(), "msg_abc_7", "1700000000", body, sent["webhook-signature"])


def test_the_body_is_compact_utf8_json_the_same_every_time():
    payload = {"b": 1, "a": ["é", None]}
    assert body_of(payload) == '{"b":1,"a":["é",null]}'.encode()
    assert json.loads(body_of(payload)) == payload


def test_a_secret_is_whsec_and_32_random_bytes():
    secret = new_secret()
    assert secret.startswith("whsec_") and len(signing_key(secret)) == 32
    assert secret != new_secret()
