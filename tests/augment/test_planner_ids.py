"""One variant id names one harness: whatever else was drawn and found nothing to change,
whatever the context or recipe it was planned under."""

from __future__ import annotations

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st

from hsa.augment import Context, Recipe, RecipeRule, apply_chain, get_rule, plan
from hsa.augment.planner import Variant
from hsa.harness import Protocol
from hsa.harness.model import Harness
from tests.augment.conftest import make_harness

#: rules of every family, two of them depending on the trajectory (tools.distractors adds
#: nothing where a trajectory calls no tool, tools.drop_unused nothing where it calls every
#: tool), hooks and skill rules finding nothing on a harness without hooks or skills
_RULES = (
    "tools.distractors",
    "tools.drop_unused",
    "tools.rename",
    "tools.shuffle",
    "tools.rename_params",
    "hooks.wording",
    "hooks.wrapper",
    "skill_ids.rename",
    "skill_content.distractors",
    "prompt.section_titles",
    "prompt.heading_style",
    "protocol.doc_format",
)
_TOOLS = ("get_order", "get_order_status", "get_order_history", "return_order_items")


def _harness(shape: str) -> Harness:
    harness = make_harness(Protocol("text") if shape == "text" else None)
    if shape == "bare":  # hooks and skill rules find nothing to change
        harness = harness.replace(hooks=(), skills=(), skill_tool=None)
    return harness


def _replayed(harness: Harness, variant: Variant, context: Context) -> bytes:
    """What applying the variant's own rules alone, from its seed, makes of ``harness``."""
    chain = [(get_rule(name), params) for name, _, params in variant.rules]
    rewrite, applied = apply_chain(harness, chain, seed=variant.seed, context=context)
    assert [a[0] for a in applied] == [r[0] for r in variant.rules]
    return Variant(variant.variant_id, harness.id, applied, rewrite.harness, rewrite.mapping).key()


def _one_harness_per_id(harness: Harness, plans: list[tuple[list[Variant], Context]]) -> None:
    seen: dict[str, bytes] = {}
    for variants, context in plans:
        for variant in variants:
            key = variant.key()
            assert seen.setdefault(variant.variant_id, key) == key, variant
            assert _replayed(harness, variant, context) == key, variant


def test_rules_drawn_that_change_nothing_shift_no_other_rules_draws(harness) -> None:
    # tools.distractors adds nothing where the trajectory calls no tool (a refusal): planned
    # with that context or without one, the variants applying the same rules are one
    recipe = Recipe(
        (
            RecipeRule("tools.distractors", 1.0),
            RecipeRule("tools.rename", 1.0),
            RecipeRule("tools.shuffle", 1.0),
        ),
        variants_per_harness=4,
    )
    refusal = Context(frozenset(), frozenset())
    blind = plan(harness, recipe, seed=0)
    seen = plan(harness, recipe, seed=0, context=refusal)
    assert [v.variant_id for v in blind] == [v.variant_id for v in seen]
    assert [v.key() for v in blind] == [v.key() for v in seen]


def test_a_recipe_with_a_rule_that_changes_nothing_more_plans_the_same_variants(harness) -> None:
    bare = harness.replace(hooks=())
    rules = (RecipeRule("tools.rename", 1.0), RecipeRule("tools.shuffle", 1.0))
    plain = Recipe(rules, variants_per_harness=4)
    more = Recipe((RecipeRule("hooks.wording", 1.0), *rules), variants_per_harness=4)
    first, second = plan(bare, plain, seed=3), plan(bare, more, seed=3)
    assert [v.variant_id for v in first] == [v.variant_id for v in second]
    assert [v.key() for v in first] == [v.key() for v in second]


@settings(max_examples=12, deadline=None)
@given(
    shape=st.sampled_from(["full", "bare", "text"]),
    names=st.lists(st.sampled_from(_RULES), min_size=1, max_size=4, unique=True),
    probability=st.sampled_from([0.4, 1.0]),
    min_rules=st.integers(0, 2),
    used=st.sets(st.sampled_from(_TOOLS)),
    seed=st.integers(0, 1000),
)
def test_one_variant_id_names_one_harness(shape, names, probability, min_rules, used, seed):
    harness = _harness(shape)
    recipe = Recipe(
        tuple(RecipeRule(name, probability) for name in names),
        variants_per_harness=3,
        min_rules=min(min_rules, len(names)),
    )
    # the same recipe with a rule more that changes nothing here (distractors for a
    # trajectory that calls no tool)
    padded = dataclasses.replace(
        recipe, rules=(RecipeRule("tools.distractors", 1.0), *recipe.rules)
    )
    context = Context(frozenset(used), frozenset({"returns-policy"}))
    refusal = Context(frozenset(), frozenset())
    plans = [
        (plan(harness, recipe, seed=seed), Context()),
        (plan(harness, recipe, seed=seed, context=context), context),
        (plan(harness, recipe, seed=seed, context=refusal), refusal),
        (plan(harness, padded, seed=seed, context=refusal), refusal),
    ]
    _one_harness_per_id(harness, plans)


def test_undeclared_arguments_change_a_variant_and_its_id_only_where_a_rule_names_them():
    from hsa.harness.model import Tool

    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    harness = Harness(id="h", tools=(Tool("lookup", "Look up.", schema),))
    recipe = Recipe(
        rules=(RecipeRule("tools.wrap_args", 1.0, {"wrapper": "args"}),), variants_per_harness=1
    )
    plain = plan(harness, recipe, seed=0)[0]
    elsewhere = Context(arguments=(("lookup", (("note",),)),))
    assert plan(harness, recipe, seed=0, context=elsewhere)[0] == plain  # same id and harness
    clash = Context(arguments=(("lookup", (("args",),)),))
    other = plan(harness, recipe, seed=0, context=clash)[0]
    assert other.variant_id != plain.variant_id
    assert list(other.harness.tools[0].parameters["properties"]) == ["args_2"]
