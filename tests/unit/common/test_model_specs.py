import pytest

from taskyard_common.catalog import CatalogError, parse_catalog
from taskyard_common.llm import settings_for
from taskyard_common.model_specs import ModelSpec, fallback_chain, find_cycle, price
from taskyard_common.settings import LlmSettings

BASE = """
fallback: general
specialists:
  - name: general
    description: anything
    instructions: be helpful
    model: big
"""


def _catalog(models: str):
    return parse_catalog(BASE + "models:\n" + models)


def test_entries_load_with_every_setting():
    catalog = _catalog(
        "  - name: big\n    base_url: http://127.0.0.1:9/v1/\n    rpm: 60\n    tpm: 1000\n"
        "    max_concurrent: 4\n    input_price_per_mtok: 2.5\n    output_price_per_mtok: 10\n"
        "    fallbacks: [small]\n"
        "  - name: small\n"
    )
    big = catalog.model("big")
    assert big is not None and big.rpm == 60 and big.fallbacks == ("small",)
    assert big.endpoint == "http://127.0.0.1:9/v1"
    assert catalog.model("small") == ModelSpec(name="small")
    assert catalog.model("gpt-unknown") is None


def test_a_catalog_without_models_keeps_every_name_as_is():
    catalog = parse_catalog(BASE)
    assert catalog.models == () and catalog.model("big") is None
    settings = LlmSettings(base_url="http://configured/v1")
    assert settings_for(settings, None) is settings


def test_an_entry_base_url_replaces_the_configured_endpoint_only():
    settings = LlmSettings(base_url="http://configured/v1", model="big", api_key="k")
    moved = settings_for(settings, ModelSpec(name="big", base_url="http://other:8000/v1"))
    assert moved.base_url == "http://other:8000/v1" and moved.api_key == settings.api_key
    assert settings_for(settings, ModelSpec(name="big")) is settings


@pytest.mark.parametrize(
    ("models", "message"),
    [
        ("  - name: a\n  - name: a\n", "duplicate model names"),
        ("  - name: a\n    fallbacks: [nobody]\n", "not in models"),
        ("  - name: a\n    fallbacks: [a]\n", "itself"),
        (
            "  - name: a\n    fallbacks: [b]\n  - name: b\n    fallbacks: [c]\n  - name: c\n    fallbacks: [a]\n",
            "cycle: a -> b -> c -> a",
        ),
        ("  - name: a\n    rpm: 0\n", "invalid catalog"),
        ("  - name: a\n    input_price_per_mtok: -1\n", "invalid catalog"),
        ("  - name: a\n    base_url: not a url\n", "invalid catalog"),
        ("  - name: a\n    surprise: 1\n", "invalid catalog"),
    ],
)
def test_bad_model_entries_are_refused_on_load(models: str, message: str):
    with pytest.raises(CatalogError, match=message):
        _catalog(models)


def test_price_is_per_million_tokens_in_and_out():
    spec = ModelSpec(name="m", input_price_per_mtok=2.0, output_price_per_mtok=8.0)
    assert price(spec, 1_000_000, 0) == pytest.approx(2.0)
    assert spec.cost(500, 250) == pytest.approx((500 * 2.0 + 250 * 8.0) / 1_000_000)
    assert price(ModelSpec(name="free"), 10_000, 10_000) == 0.0
    assert price(None, 10_000, 10_000) == 0.0


def test_fallback_chain_is_breadth_first_without_repeats():
    specs = {
        "a": ModelSpec(name="a", fallbacks=("b", "c")),
        "b": ModelSpec(name="b", fallbacks=("c",)),
        "c": ModelSpec(name="c"),
    }
    assert fallback_chain(specs, "a") == ["a", "b", "c"]
    assert fallback_chain(specs, "unlisted") == ["unlisted"]


def test_find_cycle_sees_none_in_a_diamond():
    assert find_cycle({"a": ["b", "c"], "b": ["d"], "c": ["d"], "d": []}) is None
