"""The webhook dispatcher: drains the outbox the store's terminal transitions write, at least once per
delivery, with the same ``webhook-id`` every time.

Each round claims as many due deliveries as there are free slots (``TASKYARD_WEBHOOK_CONCURRENCY``) and
sends each in a task of its own; a finished attempt frees its slot and starts the next round at once.
Each attempt is signed with the tenant's secret (created on first use, kept ``SECRET_CACHE_SECONDS``, so
a rotation applies within that long) and recorded: delivered on a 2xx; otherwise an attempt log entry and
the next attempt after a backoff (``retries.decide``), or failed once the retry window is over. On stop,
attempts in flight get the grace period; one cut short is sent again when its claim lapses.
"""

from __future__ import annotations

import asyncio
import logging
import time

from taskyard_broker_agent.webhooks.outbox import Delivery, Outbox
from taskyard_broker_agent.webhooks.retries import Next, decide
from taskyard_broker_agent.webhooks.sender import Attempt, Resolver, Sender, resolve
from taskyard_broker_agent.webhooks.signing import body_of, headers
from taskyard_common import metrics
from taskyard_common.errors import StoreUnavailable
from taskyard_common.messages import utcnow
from taskyard_common.periodic import PeriodicTask
from taskyard_common.store.webhook_secrets import WebhookSecretStore
from taskyard_common.webhooks import WebhookSettings

log = logging.getLogger(__name__)

SECRET_CACHE_SECONDS = 30.0
# How often the outbox's oldest age is sampled for its gauge.
SAMPLE_SECONDS = 15.0
# A claim outlasts the attempt (bounded by the timeout) by this much: time to record it.
CLAIM_MARGIN_SECONDS = 30.0


class Dispatcher:
    def __init__(
        self,
        outbox: Outbox,
        secrets: WebhookSecretStore,
        settings: WebhookSettings,
        *,
        resolver: Resolver = resolve,
        claim_seconds: float | None = None,
    ) -> None:
        """``claim_seconds``: how long a claimed delivery is this dispatcher's (default: the timeout and
        a margin to record the attempt); past it, another round may send it again."""
        self._outbox = outbox
        self._secrets = secrets
        self._settings = settings
        self._sender = Sender(settings, resolver=resolver)
        self._claim_seconds = claim_seconds or settings.timeout_seconds + CLAIM_MARGIN_SECONDS
        self._in_flight: set[asyncio.Task[None]] = set()
        self._secret_cache: dict[str, tuple[str, float]] = {}
        self._sampled_at: float | None = None
        self._loop = PeriodicTask("webhooks", settings.poll_seconds, self._round, first_after=0, logger=log)

    @property
    def running(self) -> bool:
        return self._loop.running

    @property
    def in_flight(self) -> int:
        return len(self._in_flight)

    def start(self) -> None:
        self._loop.start()

    async def stop(self, grace_seconds: float) -> None:
        """No new claims; attempts in flight get ``grace_seconds``, then are cancelled (their claims lapse
        and another round, here or in another broker agent, sends them again)."""
        await self._loop.stop(grace_seconds)
        pending = set(self._in_flight)
        if pending:
            _, late = await asyncio.wait(pending, timeout=grace_seconds)
            for task in late:
                task.cancel()
            await asyncio.gather(*late, return_exceptions=True)
        await self._sender.close()

    async def _round(self) -> None:
        await self._sample()
        free = self._settings.concurrency - len(self._in_flight)
        if free <= 0:
            return
        for delivery in await self._outbox.claim(free, self._claim_seconds):
            task = asyncio.create_task(self._attempt(delivery), name=f"webhook {delivery.id}")
            self._in_flight.add(task)
            task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task[None]) -> None:
        self._in_flight.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("webhook attempt failed unexpectedly", exc_info=task.exception())
        # A slot is free: look for due deliveries now rather than at the end of the interval.
        self._loop.nudge()

    async def _sample(self) -> None:
        now = time.monotonic()
        if self._sampled_at is not None and now - self._sampled_at < SAMPLE_SECONDS:
            return
        self._sampled_at = now
        metrics.WEBHOOK_OUTBOX_OLDEST_AGE.set(await self._outbox.oldest_pending_seconds())

    async def _secret(self, tenant: str) -> str:
        cached = self._secret_cache.get(tenant)
        now = time.monotonic()
        if cached is not None and now - cached[1] < SECRET_CACHE_SECONDS:
            return cached[0]
        secret = await self._secrets.secret(tenant)
        self._secret_cache[tenant] = (secret, now)
        return secret

    async def _attempt(self, delivery: Delivery) -> None:
        try:
            secret = await self._secret(delivery.tenant)
        except StoreUnavailable as exc:
            log.warning("webhook %s: no secret for now (%s); sent when its claim lapses", delivery.id, exc)
            return
        body = body_of(delivery.payload)
        attempt = await self._sender.post(
            delivery.url, body, headers(secret, delivery.id, int(time.time()), body)
        )
        await self._record(delivery, attempt)

    async def _record(self, delivery: Delivery, attempt: Attempt) -> None:
        now = utcnow()
        number = delivery.attempts + 1
        decision = decide(
            ok=attempt.ok,
            attempt=number,
            window_start=delivery.window_start,
            now=now,
            settings=self._settings,
        )
        status = {Next.DELIVERED: "delivered", Next.RETRY: "pending", Next.GIVE_UP: "failed"}[decision.next]
        try:
            recorded = await self._outbox.record(
                delivery, attempt.log_entry(now.isoformat()), status=status, next_attempt_at=decision.at
            )
        except StoreUnavailable as exc:
            log.warning("webhook %s: attempt %d not recorded (%s); sent again", delivery.id, number, exc)
            recorded = False
        metrics.WEBHOOK_DELIVERIES.labels(_outcome(attempt, decision.next)).inc()
        if not recorded:
            log.info(
                "webhook %s: attempt %d not recorded: redelivered or claimed meanwhile", delivery.id, number
            )
        elif decision.next is Next.GIVE_UP:
            log.warning(
                "webhook %s for task %s gave up after %d attempts: %s",
                delivery.id,
                delivery.task_id,
                number,
                attempt.error or f"HTTP {attempt.status_code}",
            )
        elif decision.next is Next.RETRY:
            log.info(
                "webhook %s attempt %d failed (%s); next at %s",
                delivery.id,
                number,
                attempt.error or f"HTTP {attempt.status_code}",
                decision.at.isoformat() if decision.at else "?",
            )


def _outcome(attempt: Attempt, next_: Next) -> str:
    """The ``outcome`` label of ``taskyard_webhook_deliveries_total``."""
    if next_ is Next.DELIVERED:
        return "delivered"
    if next_ is Next.GIVE_UP:
        return "gave_up"
    return "refused" if attempt.refused else "failed_attempt"
