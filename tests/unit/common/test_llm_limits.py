import asyncio

from taskyard_common.llm_limits import COMPLETION_ESTIMATE, Bucket, LlmLimits, estimate_tokens
from taskyard_common.model_specs import ModelSpec
from taskyard_devllm.limits import Limits


def test_a_call_is_estimated_from_its_prompt_and_max_tokens():
    body = {"messages": [{"role": "user", "content": "x" * 400}, {"role": "assistant", "content": None}]}
    assert estimate_tokens(body) == 100 + COMPLETION_ESTIMATE
    assert estimate_tokens({**body, "max_tokens": 10}) == 110
    assert estimate_tokens({**body, "max_completion_tokens": 20, "max_tokens": 10}) == 120


def test_buckets_hold_a_second_and_batch_a_tenth_of_one():
    assert (Bucket("k", "requests", 6000).burst, Bucket("k", "requests", 6000).batch) == (100, 10)
    # At least one of each, however low the limit.
    assert (Bucket("k", "requests", 1).burst, Bucket("k", "requests", 1).batch) == (1, 1)


def test_the_dev_server_refuses_above_its_rate_and_counts():
    limits = Limits()
    limits.set("m", 60)  # one a second, two seconds of burst
    answers = [limits.check("m") for _ in range(3)]
    assert answers[:2] == [None, None]
    refused = answers[2]
    assert refused is not None and int(refused["retry-after-ms"]) > 0
    assert refused["x-ratelimit-remaining-requests"] == "0"
    assert (limits.counts["m"].answered, limits.counts["m"].rate_limited) == (2, 1)
    assert limits.check("unlimited") is None


async def test_max_concurrent_holds_calls_in_this_process():
    # No rpm or tpm: no bucket is read, so no store is needed.
    limits = LlmLimits(None, {"m": ModelSpec(name="m", max_concurrent=1)})  # type: ignore[arg-type]
    assert limits.limits("m") and not limits.limits("other")
    async with limits.call("m", {"messages": []}):
        second = asyncio.ensure_future(limits.call("m", {"messages": []}).__aenter__())
        await asyncio.sleep(0.05)
        assert not second.done(), "the second call waits for the first"
    await asyncio.wait_for(second, 5)
