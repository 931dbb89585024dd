"""The Celery baseline's application: the same RabbitMQ (one quorum queue), PostgreSQL result backend.

Built by a function from explicit arguments, never from the environment at import, so the benchmark (the
producer) and ``python -m bench.celery_worker`` (the worker process) build the very same app.

Celery settings are its defaults except where the comparison needs otherwise: the queue is a quorum queue
(``x-queue-type: quorum``; Celery >= 5.5 then turns global QoS off by itself), results go to PostgreSQL
through SQLAlchemy + psycopg 3 (``db+postgresql+psycopg://``) in the scenario's own schema, since
taskyard keeps every task's state in PostgreSQL too. Publisher confirms stay off (Celery's default), which
favours Celery: taskyard's API waits for a confirm before answering.
"""

from __future__ import annotations

import time

from celery import Celery
from kombu import Exchange, Queue

NOOP = "bench.noop"
SLEEP = "bench.sleep"


def backend_url(db_url: str) -> str:
    """``postgresql://...`` -> SQLAlchemy's psycopg 3 URL with Celery's ``db+`` scheme."""
    scheme, rest = db_url.split("://", 1)
    if scheme not in ("postgres", "postgresql"):
        raise ValueError(f"not a PostgreSQL URL: {scheme}://...")
    return f"db+postgresql+psycopg://{rest}"


def make_app(broker_url: str, db_url: str, queue: str, schema: str) -> Celery:
    app = Celery("bench", broker=broker_url, backend=backend_url(db_url))
    app.conf.update(
        task_queues=[
            Queue(
                queue,
                Exchange(queue, type="topic"),
                routing_key=queue,
                queue_arguments={"x-queue-type": "quorum"},
            )
        ],
        task_default_queue=queue,
        task_default_exchange=queue,
        task_default_exchange_type="topic",  # native delayed delivery (quorum) wants topic
        task_default_routing_key=queue,
        database_table_schemas={"task": schema, "group": schema},
        database_create_tables_at_setup=True,
        broker_connection_retry_on_startup=True,
        worker_enable_remote_control=False,  # no pidbox queues left behind
        worker_hijack_root_logger=False,
        task_serializer="json",
        result_serializer="json",
        accept_content=["json"],
    )

    @app.task(name=NOOP)
    def noop() -> None:
        return None

    @app.task(name=SLEEP)
    def sleep(seconds: float) -> None:
        time.sleep(seconds)  # stands in for a blocking LLM call

    return app
