"""The labelled routing set (``cases.yaml``): loading, the fixed dev / held-out split, the slices."""

from __future__ import annotations

import hashlib
import random
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from taskyard_common.catalog import Catalog, load_catalog
from taskyard_common.messages import TaskInput

CASES_PATH = Path(__file__).with_name("cases.yaml")
# The second set: its own catalog (descriptions and keywords only, no examples), held out of any tuning.
HELDOUT_DIR = Path(__file__).with_name("heldout")
# The third set: another catalog without examples, for tuning what routing does with such catalogs (a third
# of it held out by id, as in the shipped set), so that the second set stays out of it.
TUNING_DIR = Path(__file__).with_name("tuning")
SLICES = ("clean", "multilingual", "distractor", "injection", "typo", "json", "nofit")
# The slices where wording, not the task, makes routing hard.
HARD_SLICES = frozenset({"multilingual", "distractor", "injection", "typo"})
DEV, HELD_OUT = "dev", "held-out"


@dataclass(frozen=True)
class Case:
    id: str
    input: TaskInput
    label: str
    slices: tuple[str, ...]
    # The specialist an injection case's directive tries to choose (never the label).
    injected: str | None = None
    # A case of a set kept out of all tuning (heldout/): held out whatever its id.
    held_out_set: bool = False

    @property
    def hard(self) -> bool:
        return bool(HARD_SLICES.intersection(self.slices))

    @property
    def split(self) -> str:
        """A third of the cases, fixed by a hash of the id, is held out: nothing is tuned on it (and every case
        of the held-out set)."""
        return HELD_OUT if self.held_out_set or hashlib.sha256(self.id.encode()).digest()[0] % 3 == 0 else DEV


@dataclass(frozen=True)
class EvalSet:
    """A labelled set and the catalog its labels name."""

    name: str
    catalog: Path
    cases: Path
    held_out: bool = False


def eval_sets(shipped_catalog: Path = Path("specialists.yaml")) -> dict[str, EvalSet]:
    """The labelled sets: the shipped catalog's (``cases.yaml``), the held-out one (``heldout/``) and the
    tuning one (``tuning/``)."""
    return {
        "shipped": EvalSet("shipped", shipped_catalog, CASES_PATH),
        "heldout": EvalSet(
            "heldout", HELDOUT_DIR / "catalog.yaml", HELDOUT_DIR / "cases.yaml", held_out=True
        ),
        "tuning": EvalSet("tuning", TUNING_DIR / "catalog.yaml", TUNING_DIR / "cases.yaml"),
    }


def load_cases(catalog: Catalog, path: Path = CASES_PATH, *, held_out: bool = False) -> list[Case]:
    """The cases, checked against the catalog: a label or injection target outside it is a broken case."""
    cases = []
    seen: set[str] = set()
    for raw in yaml.safe_load(path.read_text(encoding="utf-8")):
        case = Case(
            id=raw["id"],
            input=raw["input"],
            label=raw["label"],
            slices=tuple(raw["slices"]),
            injected=raw.get("injected"),
            held_out_set=held_out,
        )
        problems = [
            case.id in seen and "duplicate id",
            catalog.get(case.label) is None and f"label {case.label!r} is not in the catalog",
            not set(case.slices) <= set(SLICES) and f"unknown slice in {case.slices}",
            ("injection" in case.slices) != (case.injected is not None) and "injection needs `injected`",
            case.injected is not None and catalog.get(case.injected) is None and "injected not in catalog",
            case.injected == case.label and "injected equals the label",
        ]
        if any(problems):
            raise ValueError(f"{path}: case {case.id}: {', '.join(p for p in problems if p)}")
        seen.add(case.id)
        cases.append(case)
    return cases


def sample(cases: list[Case], per_slice: int, injection: int = 10) -> list[Case]:
    """The first ``per_slice`` cases of each slice in file order (``injection`` of the injection slice, so
    "followed at most 1 in 10" can be measured), in file order: a fixed subset for slow endpoints."""
    taken: dict[str, int] = {}
    chosen = []
    for case in cases:
        slice_ = case.slices[0]
        limit = injection if slice_ == "injection" else per_slice
        if taken.get(slice_, 0) < limit:
            taken[slice_] = taken.get(slice_, 0) + 1
            chosen.append(case)
    return chosen


_LONG_WORD = re.compile(r"[^\W\d_]{6,}")


def misspelt(cases: list[Case], seed: int, rate: float = 1 / 3) -> list[Case]:
    """The cases with typing slips: in each word of six letters or more, with probability ``rate``, two
    adjacent inner letters swapped (the first and last stay). Seeded per case id, so a run is repeatable and
    a case's slips do not depend on which other cases were chosen. A stress test of typo tolerance on the
    same labels: a slip changes no task."""

    def slip(rng: random.Random, text: str) -> str:
        def swap(match: re.Match[str]) -> str:
            word = match.group(0)
            if rng.random() >= rate:
                return word
            i = rng.randrange(1, len(word) - 2)
            return word[:i] + word[i + 1] + word[i] + word[i + 2 :]

        return _LONG_WORD.sub(swap, text)

    def slipped(rng: random.Random, value: Any) -> Any:
        if isinstance(value, str):
            return slip(rng, value)
        if isinstance(value, dict):
            return {key: slipped(rng, item) for key, item in value.items()}
        if isinstance(value, list):
            return [slipped(rng, item) for item in value]
        return value

    return [replace(c, input=slipped(random.Random(f"{seed}:{c.id}"), c.input)) for c in cases]


def without_examples(catalog: Catalog) -> Catalog:
    """The catalog as users often write it: descriptions and keywords, no example requests."""
    specialists = tuple(s.model_copy(update={"examples": ()}) for s in catalog.specialists)
    return catalog.model_copy(update={"specialists": specialists})


def load_set(eval_set: EvalSet, *, no_examples: bool, split: str) -> tuple[Catalog, list[Case]]:
    """One set's catalog (without its ``examples`` when asked) and its cases of ``split`` ("all": every
    one): what both the evaluation and the evidence floor's calibration read."""
    catalog = load_catalog(eval_set.catalog)
    if no_examples:
        catalog = without_examples(catalog)
    cases = load_cases(catalog, eval_set.cases, held_out=eval_set.held_out)
    return catalog, [c for c in cases if split == "all" or c.split == split]
