"""The state machine is defined once: its sets agree with each other, the docs show its transitions."""

from pathlib import Path

from taskyard_common.lifecycle import (
    NON_TERMINAL,
    NOT_STARTED,
    ROUTABLE,
    STARTABLE,
    TERMINAL,
    TRANSITIONS,
    TRANSITIONS_BY_NAME,
    TaskStatus,
    sql_in,
    transition_table,
)
from taskyard_common.store.interface import TaskStore

ARCHITECTURE = Path(__file__).resolve().parents[3] / "docs" / "architecture.md"


def test_every_status_is_terminal_or_not():
    assert TERMINAL | NON_TERMINAL == set(TaskStatus) and not TERMINAL & NON_TERMINAL
    assert all(s.terminal for s in TERMINAL) and not any(s.terminal for s in NON_TERMINAL)
    assert ROUTABLE <= NOT_STARTED <= NON_TERMINAL and STARTABLE <= NOT_STARTED


def test_sql_lists_follow_the_enum_order():
    assert sql_in(STARTABLE) == "('queued', 'retrying')"
    assert sql_in(NON_TERMINAL) == "('scheduled', 'pending', 'queued', 'running', 'retrying', 'waiting')"


def test_every_status_is_reached_and_only_terminal_ones_end_the_line():
    reached = {target for t in TRANSITIONS for target in t.targets}
    assert reached == set(TaskStatus)
    left = set().union(*(t.sources for t in TRANSITIONS))
    assert NON_TERMINAL <= left
    # The only way out of a terminal status is a dead letter's replay.
    assert {t.name for t in TRANSITIONS if t.sources & TERMINAL} == {"replay"}


def test_every_transition_is_a_store_method():
    assert len(TRANSITIONS_BY_NAME) == len(TRANSITIONS)
    for name, transition in TRANSITIONS_BY_NAME.items():
        if transition.part_of is None:
            assert callable(getattr(TaskStore, name, None)), f"TaskStore has no {name}()"


def test_the_architecture_doc_shows_the_transitions():
    assert transition_table() in ARCHITECTURE.read_text(), "run: python -m taskyard_common.lifecycle"
