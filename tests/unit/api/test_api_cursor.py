import base64
import uuid
from datetime import UTC, datetime, timedelta, timezone

import pytest

from taskyard_api.http.cursor import InvalidCursor, decode_cursor, encode_cursor


@pytest.mark.parametrize(
    "created_at",
    [
        datetime(2025, 1, 2, 3, 4, 5, 678901, tzinfo=UTC),
        datetime(2025, 6, 1, tzinfo=timezone(timedelta(hours=-7))),
    ],
)
def test_round_trip_is_exact_and_url_safe(created_at: datetime):
    task_id = uuid.uuid4()
    cursor = encode_cursor(created_at, task_id)
    assert set(cursor) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
    assert decode_cursor(cursor) == (created_at, task_id)


def _b64(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).rstrip(b"=").decode()


@pytest.mark.parametrize(
    "cursor",
    [
        "",
        "!!!",
        "é",
        "a",  # impossible base64 length
        _b64("no separator"),
        _b64(f"2025-01-01T00:00:00|{uuid.UUID(int=1)}"),  # naive time
        _b64("2025-01-01T00:00:00+00:00|not-a-uuid"),
        _b64(f"yesterday|{uuid.UUID(int=2)}"),
        base64.urlsafe_b64encode(b"\xff\xfe").decode(),
        "A" * 1000,
    ],
)
def test_malformed_cursors_are_refused(cursor: str):
    with pytest.raises(InvalidCursor):
        decode_cursor(cursor)
