"""Opaque page cursors: the sort key of the last item on a page, url-safe base64 encoded.

The key is a (time, id) pair: ``(created_at, id)`` of a task, ``(recorded_at, task_id)`` of a dead letter.
Keyset pagination on that pair stays stable while items are being added, which offsets would not.
"""

from __future__ import annotations

import base64
import binascii
from datetime import UTC, datetime
from uuid import UUID

from taskyard_common.store.records import Cursor

_MAX_LENGTH = 200


class InvalidCursor(ValueError):
    """Not a cursor this API issued."""


def encode_cursor(at: datetime, item_id: UUID) -> str:
    raw = f"{at.isoformat()}|{item_id}".encode("ascii")
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def decode_cursor(cursor: str) -> Cursor:
    try:
        if len(cursor) > _MAX_LENGTH:
            raise ValueError("too long")
        padded = cursor.encode("ascii") + b"=" * (-len(cursor) % 4)
        text = base64.b64decode(padded, altchars=b"-_", validate=True).decode("ascii")
        stamp, separator, ident = text.partition("|")
        created_at = datetime.fromisoformat(stamp)
        if not separator or created_at.tzinfo is None:
            raise ValueError("not a cursor")
        # In UTC, as issued: an offset near year 1 or 9999 cannot be compared with stored times.
        return created_at.astimezone(UTC), UUID(ident)
    except (ValueError, OverflowError, binascii.Error) as exc:
        # UnicodeError is a ValueError; the reason stays internal, a client only needs "not valid".
        raise InvalidCursor("malformed cursor") from exc
