"""The planner: deterministic variants, stable ids, needs honoured, picks per trajectory."""

from __future__ import annotations

import pytest

from hsa.augment import (
    Context,
    Recipe,
    RecipeRule,
    apply_chain,
    default_recipe,
    get,
    map_events,
    pick,
    plan,
)
from hsa.errors import RuleError
from hsa.harness import Tool


def test_plan_is_deterministic_and_ids_are_stable(harness, events):
    recipe = default_recipe()
    ctx = Context.of(events)
    first = plan(harness, recipe, seed=7, context=ctx)
    again = plan(harness, recipe, seed=7, context=ctx)
    assert [v.variant_id for v in first] == [v.variant_id for v in again]
    assert [v.harness.to_json() for v in first] == [v.harness.to_json() for v in again]
    assert [v.mapping.to_json() for v in first] == [v.mapping.to_json() for v in again]
    assert len(first) == recipe.variants_per_harness
    assert len({v.variant_id for v in first}) == len(first)
    other = plan(harness, recipe, seed=8, context=ctx)
    assert {v.variant_id for v in other}.isdisjoint({v.variant_id for v in first})


def test_variant_records_rules_with_resolved_params(harness):
    recipe = Recipe((RecipeRule("tools.rename", 1.0, {"style": "camel"}),), variants_per_harness=1)
    (variant,) = plan(harness, recipe, seed=0)
    assert variant.rules == (
        ("tools.rename", "1", {"style": "camel", "fraction": 1.0, "skill_tool": True}),
    )
    assert variant.harness.tool("getOrder") is not None
    assert variant.mapping.tool_name("get_order") == "getOrder"
    assert variant.lineage()["rules"][0]["name"] == "tools.rename"


def test_rules_that_need_the_trajectory_are_skipped_without_context(harness, events):
    recipe = Recipe(
        (RecipeRule("tools.drop_unused", 1.0, {"fraction": 1.0}), RecipeRule("tools.shuffle", 1.0)),
        variants_per_harness=2,
    )
    assert recipe.needs == {"used_tools"}
    blind = plan(harness, recipe, seed=0)
    assert all([n for n, _, _ in v.rules] == ["tools.shuffle"] for v in blind)
    seeing = plan(harness, recipe, seed=0, context=Context.of(events))
    assert all([n for n, _, _ in v.rules] == ["tools.drop_unused", "tools.shuffle"] for v in seeing)
    used = Context.of(events).used_tools
    assert {t.name for t in seeing[0].harness.tools} == used


def test_context_follows_earlier_renames(harness, events):
    chain = [
        (get("tools.rename"), {"style": "random"}),
        (get("tools.drop_unused"), {"fraction": 1.0}),
    ]
    rewrite, _ = apply_chain(harness, chain, seed=1, context=Context.of(events))
    surface = map_events(events, rewrite.mapping)
    called = {e.tool for e in surface if e.kind == "tool_call"}
    assert {t.name for t in rewrite.harness.tools} == called


def test_pick_is_deterministic_per_trajectory(harness):
    recipe = Recipe(
        (RecipeRule("tools.shuffle", 1.0),),
        variants_per_harness=6,
        variants_per_trajectory=2,
        include_canonical=True,
    )
    variants = plan(harness, recipe, seed=3)
    assert variants[0].is_canonical and len(variants) == 7
    chosen = pick(variants, "traj-1", recipe)
    assert chosen == pick(variants, "traj-1", recipe)
    assert chosen[0].is_canonical and len(chosen) == 3
    spread = {tuple(v.variant_id for v in pick(variants, f"t{i}", recipe)) for i in range(20)}
    assert len(spread) > 1


def test_min_and_max_rules(harness):
    recipe = Recipe(
        tuple(
            RecipeRule(n, 0.01)
            for n in ["tools.shuffle", "prompt.heading_style", "prompt.section_order"]
        ),
        variants_per_harness=5,
        min_rules=2,
        max_rules=2,
    )
    for variant in plan(harness, recipe, seed=0):
        assert len(variant.rules) == 2


def test_a_rule_producing_an_invalid_harness_is_named(harness, monkeypatch):
    from hsa.augment import Rewrite, Rule

    def clash(h, rng, params, context):
        return Rewrite(h.replace(tools=[*h.tools, Tool(h.tools[0].name)]))

    broken = Rule("tests.clash", "1", clash, doc="Duplicate a tool name.")
    with pytest.raises(RuleError, match=r"invalid harness"):
        apply_chain(harness, [(broken, {})], seed=0)


PLAN_DIGEST = """
import hashlib, sys
sys.path.insert(0, {here!r})
from conftest import make_events, make_harness
from hsa.augment import Context, default_recipe, plan
variants = plan(make_harness(), default_recipe(), seed=11, context=Context.of(make_events()))
text = "".join(v.variant_id + v.harness.to_json() + v.mapping.to_json() for v in variants)
print(hashlib.sha256(text.encode()).hexdigest())
"""


def test_plan_is_byte_identical_across_processes_and_hash_seeds():
    import os
    import subprocess
    import sys
    from pathlib import Path

    code = PLAN_DIGEST.format(here=str(Path(__file__).parent))
    digests = {
        subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": seed},
        ).stdout
        for seed in ("1", "2")
    }
    assert len(digests) == 1
