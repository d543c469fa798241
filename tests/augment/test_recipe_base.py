"""A recipe's base rules, applied to every variant before the drawn ones, and the ``keep``
parameter of the ``drop_unused`` rules that such a base uses."""

from __future__ import annotations

import pytest
from conftest import make_events, make_harness

from hsa.augment import Context, Recipe, RecipeRule, apply_chain, get_rule, loads_recipe, plan
from hsa.augment.recipe import default_recipe, overlaps
from hsa.errors import RuleError

COMPACT = """
seed: 5
variants_per_harness: 6
max_rules: 1
base:
  - rule: tools.drop_unused
    params: {keep: 1}
  - rule: tools.shuffle
rules:
  - rule: tools.rename
    probability: 0.5
  - rule: hooks.position
    probability: 0.5
"""

BASE = (
    ("tools.drop_unused", "2", {"keep": 1, "fraction": None}),
    ("tools.shuffle", "1", {}),
)
# what the conftest trajectory uses: two of the six tools are never called
USED = {"get_order", "get_order_status", "return_order_items", "search"}


def test_loads_a_recipe_with_base_rules():
    recipe = loads_recipe(COMPACT)
    assert recipe.base == (
        RecipeRule("tools.drop_unused", 1.0, {"keep": 1}),
        RecipeRule("tools.shuffle"),
    )
    assert [r.rule for r in recipe.rules] == ["tools.rename", "hooks.position"]
    assert recipe.needs == {"used_tools"}  # the base's needs count


def test_every_variant_applies_the_base_first_and_one_drawn_rule():
    variants = plan(make_harness(), loads_recipe(COMPACT), context=Context.of(make_events()))
    assert len(variants) == 6
    for variant in variants:
        assert variant.rules[:2] == BASE
        # max_rules 1 and min_rules 1 count the drawn rules only
        assert len(variant.rules) == 3
        assert variant.rules[2][0] in {"tools.rename", "hooks.position"}
    drawn = {v.rules[2][0] for v in variants}
    assert drawn == {"tools.rename", "hooks.position"}


def test_a_recipe_of_base_rules_only_applies_just_them():
    text = "variants_per_harness: 4\nbase:\n  - rule: tools.drop_unused\n    params: {keep: 1}\n"
    recipe = loads_recipe(text + "rules: []\n")
    for variant in plan(make_harness(), recipe, context=Context.of(make_events())):
        assert variant.rules == BASE[:1]
        names = {t.name for t in variant.harness.tools}
        assert names > USED and len(names) == len(USED) + 1


def test_overlaps_ignores_base_rules_both_ways():
    rename = {"rule": "tools.rename", "params": {"style": "kebab"}}
    shuffle = {"rule": "tools.shuffle"}
    held_out = Recipe.from_dict({"base": [rename], "rules": [shuffle]})
    training = Recipe.from_dict({"base": [shuffle], "rules": [rename]})
    assert overlaps(held_out, training) == []
    assert overlaps(training, held_out) == []
    # the same rules drawn on both sides do overlap
    drawn = Recipe.from_dict({"rules": [rename, shuffle]})
    assert len(overlaps(drawn, training)) == 1 and len(overlaps(held_out, drawn)) == 1


def test_to_dict_writes_the_base_and_reads_back():
    recipe = loads_recipe(COMPACT)
    data = recipe.to_dict()
    assert data["base"] == [
        {"rule": "tools.drop_unused", "params": {"keep": 1}},
        {"rule": "tools.shuffle"},
    ]
    assert Recipe.from_dict(data) == recipe
    assert loads_recipe(recipe.to_yaml()) == recipe


def test_to_dict_of_a_recipe_without_base_has_no_base_key():
    # so that recipes written before base rules existed hash as they did
    assert "base" not in default_recipe().to_dict()
    assert "base" not in Recipe((RecipeRule("tools.shuffle"),)).to_dict()


@pytest.mark.parametrize(
    "item",
    [
        "{rule: tools.nope}",
        "{rule: tools.drop_unused, params: {keep: -1}}",
        "{rule: tools.drop_unused, params: {kept: 1}}",
        "{rule: tools.shuffle, probability: 0.5}",
    ],
)
def test_base_rules_are_validated(item):
    with pytest.raises(RuleError) as info:
        loads_recipe(f"base:\n  - {item}\nrules: []\n", file="r.yaml")
    assert info.value.file == "r.yaml"
    assert info.value.where.startswith("$.base[0]")


def _kept(rule: str, params: dict, seed: int, context: Context):
    rewrite, _ = apply_chain(make_harness(), [(get_rule(rule), params)], seed=seed, context=context)
    return rewrite.harness


TOOLS = Context(used_tools=frozenset({"get_order", "search"}), used_skills=frozenset())
SKILLS = Context(used_tools=frozenset(), used_skills=frozenset({"returns-policy"}))


@pytest.mark.parametrize("keep", [0, 1, 3])
def test_drop_unused_tools_keeps_the_used_ones_and_keep_more(keep):
    everything = {t.name for t in make_harness().tools}
    seen = set()
    for seed in range(8):
        harness = _kept("tools.drop_unused", {"keep": keep}, seed, TOOLS)
        names = [t.name for t in harness.tools]
        assert len(names) == 2 + keep and set(names) >= TOOLS.used_tools
        assert harness.skill_tool == make_harness().skill_tool
        seen |= set(names) - TOOLS.used_tools
    # which unused ones stay is drawn, not always the same
    assert seen <= everything - TOOLS.used_tools
    assert len(seen) > keep if keep else seen == set()


def test_drop_unused_tools_keeps_everything_when_keep_exceeds_the_unused():
    harness = _kept("tools.drop_unused", {"keep": 10}, 0, TOOLS)
    assert harness.tools == make_harness().tools


@pytest.mark.parametrize("keep", [0, 1, 2])
def test_drop_unused_skills_keeps_the_loaded_ones_and_keep_more(keep):
    for seed in range(4):
        harness = _kept("skill_content.drop_unused", {"keep": keep}, seed, SKILLS)
        ids = [s.id for s in harness.skills]
        assert len(ids) == 1 + keep and "returns-policy" in ids
