import io
import json
import logging

import pytest

from taskyard_common.logging import configure_logging
from taskyard_common.settings import LogSettings


class _Stamp(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = "req-1"
        return True


@pytest.fixture
def root_handlers():
    root = logging.getLogger()
    saved, level = root.handlers[:], root.level
    yield
    root.handlers[:] = saved
    root.setLevel(level)


@pytest.mark.parametrize("json_format", [False, True])
def test_request_id_is_printed_only_when_a_filter_set_it(root_handlers, json_format: bool):
    configure_logging(LogSettings(json_format=json_format), "svc", filters=[_Stamp()])
    handler = logging.getLogger().handlers[0]
    stream = io.StringIO()
    handler.setStream(stream)  # type: ignore[attr-defined]
    logging.getLogger("taskyard.test").warning("with id")
    handler.removeFilter(handler.filters[0])
    logging.getLogger("taskyard.test").warning("without")
    first, second = stream.getvalue().splitlines()
    if json_format:
        assert json.loads(first)["request_id"] == "req-1"
        assert "request_id" not in json.loads(second)
    else:
        assert first.endswith("svc taskyard.test [request_id=req-1]: with id")
        assert second.endswith("svc taskyard.test: without")


@pytest.mark.parametrize("json_format", [False, True])
def test_a_value_from_a_request_cannot_forge_a_log_line(root_handlers, json_format: bool):
    """A percent-decoded path (``%0a`` is a line break) logged as is would start a second, forged line in
    text logs: every event stays one line, its control characters escaped; a traceback keeps its lines."""
    configure_logging(LogSettings(json_format=json_format), "svc")
    handler = logging.getLogger().handlers[0]
    stream = io.StringIO()
    handler.setStream(stream)  # type: ignore[attr-defined]
    path = "/v1/tasks/x\n2026-01-01 00:00:00,000 ERROR taskyard-api forged: admin key created\r\x1b[2K"
    logging.getLogger("taskyard.test").warning("database unavailable for GET %s", path)
    lines = stream.getvalue().splitlines()
    assert len(lines) == 1
    if json_format:
        assert json.loads(lines[0])["msg"] == f"database unavailable for GET {path}"
    else:
        assert lines[0].endswith(
            "for GET /v1/tasks/x\\n2026-01-01 00:00:00,000 ERROR taskyard-api forged: admin key created\\r\\x1b[2K"
        )
    try:
        raise ValueError("boom")
    except ValueError:
        logging.getLogger("taskyard.test").exception("failed")
    assert "Traceback (most recent call last):" in stream.getvalue()
