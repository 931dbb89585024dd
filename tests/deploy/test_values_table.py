"""The chart README's values table is the one values.yaml's `# --` comments generate."""

from __future__ import annotations

import pytest
import yaml

from tests.deploy.values_table import README, VALUES, readme_with_table, rows

pytestmark = pytest.mark.deploy


def test_readme_values_table_is_generated_from_values_yaml():
    readme = README.read_text()
    assert readme == readme_with_table(readme, VALUES.read_text()), (
        "the chart README's values table is stale: run `uv run python -m tests.deploy.values_table`"
    )


def test_every_leaf_value_is_documented():
    documented = {key for key, _, _ in rows(VALUES.read_text())}

    def leaves(node, prefix=""):
        for key, value in node.items():
            path = f"{prefix}{key}"
            if path in documented:
                continue
            assert isinstance(value, dict) and value, f"{path} has no `# --` comment"
            yield from leaves(value, f"{path}.")

    list(leaves(yaml.safe_load(VALUES.read_text())))
