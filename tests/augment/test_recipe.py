"""Recipes: YAML validated by the shipped schema and every rule's parameter schema."""

from __future__ import annotations

import pytest

from hsa.augment import FAMILIES, all_rules, default_recipe, get_rule, load_recipe, loads_recipe
from hsa.augment.recipe import Recipe, RecipeRule, recipe_schema
from hsa.errors import RuleError

GOOD = """
seed: 3
variants_per_harness: 4
variants_per_trajectory: 2
rules:
  - rule: tools.rename
    probability: 0.5
    params: {style: kebab}
  - rule: prompt.heading_style
"""


def test_good_recipe_round_trips():
    recipe = loads_recipe(GOOD)
    assert recipe.seed == 3 and recipe.rules[0].params == {"style": "kebab"}
    assert recipe.rules[1].probability == 1.0
    assert loads_recipe(recipe.to_yaml()) == recipe


@pytest.mark.parametrize(
    ("text", "where", "message"),
    [
        ("rules: [{rule: tools.rename, probability: 2}]", "$.rules[0].probability", "2"),
        ("rules: [{rule: tools.nope}]", "$.rules[0]", "no rule named 'tools.nope'"),
        ("rules: [{rule: tools.rename, params: {style: shouty}}]", "params.style", "shouty"),
        (
            "rules: []\nvariants_per_harness: 1\nvariants_per_trajectory: 2",
            "$.variants_per",
            "exceeds",
        ),
        ("rules: [{rule: tools.rename}]\nmin_rules: 2", "$.min_rules", "exceeds the 1 rule"),
        ("rules: []\nextra: 1", "$", "extra"),
        # a misspelt required key is named, with its nearest key, not reported missing
        ("rulez: []", "$.rulez", "unknown setting 'rulez'; did you mean 'rules'?"),
        ("rules: [{rul: tools.rename}]", "$.rules[0].rul", "did you mean 'rule'?"),
        ("source: {env: livestream}", "$", "this is a build config, not a recipe"),
        ("rules: [", "line", "invalid YAML"),
    ],
)
def test_bad_recipes_name_the_place(text, where, message):
    with pytest.raises(RuleError) as info:
        loads_recipe(text, file="r.yaml")
    text_of = str(info.value)
    assert text_of.startswith("r.yaml: ") and where in text_of and message in text_of


def test_min_rules_counts_only_the_rules_a_draw_can_reach():
    # a rule of probability 0 is never drawn, not even to make up min_rules: a recipe counting
    # it planned variants of fewer rules than min_rules, silently
    zero, one = RecipeRule("tools.rename", 0.0), RecipeRule("tools.shuffle", 1.0)
    with pytest.raises(RuleError, match=r"exceeds the 1 rule\(s\).*1 more of probability 0"):
        Recipe(rules=(zero, one), variants_per_harness=2, min_rules=2)
    with pytest.raises(RuleError, match="exceeds the 0 rule") as caught:
        loads_recipe("rules: [{rule: tools.rename, probability: 0}]", file="r.yaml")
    assert caught.value.where == "$.min_rules"
    assert Recipe(rules=(zero, one), min_rules=1).min_rules == 1
    assert Recipe(rules=(zero,), min_rules=0).rules == (zero,)


@pytest.mark.parametrize("params", [[1], "style", None])
@pytest.mark.parametrize("key", ["rules", "base"])
def test_params_that_are_not_a_mapping_are_one_error_at_their_path(key, params):
    # (a TypeError or ValueError of dict(params) before)
    item = RecipeRule("tools.rename", 1.0, params=params)
    with pytest.raises(RuleError, match="is not of type 'object'") as caught:
        Recipe(**{"rules": (), key: (item,)})
    assert caught.value.where == f"$.{key}[0].params"


def test_load_recipe_from_file(tmp_path):
    path = tmp_path / "recipe.yaml"
    path.write_text(GOOD)
    assert load_recipe(path).variants_per_harness == 4
    with pytest.raises(RuleError, match=r"missing\.yaml: cannot read"):
        load_recipe(tmp_path / "missing.yaml")
    latin = tmp_path / "latin.yaml"
    latin.write_bytes("seed: 1  # café\n".encode("latin-1"))
    with pytest.raises(RuleError, match=r"latin.yaml: not UTF-8 text \(byte 14"):
        load_recipe(latin)


def test_default_recipe_enables_every_family_and_only_known_rules():
    recipe = default_recipe()
    families = {get_rule(r.rule).family for r in recipe.rules}
    builtin = {r.family for r in all_rules()} & set(FAMILIES)
    assert families == builtin
    assert recipe_schema()["$schema"].endswith("2020-12/schema")


def test_the_schema_states_the_defaults_a_recipe_reads():
    # a recipe without min_rules draws at least one rule: the schema says so, and that
    # min_rules counts draws, not the rules a variant applies
    schema = recipe_schema()["properties"]
    plain = loads_recipe("rules: [{rule: tools.rename}]")
    assert schema["min_rules"]["default"] == plain.min_rules == 1
    assert schema["max_rules"]["default"] is plain.max_rules is None
    rule = schema["rules"]["items"]["properties"]["probability"]
    assert rule["default"] == plain.rules[0].probability == 1.0
    assert "draws at least" in schema["min_rules"]["description"]


def test_a_recipe_made_in_code_names_rules_that_exist_with_finite_numbers():
    from hsa.augment.recipe import Recipe, RecipeRule

    for item, words in [
        (RecipeRule("tools.nope"), "no rule named 'tools.nope'"),
        (RecipeRule("tools.rename", float("nan")), "NaN or Infinity"),
        (RecipeRule("tools.rename", 1.0, {"fraction": float("nan")}), "NaN or Infinity"),
    ]:
        with pytest.raises(RuleError, match=words) as caught:
            Recipe(rules=(item,))
        assert caught.value.where.startswith("$.rules[0]")
    # and its counts across fields, as a file's are
    two = (RecipeRule("tools.rename"), RecipeRule("tools.shuffle"))
    for changes, where in [
        ({"rules": two[:1], "min_rules": 3}, "$.min_rules"),
        ({"rules": two, "min_rules": 2, "max_rules": 1}, "$.max_rules"),
        ({"rules": two, "variants_per_trajectory": 5}, "$.variants_per_trajectory"),
    ]:
        with pytest.raises(RuleError) as caught:
            Recipe(**changes)
        assert caught.value.where == where
    assert hash(Recipe(rules=(RecipeRule("tools.rename"),))) == hash(
        Recipe(rules=(RecipeRule("tools.rename"),))
    )


@pytest.mark.parametrize(
    ("text", "where", "name"),
    [
        ("{rule: tools.add_optional, params: {names: [id, from]}}", "params.names[1]", "from"),
        ("{rule: tools.wrap_args, params: {wrapper: class}}", "params.wrapper", "class"),
    ],
)
def test_a_parameter_name_a_recipe_gives_is_refused_when_a_python_keyword(text, where, name):
    # the rule would bring a parameter a call written as Python cannot pass, and fail the
    # harness check of hsa rules check: refused where the recipe says it
    with pytest.raises(RuleError) as info:
        loads_recipe(f"rules: [{text}]", file="r.yaml")
    assert str(info.value) == (
        f"r.yaml: $.rules[0]: rule '{text.split(',')[0][7:]}': {where}: {name!r} is a Python "
        "keyword, which a call written as Python cannot pass"
    )


def test_a_soft_keyword_is_a_parameter_name_a_recipe_may_give():
    loads_recipe("rules: [{rule: tools.add_optional, params: {names: [match, type, case, _]}}]")
    loads_recipe("rules: [{rule: tools.wrap_args, params: {wrapper: match}}]")
