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
