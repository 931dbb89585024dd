"""The chart README's values table, generated from the `# --` comments of values.yaml.

`uv run python -m tests.deploy.values_table` rewrites the table (the README's last section);
tests/deploy/test_values_table.py fails when it is stale.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import yaml

CHART = Path(__file__).resolve().parents[2] / "deploy" / "helm" / "taskyard"
VALUES = CHART / "values.yaml"
README = CHART / "README.md"
HEADER = "| key | default | description |\n| --- | --- | --- |\n"

_DOC = re.compile(r"^\s*# -- (.*)$")
_MORE = re.compile(r"^\s*#\s?(.*)$")
_KEY = re.compile(r"^(\s*)([A-Za-z0-9_]+):")


def _flow(value: Any) -> str:
    if value == "":
        return "''"
    text = yaml.safe_dump(value, default_flow_style=True, width=10**6, sort_keys=True).strip()
    return text.removesuffix("...").strip()


def rows(text: str) -> list[tuple[str, Any, str]]:
    """(dotted key, default, description) of every key with a `# --` comment, in file order."""
    data = yaml.safe_load(text)
    path: list[tuple[int, str]] = []
    doc: list[str] | None = None
    out = []
    for line in text.splitlines():
        if m := _DOC.match(line):
            doc = [m.group(1)]
        elif doc is not None and (m := _MORE.match(line)):
            doc.append(m.group(1).strip())
        elif m := _KEY.match(line):
            indent = len(m.group(1))
            while path and path[-1][0] >= indent:
                path.pop()
            path.append((indent, m.group(2)))
            if doc is not None:
                node = data
                for _, key in path:
                    node = node[key]
                out.append((".".join(key for _, key in path), node, " ".join(doc)))
                doc = None
    return out


def table(text: str) -> str:
    return HEADER + "".join(f"| `{k}` | `{_flow(v)}` | {d} |\n" for k, v, d in rows(text))


def readme_with_table(readme: str, values: str) -> str:
    start = readme.index(HEADER)
    return readme[:start] + table(values)


def main() -> int:
    README.write_text(readme_with_table(README.read_text(), VALUES.read_text()))
    print(f"wrote the values table of {README.relative_to(CHART.parents[2])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
