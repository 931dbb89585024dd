"""A router told of a new catalog routes with it: the prompt's tool enum, the rules and the guard."""

from __future__ import annotations

from taskyard_broker_agent.routing.router import Router
from taskyard_common.catalog import Catalog, SpecialistSpec


async def test_use_catalog_routes_to_a_new_specialist(catalog: Catalog):
    router = Router.create(catalog, None)
    request = "Traduire ce paragraphe en allemand, bitte übersetzen"
    before = await router.route(request)
    assert before.specialist != "translator"
    translator = SpecialistSpec(
        name="translator",
        description="Translates texts into another language.",
        keywords=("traduire", "übersetzen", "allemand"),
        examples=("Traduire ce paragraphe en allemand",),
        instructions="Translate.",
    )
    router.use_catalog(Catalog(fallback=catalog.fallback, specialists=(*catalog.specialists, translator)))
    after = await router.route(request)
    assert after.specialist == "translator"
    assert "translator" in router._prompt.tool["function"]["parameters"]["properties"]["specialist"]["enum"]
