"""The catalog sources that need no server: the file (polled, SIGHUP), a Specialist resource's catalog
entry, and LiveCatalog's rules (an invalid catalog or a failing listener leaves the last valid one)."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest
import yaml

from taskyard_common.catalog import Catalog, CatalogError, catalog_wide
from taskyard_common.catalog_sources import FileSource, LiveCatalog, diff
from taskyard_common.catalog_sources.kubernetes import catalog_of
from taskyard_common.store.specialists import StoredCatalog, entry_of

pytestmark = pytest.mark.timeout(30)


def _entry(name: str, instructions: str = "Do it.") -> dict:
    return {"name": name, "description": f"The {name}.", "instructions": instructions}


def _write(path: Path, *entries: dict, fallback: str = "general") -> None:
    document = {"apiVersion": "taskyard.dev/v1alpha1", "kind": "SpecialistCatalog", "fallback": fallback,
                "specialists": list(entries)}  # fmt: skip
    staged = path.with_suffix(".tmp")
    staged.write_text(yaml.safe_dump(document), encoding="utf-8")
    os.replace(staged, path)


async def _changed(live: LiveCatalog, version: int) -> None:
    async with asyncio.timeout(10):
        await live.wait_changed(version)


async def test_the_file_is_followed_and_a_broken_one_changes_nothing(tmp_path: Path):
    path = tmp_path / "specialists.yaml"
    _write(path, _entry("general"))
    seen: list[tuple[list[str], list[str]]] = []

    async def listener(old: Catalog, new: Catalog) -> None:
        seen.append((old.names, new.names))

    async with LiveCatalog.open(FileSource(path, poll_seconds=0.02)) as live:
        live.on_change(listener)
        assert live.catalog.names == ["general"]
        _write(path, _entry("general"), _entry("translator"))
        await _changed(live, 0)
        assert live.catalog.names == ["general", "translator"]
        assert seen == [(["general"], ["general", "translator"])]

        path.write_text("specialists: [", encoding="utf-8")  # not YAML: the last valid catalog stays
        _write(path, _entry("general"), fallback="nobody")  # not a valid catalog either
        assert (await live.refresh()) is False
        assert live.catalog.names == ["general", "translator"] and live.version == 1

        _write(path, _entry("general", "Changed."), _entry("translator"))
        await _changed(live, 1)
        assert live.catalog.get("general").instructions == "Changed."


async def test_sighup_reads_the_file_at_once(tmp_path: Path):
    path = tmp_path / "specialists.yaml"
    _write(path, _entry("general"))
    # A poll far too slow to be what notices the change.
    async with LiveCatalog.open(FileSource(path, poll_seconds=600, sighup=True)) as live:
        _write(path, _entry("general"), _entry("translator"))
        os.kill(os.getpid(), signal.SIGHUP)
        await _changed(live, 0)
        assert live.catalog.names == ["general", "translator"]


async def test_a_failing_listener_keeps_the_old_catalog_and_is_tried_again(tmp_path: Path):
    path = tmp_path / "specialists.yaml"
    _write(path, _entry("general"))
    calls = 0

    async def flaky(old: Catalog, new: Catalog) -> None:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise ConnectionError("the broker is away")

    async with LiveCatalog.open(FileSource(path, poll_seconds=0.02), retry_seconds=0.02) as live:
        live.on_change(flaky)
        _write(path, _entry("general"), _entry("translator"))
        await _changed(live, 0)
        assert calls == 2 and live.catalog.names == ["general", "translator"]


async def test_a_missing_file_fails_the_start(tmp_path: Path):
    with pytest.raises(CatalogError, match="cannot read"):
        async with LiveCatalog.open(FileSource(tmp_path / "nothing.yaml")):
            pass


def test_diff():
    old = Catalog(fallback="general", specialists=(Catalog.model_validate({"fallback": "general",
                  "specialists": [_entry("general"), _entry("a")]}).specialists))  # fmt: skip
    new = Catalog.model_validate(
        {"fallback": "general", "specialists": [_entry("general", "Other."), _entry("b")]}
    )
    change = diff(old, new)
    assert (change.added, change.removed, change.changed) == (("b",), ("a",), ("general",))


def _resource(name: str, **spec: object) -> dict:
    return {"metadata": {"name": name}, "spec": {"description": "D.", "instructions": "I.", **spec}}


def test_a_specialist_resource_is_its_catalog_entry_without_scaling_and_pod():
    catalog = catalog_of(
        [
            _resource("translator", scaling={"maxReplicaCount": 3}, pod={"image": "x"}, max_steps=3),
            _resource("general"),
            {
                **_resource("going"),
                "metadata": {"name": "going", "deletionTimestamp": "2026-01-01T00:00:00Z"},
            },
            _resource("broken", max_steps=0),  # not valid: left out, the others stay
        ],
        "general",
    )
    assert catalog.names == ["general", "translator"]
    assert catalog.get("translator").max_steps == 3
    with pytest.raises(CatalogError, match="not a valid catalog"):
        catalog_of([_resource("translator")], "general")  # no fallback among them


def test_the_stored_and_the_resource_catalogs_keep_the_files_catalog_wide_fields(catalog: Catalog):
    """The database and the resources hold the specialists and the fallback; multi_route, the combiner and
    the model table are the catalog file's."""
    catalog = Catalog.model_validate(
        {
            **catalog.model_dump(mode="json", by_alias=True),
            "multi_route": True,
            "combine_specialist": catalog.names[0],
        }
    )
    entries = {spec.name: entry_of(spec) for spec in catalog.specialists}
    stored = StoredCatalog(1, catalog.fallback, entries).catalog(None, catalog_wide(catalog))
    assert stored == catalog
    resources = [
        _resource_of(spec.name, entry)
        for spec, entry in zip(catalog.specialists, entries.values(), strict=True)
    ]
    listed = catalog_of(resources, catalog.fallback, catalog_wide(catalog))
    assert sorted(listed.specialists, key=lambda s: s.name) == sorted(
        catalog.specialists, key=lambda s: s.name
    )
    assert (listed.models, listed.multi_route, listed.combine_specialist) == (
        catalog.models,
        catalog.multi_route,
        catalog.combine_specialist,
    )


def _resource_of(name: str, entry: dict) -> dict:
    return {"metadata": {"name": name}, "spec": {**entry, "scaling": {"maxReplicaCount": 2}}}
