"""The JSON documents of webhooks: what a submission asks for, and a task's deliveries with their attempts."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator

MAX_WEBHOOK_URL_LENGTH = 2048
WebhookEvent = Literal["completed", "failed", "cancelled", "dead_lettered"]
# taskyard_common.webhooks.WEBHOOK_EVENTS, typed for the model (a unit test checks both agree).
EVENT_ORDER: tuple[WebhookEvent, ...] = ("completed", "failed", "cancelled", "dead_lettered")


def check_webhook_url(url: str) -> str:
    """An absolute http(s) URL of printable ASCII with a host and no credentials (they would be stored
    and shown with the task: put a token in the path or query instead, or verify the signature)."""
    if not url.isascii() or not url.isprintable() or " " in url:
        raise ValueError("must be printable ASCII without spaces (write an international host as punycode)")
    parts = urlsplit(url)
    if parts.scheme.lower() not in ("http", "https"):
        raise ValueError("must be an http or https URL")
    if "@" in parts.netloc:
        raise ValueError("must not contain credentials (user:password@)")
    if not parts.hostname:
        raise ValueError("must name a host")
    try:
        port = parts.port
    except ValueError:
        raise ValueError("has an invalid port") from None
    if port == 0:
        raise ValueError("has an invalid port")
    return url


class WebhookRequest(BaseModel):
    """Where to announce the task's terminal status: a signed JSON POST (Standard Webhooks) per event."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [{"url": "https://hooks.example.com/taskyard", "events": ["completed"]}]
        },
    )

    url: Annotated[str, AfterValidator(check_webhook_url)] = Field(
        max_length=MAX_WEBHOOK_URL_LENGTH,
        description="http or https, at most 2048 characters, no credentials; by default not a private, "
        "loopback or link-local address",
    )
    events: list[WebhookEvent] = Field(
        default_factory=lambda: list(EVENT_ORDER),
        min_length=1,
        description="The terminal statuses to announce; default all of them",
    )

    @field_validator("events")
    @classmethod
    def _events_once_each(cls, value: list[WebhookEvent]) -> list[WebhookEvent]:
        # Stored once each, in lifecycle order, whatever order or repetition the client sent.
        return [e for e in EVENT_ORDER if e in value]


class WebhookAttempt(BaseModel):
    """One attempt of a delivery, as the dispatcher recorded it."""

    at: datetime
    status_code: int | None = Field(description="The receiver's HTTP status; null: no answer (see error)")
    error: str | None = Field(
        description="Why there was no answer: timeout, connection error, refused address"
    )
    duration_ms: float | None = None


class WebhookDeliveryLinks(BaseModel):
    task: str = Field(description="The task it announces")
    redeliver: str = Field(description="POST here to send it again")


class WebhookDelivery(BaseModel):
    """One event of a task announced to its webhook: sent until a 2xx answer, with the same id every time."""

    id: str = Field(description="The webhook-id header of every attempt")
    event: WebhookEvent
    url: str
    status: Literal["pending", "delivered", "failed"] = Field(
        description="pending: to send or retry; delivered: a 2xx answer; failed: no 2xx within the retry window"
    )
    attempts: int
    next_attempt_at: datetime | None = Field(description="When it is due (pending only)")
    created_at: datetime
    delivered_at: datetime | None = Field(description="The last 2xx answer")
    redelivered_at: datetime | None = Field(description="The last redelivery asked for")
    attempt_history: list[WebhookAttempt] = Field(description="Its attempts, oldest first (the latest 100)")
    payload: dict[str, Any] = Field(description="The JSON body every attempt sends")
    links: WebhookDeliveryLinks


class WebhookDeliveryList(BaseModel):
    """A task's deliveries, oldest first (one per event its webhook asked for that happened)."""

    items: list[WebhookDelivery]
