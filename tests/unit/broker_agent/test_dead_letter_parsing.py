"""Reading a dead letter: reason, queue, death history, task id and specialist, from RabbitMQ 3.10 to 4.x."""

import json
import uuid
from datetime import UTC, datetime

import pytest

from taskyard_broker_agent.dead_letters.parsing import (
    RAW_TEXT_MAX,
    death_history,
    json_safe,
    latest_death,
    normalise_reason,
    parse_body,
    parse_dead_letter,
    specialist_of,
)
from taskyard_common.topology import Topology

TOPOLOGY = Topology("p")
DIED_AT = datetime(2026, 11, 30, 13, 26, 1, tzinfo=UTC)

# Shapes as aio-pika hands them over (captured from RabbitMQ 3.10.8): newest death first, ``time`` a datetime.
RETRIED_THEN_REJECTED_310 = {
    "x-death": [
        {
            "count": 1,
            "exchange": "p.retry",
            "queue": "p.intake",
            "reason": "rejected",
            "routing-keys": ["1.intake"],
            "time": DIED_AT,
        },
        {
            "count": 2,
            "reason": "expired",
            "queue": "p.delay.1s",
            "time": DIED_AT,
            "exchange": "p.delay",
            "routing-keys": ["1.intake"],
        },
    ],
    "x-delivery-count": 0,
    # The FIRST death is the delay queue's expiry: not why the message is here.
    "x-first-death-exchange": "p.delay",
    "x-first-death-queue": "p.delay.1s",
    "x-first-death-reason": "expired",
}
DELIVERY_LIMIT_310 = {
    "x-death": [
        {
            "count": 1,
            "reason": "delivery_limit",
            "queue": "p.work.summarizer",
            "time": DIED_AT,
            "exchange": "p.tasks",
            "routing-keys": ["summarizer"],
        }
    ],
    "x-first-death-exchange": "p.tasks",
    "x-first-death-queue": "p.work.summarizer",
    "x-first-death-reason": "delivery_limit",
}
# 4.x adds x-last-death-*; some clients hand long strings over as bytes.
MAXLEN_4X_BYTES = {
    "x-death": [
        {
            "count": 1,
            "reason": b"maxlen",
            "queue": b"p.quarantine.researcher",
            "time": DIED_AT,
            "exchange": b"p.quarantine",
            "routing-keys": [b"researcher"],
        }
    ],
    "x-first-death-reason": b"expired",
    "x-first-death-queue": b"p.delay.5s",
    "x-last-death-reason": b"maxlen",
    "x-last-death-queue": b"p.quarantine.researcher",
}


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        (RETRIED_THEN_REJECTED_310, ("rejected", "p.intake")),
        (DELIVERY_LIMIT_310, ("delivery_limit", "p.work.summarizer")),
        (MAXLEN_4X_BYTES, ("maxlen", "p.quarantine.researcher")),
        # Only the x-first-death-* headers (a relay that dropped x-death).
        (
            {"x-first-death-reason": "expired", "x-first-death-queue": "p.work.general"},
            ("expired", "p.work.general"),
        ),
        ({"x-death": "not a list"}, ("unknown", "unknown")),
        ({}, ("unknown", "unknown")),
    ],
    ids=["3.10-retried-then-rejected", "3.10-delivery-limit", "4.x-bytes", "first-death-only", "bad", "none"],
)
def test_reason_and_queue_come_from_the_latest_death(headers, expected):
    assert latest_death(headers) == expected


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ("rejected", "rejected"),
        (b"expired", "expired"),
        ("maxlen", "maxlen"),
        ("delivery_limit", "delivery_limit"),
        ("Delivery-Limit", "delivery_limit"),
        ("something-new", "unknown"),
        (None, "unknown"),
        (3, "unknown"),
    ],
)
def test_reasons_are_normalised_to_a_bounded_set(raw, reason):
    assert normalise_reason(raw) == reason


def test_death_history_is_json_safe():
    deaths = death_history(MAXLEN_4X_BYTES)
    assert deaths == [
        {
            "count": 1,
            "reason": "maxlen",
            "queue": "p.quarantine.researcher",
            "time": "2026-11-30T13:26:01+00:00",
            "exchange": "p.quarantine",
            "routing-keys": ["researcher"],
        }
    ]
    json.dumps(deaths)  # storable as is
    assert [d["reason"] for d in death_history(RETRIED_THEN_REJECTED_310)] == ["rejected", "expired"]
    assert death_history({}) == []
    assert death_history({"x-death": ["junk", {"count": 1}]}) == [{"count": 1}]


def test_nul_characters_are_replaced_everywhere_stored():
    headers = {"x-death": [{"reason": "rejected", "queue": "p.work.general", "note": "a\x00b"}]}
    body = b'{"task_id": "x", "input": {"k\\u0000": ["\\u0000"]}}'
    letter = parse_dead_letter(body, headers, None, TOPOLOGY)
    assert letter.message == {"task_id": "x", "input": {"k\ufffd": ["\ufffd"]}}
    assert letter.deaths[0]["note"] == "a\ufffdb"


def test_json_safe_converts_what_amqp_tables_hold():
    from decimal import Decimal

    value = {b"k": [b"\xff\x00", Decimal("1.5"), float("nan"), (1, True, None)], "t": DIED_AT}
    assert json_safe(value) == {
        "k": ["base64:/wA=", 1.5, "nan", [1, True, None]],
        "t": "2026-11-30T13:26:01+00:00",
    }


def test_body_is_kept_as_json_or_as_cut_text():
    assert parse_body(b'{"task_id": "x", "n": 1}') == {"task_id": "x", "n": 1}
    assert parse_body(b"[1, 2]") == {"raw": "[1, 2]"}
    assert parse_body(b"\xff\xfe not utf-8") == {"raw": "\ufffd\ufffd not utf-8"}
    assert parse_body(b"x" * (RAW_TEXT_MAX + 10)) == {"raw": "x" * RAW_TEXT_MAX}


def test_specialist_from_the_work_message_or_the_queue():
    assert specialist_of({"specialist": "researcher"}, "p.work.summarizer", TOPOLOGY) == "researcher"
    assert specialist_of({}, "p.work.summarizer", TOPOLOGY) == "summarizer"
    assert specialist_of({}, "p.quarantine.general", TOPOLOGY) == "general"
    # A priority level's queue names its specialist too.
    assert specialist_of({}, "p.work.summarizer.high", TOPOLOGY) == "summarizer"
    assert specialist_of({}, "p.work.summarizer.low", TOPOLOGY) == "summarizer"
    assert specialist_of({"specialist": "Not Valid"}, "p.intake", TOPOLOGY) is None
    assert specialist_of({}, "p.intake.high", TOPOLOGY) is None
    assert specialist_of({}, "other.work.summarizer", TOPOLOGY) is None


def test_a_work_message_dead_letter():
    task_id = uuid.uuid4()
    body = json.dumps({"kind": "work", "task_id": str(task_id), "specialist": "summarizer"}).encode()
    letter = parse_dead_letter(body, DELIVERY_LIMIT_310, str(task_id), TOPOLOGY)
    assert (letter.task_id, letter.reason, letter.queue, letter.specialist) == (
        task_id,
        "delivery_limit",
        "p.work.summarizer",
        "summarizer",
    )
    assert letter.message["kind"] == "work"
    assert letter.deaths[0]["time"] == "2026-11-30T13:26:01+00:00"


def test_the_task_id_comes_from_the_message_id_or_the_body():
    task_id = uuid.uuid4()
    from_body = parse_dead_letter(json.dumps({"task_id": str(task_id)}).encode(), {}, "raw", TOPOLOGY)
    assert from_body.task_id == task_id
    # A body that is not JSON is still recorded when the message id names the task.
    not_json = parse_dead_letter(b"\x00garbage", RETRIED_THEN_REJECTED_310, str(task_id), TOPOLOGY)
    assert (not_json.task_id, not_json.message, not_json.specialist) == (
        task_id,
        {"raw": "\ufffdgarbage"},  # jsonb cannot hold NUL: replaced
        None,
    )
    assert parse_dead_letter(b"garbage", {}, None, TOPOLOGY).task_id is None
    assert parse_dead_letter(b'{"task_id": 5}', {}, "nope", TOPOLOGY).task_id is None
