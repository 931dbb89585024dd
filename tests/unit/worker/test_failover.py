import pytest

from taskyard_common.errors import TransientError
from taskyard_worker.llm_caller import FAILOVER_WAIT_SECONDS, _failover_reason
from taskyard_worker.llm_calls import FleetRateLimited, LlmRateLimited, LlmRejected, LlmUnavailable


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (LlmUnavailable("LLM answered HTTP 502", "server_error"), "server_error"),
        (LlmUnavailable("LLM unreachable", "timeout"), "timeout"),
        (LlmRateLimited("HTTP 429", None), "rate_limited"),
        (LlmRateLimited("HTTP 429", FAILOVER_WAIT_SECONDS + 1), "rate_limited"),
        (FleetRateLimited("fleet-wide limit", 30), "fleet_limited"),
        # A short wait is worth more than another model; a refusal would be refused elsewhere too.
        (LlmRateLimited("HTTP 429", FAILOVER_WAIT_SECONDS), None),
        (LlmRejected("HTTP 400"), None),
        (TransientError("the LLM answered no choices"), None),
    ],
)
def test_what_sends_a_call_to_the_next_model(error: Exception, reason: str | None):
    assert _failover_reason(error) == reason
