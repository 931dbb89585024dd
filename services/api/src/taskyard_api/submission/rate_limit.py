"""The per-tenant submission rate limit and its IETF ``RateLimit`` headers.

The bucket lives in PostgreSQL (``taskyard_common.store.rate_limits``), so every API replica draws on one
budget. Headers follow draft-ietf-httpapi-ratelimit-headers in their structured-field form:
``RateLimit-Policy: "submit";q=<burst>;w=<seconds to refill the bucket>`` and
``RateLimit: "submit";r=<remaining>;t=<seconds until full, or until the next token when none is left>``.
"""

from __future__ import annotations

import math

from taskyard_api.http.problems import RATE_LIMITED, VALIDATION_ERROR, FieldError, ProblemException
from taskyard_api.resources import Resources

POLICY = "submit"


def rate_limit_headers(
    tokens: float, *, per_second: float, burst: int, policy: str = POLICY
) -> dict[str, str]:
    remaining = math.floor(tokens)
    window = max(1, math.ceil(burst / per_second))
    if remaining < 1:
        reset = max(1, math.ceil((1 - tokens) / per_second))
    else:
        reset = max(0, math.ceil((burst - tokens) / per_second))
    return {
        "RateLimit-Policy": f'"{policy}";q={burst};w={window}',
        "RateLimit": f'"{policy}";r={remaining};t={reset}',
    }


def check_affordable(resources: Resources, count: int) -> None:
    """A group of more tasks than the bucket holds could never be taken: a 422 rather than a 429 that no
    wait would cure."""
    api = resources.settings.api
    if api.rate_limited and count > api.rate_limit_burst:
        raise ProblemException(
            VALIDATION_ERROR(
                f"A group of {count} tasks is more than this tenant may submit at once "
                f"({api.rate_limit_burst}): submit smaller groups.",
                errors=[
                    FieldError(
                        loc=["body", "tasks"],
                        msg=f"at most {api.rate_limit_burst} tasks under the rate limit's burst",
                        type="too_long",
                    )
                ],
            )
        )


async def take_submission_token(resources: Resources, tenant: str, count: int = 1) -> dict[str, str]:
    """Take one token of ``tenant``'s bucket (a group of ``count`` tasks: ``count`` at once, at most the
    burst: see ``check_affordable``); the headers to send, or 429 when the bucket holds fewer."""
    api = resources.settings.api
    if not api.rate_limited:
        return {}
    taken = await resources.limits.take(
        tenant, per_second=api.rate_limit_per_second, burst=api.rate_limit_burst, count=count
    )
    headers = rate_limit_headers(
        taken.tokens, per_second=api.rate_limit_per_second, burst=api.rate_limit_burst
    )
    if not taken.allowed:
        retry_after = max(1, math.ceil((count - taken.tokens) / api.rate_limit_per_second))
        what = "" if count == 1 else f"; a group of {count} tasks takes {count} at once"
        raise ProblemException(
            RATE_LIMITED(
                f"This tenant may submit {api.rate_limit_per_second:g} tasks per second (bursts of "
                f"{api.rate_limit_burst}){what}; retry after {retry_after} s. Nothing was stored."
            ),
            headers={**headers, "Retry-After": str(retry_after)},
        )
    return headers
