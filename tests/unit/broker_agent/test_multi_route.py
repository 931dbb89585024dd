"""multi_route: the parts an LLM answer names (parsed, checked, merged), the tool and prompt that offer them,
the rules router's jobs, the catalog's switch and who may be split at intake."""

import uuid
from datetime import UTC, datetime

import pytest

from taskyard_broker_agent.intake.decisions import Route, decide_intake, may_split
from taskyard_broker_agent.routing.answers import InvalidAnswer, parse_answer
from taskyard_broker_agent.routing.parts import merge_parts
from taskyard_broker_agent.routing.prompt import RoutingPrompt
from taskyard_broker_agent.routing.rules import RulesRouter
from taskyard_common.catalog import Catalog, CatalogError, parse_catalog
from taskyard_common.lifecycle import TaskStatus
from taskyard_common.messages import IntakeMessage, RoutedPart, RoutingDecision, RoutingMethod, Usage
from taskyard_common.store import TaskRecord
from tests.unit.broker_agent.test_answers import NAMES, completion

NOW = datetime(2030, 1, 1, tzinfo=UTC)
TWO_JOBS = "Summarize this report in five bullet points. Also find sources on the history of Raft consensus."


@pytest.fixture(scope="module")
def multi(catalog: Catalog) -> Catalog:
    return catalog.model_copy(update={"multi_route": True})


def answer(parts: list[dict[str, str]], specialist: str = "summarizer"):
    return completion(
        arguments={"specialist": specialist, "reason": "two jobs", "confidence": 0.9, "parts": parts}
    )


def test_an_answer_with_parts_of_two_specialists_is_a_split_decision():
    decision = parse_answer(
        answer([{"specialist": "summarizer", "job": "summarize the report"},
                {"specialist": "researcher", "job": " find  sources on Raft "}]),
        NAMES,
        0.0,
    )  # fmt: skip
    assert decision.parts == (
        RoutedPart(specialist="summarizer", job="summarize the report"),
        RoutedPart(specialist="researcher", job="find sources on Raft"),
    )
    assert (decision.specialist, decision.reason) == ("summarizer", "two jobs")


def test_one_specialist_is_no_split_and_its_jobs_merge():
    same = [{"specialist": "researcher", "job": "find A"}, {"specialist": "researcher", "job": "find B"}]
    assert parse_answer(answer(same), NAMES, 0.0).parts == ()
    assert parse_answer(answer([]), NAMES, 0.0).parts == ()
    # An answer without the field (a catalog without multi_route) is the usual single route.
    plain = completion(arguments={"specialist": "general", "reason": "x", "confidence": 0.5})
    assert parse_answer(plain, NAMES, 0.0).parts == ()
    merged = merge_parts([("researcher", "find A"), ("summarizer", "sum"), ("researcher", "find B"),
                          ("researcher", "find A"), ("general", "  ")])  # fmt: skip
    assert merged == (
        RoutedPart(specialist="researcher", job="find A; find B"),
        RoutedPart(specialist="summarizer", job="sum"),
    )


@pytest.mark.parametrize(
    ("parts", "complaint"),
    [
        (
            [{"specialist": "astrologer", "job": "stars"}, {"specialist": "general", "job": "x"}],
            "not in the catalog",
        ),
        ([{"specialist": "general", "job": str(i)} for i in range(6)], "6 parts"),
        ([{"specialist": "general"}], "parts.0.job: missing"),
    ],
)
def test_unusable_parts_refuse_the_answer(parts, complaint):
    with pytest.raises(InvalidAnswer, match=complaint):
        parse_answer(answer(parts), NAMES, 0.0)


def test_the_tool_and_prompt_offer_parts_only_with_multi_route(catalog: Catalog, multi: Catalog):
    single = RoutingPrompt.from_catalog(catalog)
    assert "parts" not in single.tool["function"]["parameters"]["properties"]  # type: ignore[index]
    assert "- parts:" not in single.system_prompt and not single.offers_parts
    split = RoutingPrompt.from_catalog(multi)
    parts = split.tool["function"]["parameters"]["properties"]["parts"]  # type: ignore[index]
    assert parts["items"]["properties"]["specialist"]["enum"] == catalog.names
    assert parts["maxItems"] == 5 and "parts" not in split.tool["function"]["parameters"]["required"]  # type: ignore[index]
    assert "- parts:" in split.system_prompt and split.offers_parts


def test_the_rules_router_splits_sentences_that_start_distinct_jobs(catalog: Catalog, multi: Catalog):
    decision = RulesRouter(multi).route(TWO_JOBS)
    assert [p.specialist for p in decision.parts] == ["summarizer", "researcher"]
    assert decision.parts[1].job == "Also find sources on the history of Raft consensus."
    assert decision.reason.startswith("distinct jobs: summarizer (matched: ")
    # Off by default: the same request goes to one specialist.
    assert RulesRouter(catalog).route(TWO_JOBS).parts == ()


@pytest.mark.parametrize(
    "request_text",
    [
        "Please summarize this document for me",
        # The second sentence is material: it starts with no keyword of the specialist it matches.
        "Summarize the meeting notes. The team discussed research budgets and sources of funding.",
        # A job for the fallback specialist is never a part.
        "Summarize this report in three bullet points. Explain why the sky is blue.",
    ],
)
def test_the_rules_router_keeps_one_job_whole(multi: Catalog, request_text: str):
    assert RulesRouter(multi).route(request_text).parts == ()


def test_the_catalog_switch_is_off_by_default_and_the_combiner_is_checked(catalog: Catalog):
    assert catalog.multi_route is False and catalog.combiner == catalog.fallback
    text = "fallback: general\nspecialists:\n  - {name: general, description: d, instructions: i}\n"
    assert parse_catalog(text + "multi_route: true\ncombine_specialist: general\n").combiner == "general"
    with pytest.raises(CatalogError, match="combine_specialist 'poet' is not a specialist"):
        parse_catalog(text + "combine_specialist: poet\n")


def record(**fields) -> TaskRecord:
    base = TaskRecord(
        id=uuid.uuid4(), status=TaskStatus.PENDING, input="x", metadata={}, requested_specialist=None,
        specialist=None, routing=None, attempts=0, result=None, error=None, usage=Usage(), created_at=NOW,
        published_at=None, routed_at=None, started_at=None, finished_at=None, updated_at=NOW,
    )  # fmt: skip
    return base.model_copy(update=fields)


def test_only_a_task_of_its_own_may_be_split(catalog: Catalog, multi: Catalog):
    own = record()
    message = IntakeMessage(task_id=own.id, input="x")
    assert decide_intake(message, own, multi, NOW) == Route(own.tenant, own)
    assert decide_intake(message, own, catalog, NOW) == Route(own.tenant)
    # A group's child (a part, a reduce step) or a delegated child: one answer, one specialist.
    for other in (record(group_id=uuid.uuid4(), group_role="child"), record(delegation={"parent_id": "p"})):
        assert not may_split(other, multi)
        assert decide_intake(message, other, multi, NOW) == Route(other.tenant)


def test_a_single_route_serializes_as_before_multi_route():
    """Services that do not know ``parts`` yet (a rolling upgrade) still read every single-route decision."""
    single = RoutingDecision(method=RoutingMethod.LLM, specialist="general", reason="r", confidence=0.5)
    assert "parts" not in single.model_dump(mode="json") and "parts" not in single.model_dump_json()
    split = single.model_copy(update={"parts": (RoutedPart(specialist="general", job="j"),)})
    assert RoutingDecision.model_validate_json(split.model_dump_json()) == split


def test_parts_the_tool_did_not_offer_are_ignored():
    stray = answer([{"specialist": "astrologer", "job": "stars"}, {"specialist": "general", "job": "x"}])
    assert parse_answer(stray, NAMES, 0.0, parts=False).parts == ()
