"""The lane depth rule (``lanes.py``): max(min_depth, ceil(factor x concurrency x workers seen))."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from taskyard_broker_agent.lanes import Lanes
from taskyard_broker_agent.settings import LaneSettings
from taskyard_common.catalog import Catalog


def lanes(catalog: Catalog, **settings: Any) -> Lanes:
    return Lanes(SimpleNamespace(catalog=catalog), LaneSettings(**settings))  # type: ignore[arg-type]


def test_a_lane_holds_one_fleets_worth_of_slots(catalog: Catalog):
    name = catalog.names[0]
    concurrency = catalog.get(name).concurrency
    rule = lanes(catalog)
    assert rule.depth(name) == max(4, concurrency)  # no workers seen yet: one
    rule.saw_workers({name: 3})
    assert rule.depth(name) == max(4, 3 * concurrency)
    rule.saw_workers({})  # a round that could not count them keeps the last count
    assert rule.depth(name) == max(4, 3 * concurrency)
    assert lanes(catalog, factor=0.5, min_depth=1).depth(name) == max(1, -(-concurrency // 2))
    assert lanes(catalog, factor=0.001, min_depth=7).depth(name) == 7
    assert set(rule.depths()) == set(catalog.names)


def test_no_lanes_when_off_or_for_a_specialist_outside_the_catalog(catalog: Catalog):
    assert lanes(catalog, enabled=False).depth(catalog.names[0]) is None
    # The feeder still releases what refused starts parked.
    assert set(lanes(catalog, enabled=False).depths()) == set(catalog.names)
    assert lanes(catalog).depth("not-in-the-catalog") is None
