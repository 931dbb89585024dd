"""Standard Webhooks signatures (https://www.standardwebhooks.com): what a receiver verifies.

The signed content is ``{webhook-id}.{webhook-timestamp}.{body}``, the key the base64-decoded part of the
tenant's ``whsec_`` secret, the signature ``v1,<base64 of HMAC-SHA256>``. The body is the exact bytes sent,
so a receiver must verify the raw body before parsing it.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from typing import Any

from taskyard_common.store.webhook_secrets import signing_key

USER_AGENT = "taskyard-webhooks/1"


def body_of(payload: dict[str, Any]) -> bytes:
    """The bytes sent for a payload: compact JSON, UTF-8 (the same for every attempt of a delivery)."""
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def sign(secret: str, msg_id: str, timestamp: int, body: bytes) -> str:
    """The ``webhook-signature`` header value."""
    content = f"{msg_id}.{timestamp}.".encode() + body
    digest = hmac.new(signing_key(secret), content, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode("ascii")


def headers(secret: str, msg_id: str, timestamp: int, body: bytes) -> dict[str, str]:
    """Every header of one attempt; ``timestamp`` is the attempt's (seconds since the epoch)."""
    return {
        "content-type": "application/json",
        "user-agent": USER_AGENT,
        "webhook-id": msg_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": sign(secret, msg_id, timestamp, body),
    }
