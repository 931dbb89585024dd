from pathlib import Path

import pytest

from taskyard_common.catalog import TOOL_FIRST_SCAN_CHARS, CatalogError, load_catalog, parse_catalog

MINIMAL = """
apiVersion: taskyard.dev/v1alpha1
kind: SpecialistCatalog
fallback: general
specialists:
  - name: general
    description: anything
    instructions: be helpful
"""


def test_shipped_catalog_loads_with_at_least_four_specialists(catalog_path: Path):
    catalog = load_catalog(catalog_path)
    assert len(catalog.specialists) >= 4
    assert catalog.fallback in catalog.names
    for spec in catalog.specialists:
        assert spec.description and spec.instructions
        assert spec.concurrency >= 1 and spec.max_steps >= 1


def test_defaults_apply():
    spec = parse_catalog(MINIMAL).get("general")
    assert spec is not None
    assert spec.model is None and spec.tools == () and spec.concurrency == 16


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("specialists: [", "not valid YAML"),
        (MINIMAL.replace("fallback: general", "fallback: nobody"), "fallback"),
        (MINIMAL + "  - name: general\n    description: d\n    instructions: i\n", "duplicate"),
        (MINIMAL.replace("name: general", "name: General Purpose"), "invalid catalog"),
        (MINIMAL + "    surprise: 1\n", "invalid catalog"),
        (MINIMAL.replace("v1alpha1", "v9"), "invalid catalog"),
    ],
)
def test_bad_catalogs_are_refused_clearly(text: str, message: str):
    with pytest.raises(CatalogError, match=message):
        parse_catalog(text)


def test_missing_file_is_a_clear_error(tmp_path: Path):
    with pytest.raises(CatalogError, match="cannot read"):
        load_catalog(tmp_path / "absent.yaml")


def test_examples_are_optional_and_bounded():
    assert parse_catalog(MINIMAL).get("general").examples == ()
    with_examples = MINIMAL + '    examples: ["What is 2 + 2?", "Erkläre das"]\n'
    assert parse_catalog(with_examples).get("general").examples == ("What is 2 + 2?", "Erkläre das")
    for bad in ('[""]', f'["{"x" * 501}"]'):
        with pytest.raises(CatalogError, match="invalid catalog"):
            parse_catalog(MINIMAL + f"    examples: {bad}\n")


def test_a_tool_first_pattern_reads_the_start_of_the_input_case_insensitively():
    text = MINIMAL + "    tools: [calculator]\n    require_tool_first_when: ['\\d\\s+times\\s+\\d']\n"
    spec = parse_catalog(text).get("general")
    assert spec.tool_first_for("What is 7 TIMES 8?")
    assert not spec.tool_first_for("Write a poem")
    # Only the first TOOL_FIRST_SCAN_CHARS: a pattern's cost does not grow with a 256 KiB input.
    assert not spec.tool_first_for("x" * TOOL_FIRST_SCAN_CHARS + " 7 times 8")
    always = parse_catalog(MINIMAL + "    tools: [calculator]\n    require_tool_first: true\n").get("general")
    assert always.tool_first_for("Write a poem") and not parse_catalog(MINIMAL).get("general").tool_first_for(
        "1 times 2"
    )


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ("    require_tool_first_when: ['x']\n", "needs at least one tool"),
        ("    tools: [calculator]\n    require_tool_first_when: ['(unclosed']\n", "not a regular expression"),
        (
            "    tools: [calculator]\n    require_tool_first: true\n    require_tool_first_when: ['x']\n",
            "exclude",
        ),
    ],
)
def test_bad_tool_first_settings_are_refused(fields: str, message: str):
    with pytest.raises(CatalogError, match=message):
        parse_catalog(MINIMAL + fields)


def test_the_shipped_general_specialist_computes_with_its_calculator_first(catalog_path: Path):
    general = load_catalog(catalog_path).get("general")
    for text in (
        "What is 12 * (3 + 4)?",
        "Compute 4821 - 1379.",
        "Wie viel ist 48 mal 27 plus 310?",
        "What is the square root of 1,369?",
        "What is 17.5% of 2,340?",
        "¿Cuánto es el 15 % de 380?",
        "Сколько будет 731 умножить на 12?",
    ):
        assert general.tool_first_for(text), text
    for text in (
        "Why is the sky blue?",
        "Write a birthday message for Sam, 30 today.",
        "Extract the invoice number and total as JSON: 'INV-2026-0412, total due 1,749.00 EUR'",
    ):
        assert not general.tool_first_for(text), text
