"""The planner leaves out of a variant the rules whose changes no row under it can show."""

from __future__ import annotations

import dataclasses

import pytest

from hsa.augment import Recipe, RecipeRule, Rewrite, apply_chain, get_rule, plan
from hsa.augment.mapping import RewriteMapping, Step, ToolMap
from hsa.augment.rule import Context
from hsa.harness.model import Prompt, Section
from hsa.harness.prompt import surface_tools, system_prompt


def _recipe(*rules: tuple[str, dict]) -> Recipe:
    return Recipe(
        tuple(RecipeRule(name, 1.0, params) for name, params in rules), variants_per_harness=4
    )


def _names(variant) -> list[str]:
    return [name for name, _, _ in variant.rules]


def _shown(harness) -> tuple:
    return system_prompt(harness), [t.to_function() for t in surface_tools(harness)]


@pytest.fixture
def chat(harness):
    """An imported chat log's harness: an untitled system message, tools, no skills shown."""
    sections = (
        Section("system", "", "You are a support agent for Acme.", "persona", verbatim=True),
        Section("tools", "Tools", "", "tools"),
        Section("output_format", "Output format", "", "output_format"),
    )
    return harness.replace(skills=(), skill_tool=None, hooks=(), prompt=Prompt(sections))


def test_skills_a_harness_neither_lists_nor_loads_are_no_rewrite_of_it(chat):
    # no skill tool, no skills section: distractor skills (shuffled after) show in no row
    recipe = _recipe(
        ("skill_content.distractors", {}), ("skill_content.shuffle", {}), ("tools.rename", {})
    )
    for variant in plan(chat, recipe, seed=0):
        assert _names(variant) == ["tools.rename"]
        assert variant.harness.skills == ()
    # the rule itself still adds them (``apply_chain``, as previews and checks apply it)
    rewrite, applied = apply_chain(chat, [(get_rule("skill_content.distractors"), {})], seed=0)
    assert rewrite.harness.skills and [a[0] for a in applied] == ["skill_content.distractors"]


def test_skills_a_skill_tool_loads_or_the_prompt_lists_are_rewritten(harness, chat):
    recipe = _recipe(("skill_content.distractors", {}), ("tools.rename", {}))
    catalogue = Section("skills", "Skills", "", "skills")
    listed = chat.replace(prompt=Prompt((*chat.prompt.sections, catalogue)))
    loaded = chat.replace(skill_tool=harness.skill_tool)
    for shown in (harness, listed, loaded):
        for variant in plan(shown, recipe, seed=0):
            assert _names(variant) == ["skill_content.distractors", "tools.rename"]


def test_titles_of_sections_that_render_empty_are_no_rewrite(chat):
    # under api the Tools and Output format sections render empty, titles and all
    recipe = _recipe(("prompt.section_titles", {}), ("tools.rename", {}))
    for variant in plan(chat, recipe, seed=0):
        assert _names(variant) == ["tools.rename"]
        assert variant.harness.prompt.sections == chat.prompt.sections


def test_titles_a_later_rule_shows_or_hides_are_judged_as_the_variant_shows_them(chat):
    # a text protocol drawn after the retitling fills those sections: their titles show
    shown = _recipe(("prompt.section_titles", {}), ("protocol.switch", {"target": "text"}))
    for variant in plan(chat, shown, seed=0):
        assert _names(variant) == ["prompt.section_titles", "protocol.switch"]
    # XML headings drawn after it print section ids: the new titles never show
    policy = Section("policy", "Policy", "Refunds need a receipt.", "policy")
    titled = chat.replace(prompt=Prompt((*chat.prompt.sections, policy)))
    hidden = _recipe(("prompt.section_titles", {}), ("prompt.heading_style", {"style": "xml"}))
    for variant in plan(titled, hidden, seed=0):
        assert _names(variant) == ["prompt.heading_style"]
        assert [s.title for s in variant.harness.prompt.sections] == [
            s.title for s in titled.prompt.sections
        ]
    plain = _recipe(("prompt.section_titles", {}), ("prompt.heading_style", {"style": "plain"}))
    for variant in plan(titled, plain, seed=0):
        assert _names(variant) == ["prompt.section_titles", "prompt.heading_style"]


def test_heading_styles_alike_where_no_shown_section_has_a_title_are_no_rewrite(chat):
    # Markdown and plain headings of an untitled system message print the same text
    recipe = _recipe(("prompt.heading_style", {"style": "plain"}), ("tools.rename", {}))
    for variant in plan(chat, recipe, seed=0):
        assert _names(variant) == ["tools.rename"]
    xml = _recipe(("prompt.heading_style", {"style": "xml"}), ("tools.rename", {}))
    for variant in plan(chat, xml, seed=0):
        assert _names(variant) == ["prompt.heading_style", "tools.rename"]


def test_a_draw_whose_rules_show_nothing_is_drawn_again(chat):
    recipe = Recipe(
        (
            RecipeRule("skill_content.distractors", 0.9),
            RecipeRule("prompt.section_titles", 0.9),
            RecipeRule("tools.rename", 0.2),
        ),
        variants_per_harness=6,
        min_rules=1,
    )
    for variant in plan(chat, recipe, seed=1):
        assert _names(variant) in ([], ["tools.rename"])
        if variant.rules:  # what is listed shows
            assert _shown(variant.harness) != _shown(chat)
        else:  # the last of the draws, kept as the harness unchanged
            assert variant.harness == chat
    assert any(v.rules for v in plan(chat, recipe, seed=1))


def test_skill_rules_no_variant_can_show_are_not_drawn(chat):
    # as a rule whose needs the context lacks (tools.drop_unused, planned without a context):
    # its draw made, but not kept, topped up to min_rules or counted by max_rules
    def recipe(skills: str, ids: str) -> Recipe:
        names = [skills, "tools.rename", "tools.shuffle", ids, "tools.reorder_properties"]
        rules = tuple(RecipeRule(name, 0.3) for name in names)
        return Recipe(rules, variants_per_harness=16, min_rules=2, max_rules=2)

    planned = plan(chat, recipe("skill_content.distractors", "skill_ids.rename"), seed=3)
    ineligible = plan(chat, recipe("tools.drop_unused", "tools.drop_unused"), seed=3)
    assert [v.variant_id for v in planned] == [v.variant_id for v in ineligible]
    assert all(len(v.rules) == 2 for v in planned)  # no draw's rule left out as unshown


def test_skill_rules_are_drawn_where_a_rule_of_ones_own_may_show_skills(chat, monkeypatch):
    from hsa.augment import registry

    monkeypatch.setattr(registry, "_RULES", dict(registry._RULES))

    @registry.rule("tests.catalogue", version="1")
    def catalogue(h, rng, params, context):
        """List the skills (a skills section) after the rules before it."""
        listed = Section("skills", "Skills", "", "skills")
        return Rewrite(h.replace(prompt=dataclasses.replace(h.prompt, sections=(listed,))))

    recipe = _recipe(("skill_content.distractors", {}), ("tests.catalogue", {}))
    for variant in plan(chat, recipe, seed=0):
        assert _names(variant) == ["skill_content.distractors", "tests.catalogue"]


def test_a_rule_that_deletes_a_section_is_a_rewrite(chat, monkeypatch):
    # QA's mut.drop_policy: the section is not in the variant's prompt, so a view of the
    # sections it renders saw no change, and planning left the rule out
    from hsa.augment import registry

    monkeypatch.setattr(registry, "_RULES", dict(registry._RULES))

    @registry.rule("tests.drop_policy", version="1")
    def drop_policy(h, rng, params, context):
        """Delete the policy section."""
        kept = tuple(s for s in h.prompt.sections if s.kind != "policy")
        return Rewrite(h.replace(prompt=dataclasses.replace(h.prompt, sections=kept)))

    @registry.rule("tests.drop_tools", version="1")
    def drop_tools(h, rng, params, context):
        """Delete the tools section."""
        kept = tuple(s for s in h.prompt.sections if s.kind != "tools")
        return Rewrite(h.replace(prompt=dataclasses.replace(h.prompt, sections=kept)))

    policy = Section("policy", "Policy", "Refunds need a receipt.", "policy")
    titled = chat.replace(prompt=Prompt((*chat.prompt.sections, policy)))
    for variant in plan(titled, _recipe(("tests.drop_policy", {}), ("tools.rename", {})), seed=0):
        assert _names(variant) == ["tests.drop_policy", "tools.rename"]
        assert "Refunds" not in system_prompt(variant.harness)
    # a section that renders nothing (Tools, under api) deleted is still no rewrite
    tools = Section("tools", "Tools", "", "tools")
    bare = chat.replace(prompt=Prompt((chat.prompt.sections[0], tools)))
    for variant in plan(bare, _recipe(("tests.drop_tools", {}), ("tools.rename", {})), seed=0):
        assert _names(variant) == ["tools.rename"]


@pytest.fixture
def two_tools(chat):
    """``chat`` with a tool its trajectory calls (get_order) and one it never calls."""
    kept = tuple(t for t in chat.tools if t.name in ("get_order", "cancel_order"))
    return chat.replace(tools=kept)


#: a trajectory that calls get_order alone
CALLS_GET_ORDER = Context(used_tools=frozenset({"get_order"}))


def _note(h, names) -> Rewrite:
    """``h`` with an optional ``client_note`` parameter added to the tools ``names``, recorded
    as ``tools.add_optional`` records it (an "add" step)."""
    tools, mapped = [], {}
    for tool in h.tools:
        if tool.name in names:
            properties = {
                **tool.parameters.get("properties", {}),
                "client_note": {"type": "string"},
            }
            tool = dataclasses.replace(
                tool, parameters={**tool.parameters, "properties": properties}
            )
            mapped[tool.name] = ToolMap(tool.name, (Step("add", ("client_note",)),))
        tools.append(tool)
    return Rewrite(h.replace(tools=tuple(tools)), RewriteMapping(tools=mapped))


@pytest.fixture
def note_rules(monkeypatch):
    """Rules that add a parameter to the tools the trajectory never calls, or to all."""
    from hsa.augment import registry

    monkeypatch.setattr(registry, "_RULES", dict(registry._RULES))

    @registry.rule("tests.note_unused", version="1", needs=("used_tools",))
    def note_unused(h, rng, params, context):
        """Add a client_note parameter to the tools the trajectory never calls."""
        return _note(h, {t.name for t in h.tools} - context.used_tools)

    @registry.rule("tests.note_all", version="1")
    def note_all(h, rng, params, context):
        """Add a client_note parameter to every tool."""
        return _note(h, {t.name for t in h.tools})


def test_a_change_only_to_tools_a_later_rule_drops_is_no_rewrite(two_tools, note_rules):
    # the parameter goes to cancel_order, which drop_unused then drops: no row shows it
    recipe = _recipe(("tests.note_unused", {}), ("tools.drop_unused", {"keep": 0}))
    for variant in plan(two_tools, recipe, seed=0, context=CALLS_GET_ORDER):
        assert _names(variant) == ["tools.drop_unused"]
        assert [t.name for t in variant.harness.tools] == ["get_order"]
        assert variant.mapping.tools == {}
    # where the tool stays (keep: 1), the change shows
    kept = _recipe(("tests.note_unused", {}), ("tools.drop_unused", {"keep": 1}))
    for variant in plan(two_tools, kept, seed=0, context=CALLS_GET_ORDER):
        assert _names(variant) == ["tests.note_unused"]  # drop_unused found nothing to drop
    # and a change to the tool the trajectory calls shows, the dropped tool's aside
    noted = _recipe(("tests.note_all", {}), ("tools.drop_unused", {"keep": 0}))
    for variant in plan(two_tools, noted, seed=0, context=CALLS_GET_ORDER):
        assert _names(variant) == ["tests.note_all", "tools.drop_unused"]
        assert "client_note" in variant.harness.tools[0].parameters["properties"]


def test_add_optional_is_named_where_a_tool_it_changed_is_kept(two_tools):
    # it adds a parameter to one of the two tools, drawn: named where that is get_order
    recipe = Recipe(
        (
            RecipeRule("tools.add_optional", 1.0, {"fraction": 0.5}),
            RecipeRule("tools.drop_unused", 1.0, {"keep": 0}),
        ),
        variants_per_harness=8,
    )
    named = set()
    for variant in plan(two_tools, recipe, seed=0, context=CALLS_GET_ORDER):
        (tool,) = variant.harness.tools
        added = set(tool.parameters["properties"]) - set(
            two_tools.tools[0].parameters["properties"]
        )
        assert ("tools.add_optional" in _names(variant)) == bool(added)
        named.add(bool(added))
    assert named == {True, False}  # both draws made


def test_a_shuffle_is_named_where_the_tools_a_variant_keeps_moved(chat):
    # a shuffle that moves only cancel_order, which drop_unused then drops, shows nothing; one
    # that swaps the two tools kept shows
    three = chat.replace(
        tools=tuple(
            t for t in chat.tools if t.name in ("get_order", "get_order_status", "cancel_order")
        )
    )
    calls_two = Context(used_tools=frozenset({"get_order", "get_order_status"}))
    recipe = _recipe(("tools.shuffle", {}), ("tools.drop_unused", {"keep": 0}))
    recipe = dataclasses.replace(recipe, variants_per_harness=8)
    named = set()
    for variant in plan(three, recipe, seed=0, context=calls_two):
        order = [t.name for t in variant.harness.tools]
        moved = order != ["get_order", "get_order_status"]
        expected = ["tools.shuffle", "tools.drop_unused"] if moved else ["tools.drop_unused"]
        assert _names(variant) == expected
        named.add(moved)
    assert named == {True, False}  # both draws made


def test_a_rename_of_a_dropped_tool_shows_in_the_kept_tools_that_name_it(chat):
    # get_order's description names return_order_items: renaming that tool rewrites it there,
    # which shows though drop_unused then drops the tool renamed
    two = chat.replace(
        tools=tuple(t for t in chat.tools if t.name in ("get_order", "return_order_items"))
    )
    assert "return_order_items" in two.tools[0].description
    recipe = Recipe(
        (
            RecipeRule("tools.rename", 1.0, {"fraction": 0.5, "style": "camel"}),
            RecipeRule("tools.drop_unused", 1.0, {"keep": 0}),
        ),
        variants_per_harness=8,
    )
    renamed = set()
    for variant in plan(two, recipe, seed=0, context=CALLS_GET_ORDER):
        assert _names(variant) == ["tools.rename", "tools.drop_unused"]
        renamed.add(variant.harness.tools[0].name)
    assert "get_order" in renamed  # return_order_items was the one renamed, in some
    # where no kept tool names it, its rename shows nothing
    unnamed = two.replace(
        tools=(dataclasses.replace(two.tools[0], description="Get an order."), two.tools[1])
    )
    kept = set()
    for variant in plan(unnamed, recipe, seed=0, context=CALLS_GET_ORDER):
        (tool,) = variant.harness.tools
        if tool.name == "get_order":  # return_order_items renamed, then dropped
            assert _names(variant) == ["tools.drop_unused"]
        else:
            assert _names(variant) == ["tools.rename", "tools.drop_unused"]
        kept.add(tool.name)
    assert kept == {"get_order", "getOrder"}  # both draws made
