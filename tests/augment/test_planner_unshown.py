"""The planner leaves out of a variant the rules whose changes no row under it can show."""

from __future__ import annotations

import pytest

from hsa.augment import Recipe, RecipeRule, apply_chain, get_rule, plan
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
    import dataclasses

    from hsa.augment import Rewrite, registry

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
    import dataclasses

    from hsa.augment import Rewrite, registry

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
