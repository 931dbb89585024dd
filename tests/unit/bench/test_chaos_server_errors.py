"""The chaos suite names what the API logged for a 5xx other than a 503."""

from pathlib import Path

from bench.chaos.server_errors import report, unhandled_errors

LOG = """\
2026-12-01 20:31:02,101 WARNING taskyard-api taskyard_api.http.errors: database unavailable for POST /v1/tasks
2026-12-01 20:31:02,215 ERROR taskyard-api taskyard_api.http.errors: unhandled error in POST /v1/tasks (request_id=ab)
Traceback (most recent call last):
  File "x.py", line 1, in f
asyncpg.exceptions._base.InternalClientError: cannot switch to state 12; another operation (2) is in progress
2026-12-01 20:31:03,000 WARNING taskyard-api taskyard_api.http.errors: database unavailable for GET /v1/tasks
"""


def test_each_unhandled_error_comes_with_its_traceback_and_class(tmp_path: Path) -> None:
    path = tmp_path / "api-1.log"
    path.write_text(LOG)
    [entry] = unhandled_errors(path)
    assert entry.startswith("2026-12-01 20:31:02,215 ERROR") and entry.endswith("(2) is in progress")
    assert report(path) == "API's unhandled errors: 1x InternalClientError"


def test_no_unhandled_error_no_note(tmp_path: Path) -> None:
    path = tmp_path / "api-1.log"
    path.write_text(LOG.splitlines(keepends=True)[0])
    assert report(path) is None
    assert report(tmp_path / "missing.log") is None
