"""Catalog files like specialists.yaml (same names, so the same queues) with one specialist's fields
overridden (and ``models`` entries), for a worker started with ``TASKYARD_CATALOG_PATH`` pointing at it."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import yaml

from taskyard_common.catalog import Catalog
from taskyard_common.model_specs import ModelSpec


def write_catalog(
    catalog: Catalog,
    folder: Path,
    specialist: str = "general",
    models: tuple[ModelSpec, ...] = (),
    **fields: Any,
) -> Path:
    specialists = [
        spec.model_copy(update=fields) if spec.name == specialist else spec for spec in catalog.specialists
    ]
    changed = Catalog(fallback=catalog.fallback, specialists=tuple(specialists), models=models)
    # Validated again: model_copy does not, and a typo in an override must fail here.
    document = Catalog.model_validate(changed.model_dump(mode="json", by_alias=True))
    path = folder / f"catalog-{uuid.uuid4().hex[:6]}.yaml"
    path.write_text(yaml.safe_dump(document.model_dump(mode="json", by_alias=True)), encoding="utf-8")
    return path
