"""The planner: deterministic variants, stable ids, needs honoured, picks per trajectory."""

from __future__ import annotations

import dataclasses

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hsa.augment import (
    Context,
    Recipe,
    RecipeRule,
    apply_chain,
    default_recipe,
    get_rule,
    map_events,
    pick,
    plan,
)
from hsa.augment.mapping import IDENTITY, RewriteMapping
from hsa.augment.param_schemas import copy_schema
from hsa.augment.planner import (
    MOVED_DOWN,
    LazyPlan,
    Variant,
    canonical_variant,
    hazard_of,
    pick_order,
    plan_variant,
    walk,
)
from hsa.errors import PlanError, ProtocolError, RuleError
from hsa.harness import Protocol, Tool, ToolCall, render
from hsa.harness.prompt import system_prompt
from hsa.harness.protocols.literals import MAX_DEPTH


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
        ("tools.rename", "8", {"style": "camel", "fraction": 1.0, "skill_tool": True}),
    )
    assert variant.harness.tool("getOrder") is not None
    assert variant.mapping.tool_name("get_order") == "getOrder"
    assert variant.lineage()["rules"][0]["name"] == "tools.rename"


def test_a_variant_lists_only_the_rules_that_changed_it(harness):
    # A rule with nothing to change (hooks.* without hooks, a doc format under the api
    # protocol) is not the variant's: lineage and per-family statistics name what changed.
    bare = harness.replace(hooks=(), skills=(), skill_tool=None)
    recipe = Recipe(
        (
            RecipeRule("hooks.wording", 1.0),
            RecipeRule("skill_content.shuffle", 1.0),
            RecipeRule("protocol.doc_format", 1.0),
            RecipeRule("tools.rename", 1.0),
        ),
        variants_per_harness=4,
    )
    for variant in plan(bare, recipe, seed=3):
        assert [name for name, _, _ in variant.rules] == ["tools.rename"]


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
        (get_rule("tools.rename"), {"style": "random"}),
        (get_rule("tools.drop_unused"), {"fraction": 1.0}),
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
    # (rules whose every draw shows: a section order that moves only sections rendering
    # empty is no rewrite, and not the variant's)
    recipe = Recipe(
        tuple(
            RecipeRule(n, 0.01) for n in ["tools.shuffle", "prompt.heading_style", "tools.rename"]
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
    with pytest.raises(RuleError, match=r"invalid harness") as caught:
        apply_chain(harness, [(broken, {})], seed=0)
    assert caught.value.where == "rule 'tests.clash'"  # no "(after [])"


def test_a_harness_invalid_before_any_rule_is_not_blamed_on_one(harness):
    # a harness made in code is not validated; the first rule that changed it was blamed
    from hsa.augment import Recipe, RecipeRule, plan
    from hsa.errors import PlanError

    bad = harness.replace(tools=[Tool("ok", "d", {"type": "objekt"}), *harness.tools])
    with pytest.raises(PlanError, match="the harness to rewrite is invalid, before any rule"):
        plan(bad, Recipe(rules=(RecipeRule("tools.rename"),)))


def test_a_planning_failure_says_whose_harness_it_was_planning(harness, monkeypatch):
    import pickle

    from hsa.augment import registry
    from hsa.errors import PlanError

    monkeypatch.setattr(registry, "_RULES", dict(registry._RULES))

    @registry.rule("tests.crash", version="1")
    def crash(h, rng, params, context):
        """Fail."""
        raise KeyError("missing")

    recipe = dataclasses.replace(
        default_recipe(), rules=(RecipeRule("tests.crash", 1.0),), min_rules=1
    )
    with pytest.raises(PlanError) as failed:
        plan_variant(harness, recipe, 0)
    assert failed.value.harness_id == harness.id and failed.value.where == "rule 'tests.crash'"
    assert "raised KeyError: 'missing'" in failed.value.message
    # as a worker process sends it back
    again = pickle.loads(pickle.dumps(failed.value))
    assert (again.harness_id, again.where, again.message) == (
        harness.id,
        failed.value.where,
        failed.value.message,
    )


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


@settings(max_examples=50, deadline=None)
@given(
    ids=st.lists(st.text(min_size=1, max_size=12), min_size=1, max_size=40, unique=True),
    seed=st.integers(0, 1000),
    data=st.data(),
)
def test_pick_order_visits_each_slot_once_and_depends_on_the_id_alone(ids, seed, data) -> None:
    widths = np.array(data.draw(st.lists(st.integers(0, 8), min_size=len(ids), max_size=len(ids))))
    order = pick_order(pa.array(ids), widths, seed)
    assert order.shape == (len(ids), int(widths.max()))
    for row, width in zip(order, widths, strict=True):
        assert sorted(row[:width]) == list(range(width)) and (row[width:] == -1).all()
    # a row's order depends on its id only, not on its neighbours
    alone = pick_order(pa.array(ids[:1]), widths[:1], seed)
    assert (alone[0] == order[0][: alone.shape[1]]).all()
    assert (pick_order(pa.array(ids), widths, seed) == order).all()


def test_picks_spread_over_variants_and_seeds_change_them() -> None:
    ids = pa.array([f"traj-{i}" for i in range(4000)])
    first = pick_order(ids, np.full(4000, 8), 0)[:, :2]
    counts = np.bincount(first.ravel(), minlength=8)
    assert counts.min() > 0.8 * counts.mean()
    assert (pick_order(ids, np.full(4000, 8), 1)[:, :2] != first).any()


def test_walk_passes_over_rewrites_that_change_nothing_and_repeats() -> None:
    contents = {0: 5, 1: -1, 2: 5, 3: 7, 4: 8}
    assert walk(np.array([1, 0, 2, 3, 4]), contents.__getitem__, 2) == [0, 3]
    assert walk(np.array([2, 1, -1, -1]), contents.__getitem__, 3) == [2]  # fewer differ
    assert walk(np.array([4, 3]), contents.__getitem__, 0) == []


def test_each_variant_is_planned_on_its_own(harness, events) -> None:
    recipe = dataclasses.replace(default_recipe(), variants_per_harness=6)
    context = Context.of(events)
    planned = plan(harness, recipe, seed=4, context=context)
    assert [plan_variant(harness, recipe, i, seed=4, context=context) for i in (5, 2)] == [
        planned[5],
        planned[2],
    ]
    lazy = LazyPlan(harness, recipe, seed=4, context=context)
    assert lazy.variant(3) == planned[3] and set(lazy.variants) == {3}
    unchanged = (harness.to_json(), RewriteMapping().to_json())
    for i, variant in enumerate(planned):
        key = (variant.harness.to_json(), variant.mapping.to_json())
        assert (lazy.content(i) == -1) == (key == unchanged)
        same = [
            j
            for j, other in enumerate(planned)
            if (other.harness.to_json(), other.mapping.to_json()) == key
        ]
        assert all(lazy.content(j) == lazy.content(i) for j in same)


def test_pick_draws_only_from_rewrites_that_change_something_once(harness):
    recipe = Recipe((RecipeRule("tools.shuffle", 1.0),), variants_per_harness=4)
    recipe = dataclasses.replace(recipe, variants_per_trajectory=2)
    planned = plan(harness, recipe, seed=3)
    noop = Variant("noop", harness.id, (("tools.shuffle", "1", {}),), harness, RewriteMapping())
    again = dataclasses.replace(planned[1], variant_id="again")
    pool = [noop, *planned, again]
    for i in range(30):
        chosen = pick(pool, f"t{i}", recipe, harness=harness)
        assert noop not in chosen and 1 <= len(chosen) <= 2
        keys = [(v.harness.to_json(), v.mapping.to_json()) for v in chosen]
        assert len(set(keys)) == len(keys)  # never the same rewrite twice
        assert chosen == pick(pool, f"t{i}", recipe, harness=harness)
    with_canonical = [canonical_variant(harness), *pool]
    assert pick(with_canonical, "t1", recipe) == [
        with_canonical[0],
        *pick(pool, "t1", recipe, harness=harness),
    ]
    with pytest.raises(RuleError, match="harness the variants were planned from"):
        pick(pool, "t1", recipe)


def test_pick_passes_over_a_planned_draw_whose_rules_all_changed_nothing(harness):
    # such a draw has no rules, as the canonical variant has none: pick took it for the
    # canonical one and gave it first, where the augment job passes over it
    bare = harness.replace(hooks=())
    recipe = Recipe(
        (RecipeRule("hooks.wording", 0.9), RecipeRule("tools.rename", 0.5)),
        include_canonical=False,
        max_rules=1,
        variants_per_harness=8,
    )
    recipe = dataclasses.replace(recipe, variants_per_trajectory=1)
    planned = plan(bare, recipe)
    assert any(not v.rules for v in planned)  # a hooks.wording draw: nothing to reword
    for i in range(20):
        chosen = pick(planned, f"t{i}", recipe, harness=bare)
        assert len(chosen) == 1 and chosen[0].rules, chosen


def _but(harness, **changes):
    """``harness`` with its first skill's body and first hook's message reworded."""
    skill, hook = harness.skills[0], harness.hooks[0]
    if "skill" in changes:
        skill = dataclasses.replace(skill, content=skill.content + "\n\nAsk before you refund.")
    if "hook" in changes:
        hook = dataclasses.replace(hook, message="Heads up: " + hook.message)
    return harness.replace(skills=(skill, *harness.skills[1:]), hooks=(hook, *harness.hooks[1:]))


@pytest.mark.parametrize("part", ["skill", "hook"])
def test_pick_passes_over_a_rewrite_the_trajectory_never_shows(harness, events, part) -> None:
    from hsa.harness import render
    from hsa.harness.events import HookFired, SkillLoad

    rewritten = _but(harness, **{part: True})
    variant = Variant("v-" + part, harness.id, (("test.reword", "1", {}),), rewritten, IDENTITY)

    def shows(event) -> bool:
        if part == "skill":
            return isinstance(event, SkillLoad) and event.skill_id == harness.skills[0].id
        return isinstance(event, HookFired) and event.hook_id == harness.hooks[0].id

    unseen = [e for e in events if not shows(e)]
    assert len(unseen) < len(events)
    # the premise: without the load (the firing) its rows are the canonical ones
    assert render(unseen, rewritten) == render(unseen, harness)
    assert render(events, rewritten) != render(events, harness)
    recipe = dataclasses.replace(default_recipe(), variants_per_trajectory=1)
    pool = [canonical_variant(harness), variant]
    assert pick(pool, "t1", recipe, events=events) == pool
    assert pick(pool, "t1", recipe, events=unseen) == pool[:1]


def test_pick_takes_one_of_two_rewrites_a_trajectory_shows_the_same(harness, events) -> None:
    from hsa.harness.events import HookFired, SkillLoad

    skill, hook = harness.skills[0].id, harness.hooks[0].id
    both = _but(harness, skill=True, hook=True)
    only_hook = _but(harness, hook=True)
    pool = [
        Variant("v-both", harness.id, (("test.both", "1", {}),), both, IDENTITY),
        Variant("v-hook", harness.id, (("test.hook", "1", {}),), only_hook, IDENTITY),
    ]
    recipe = dataclasses.replace(default_recipe(), variants_per_trajectory=2)
    no_load = [e for e in events if not (isinstance(e, SkillLoad) and e.skill_id == skill)]
    assert any(isinstance(e, HookFired) and e.hook_id == hook for e in no_load)
    assert len(pick(pool, "t1", recipe, harness=harness, events=events)) == 2
    # without the load both show the same reworded hook: one of them is taken
    assert len(pick(pool, "t1", recipe, harness=harness, events=no_load)) == 1


def test_shown_key_holds_what_rows_show_of_an_empty_prompt(harness) -> None:
    from hsa.augment.planner import Sight, shown_key
    from hsa.harness.model import Prompt

    empty = harness.replace(prompt=Prompt())
    retitled = empty.replace(prompt=Prompt(heading_style="bold"))
    assert retitled.to_json() != empty.to_json()
    assert shown_key(retitled, IDENTITY) == shown_key(empty, IDENTITY)
    assert shown_key(harness, IDENTITY) != shown_key(empty, IDENTITY)
    sight = Sight((harness.skills[0].id,), ())
    assert shown_key(_but(harness, skill=True), IDENTITY, sight) != shown_key(
        harness, IDENTITY, sight
    )
    assert shown_key(_but(harness, skill=True), IDENTITY) == shown_key(harness, IDENTITY)


def _renaming(rename: dict[str, str], *, record: bool, require: str | None = None):
    """A rule renaming ``get_order``'s parameters (recording the moves or not), or making it
    require a new parameter ``require``."""
    from hsa.augment import Rewrite, Rule
    from hsa.augment.mapping import Step, ToolMap

    def fn(h, rng, params, context):
        tool = h.tools[0]
        props = {rename.get(k, k): v for k, v in tool.parameters["properties"].items()}
        required = [rename.get(r, r) for r in tool.parameters.get("required", [])]
        if require:
            props[require] = {"type": "string"}
            required.append(require)
        schema = {**tool.parameters, "properties": props, "required": required}
        changed = dataclasses.replace(tool, parameters=schema)
        steps = tuple(Step("move", (a,), (b,)) for a, b in rename.items()) if record else ()
        mapping = (
            RewriteMapping(tools={tool.name: ToolMap(tool.name, steps)}) if steps else IDENTITY
        )
        return Rewrite(h.replace(tools=(changed, *h.tools[1:])), mapping)

    return Rule("tests.params", "1", fn, doc="Rename get_order's parameters.")


def test_a_parameter_renamed_without_its_step_is_refused_as_it_is_planned(harness):
    # rows would call the tool with the old name while the schema has only the new one
    assert harness.tools[0].name == "get_order"
    assert harness.tools[0].parameters["required"] == ["order_id"]
    good = _renaming({"order_id": "orderId"}, record=True)
    apply_chain(harness, [(good, {})], seed=0)
    bad = _renaming({"order_id": "orderId"}, record=False)
    with pytest.raises(RuleError, match="does not declare 'order_id'") as caught:
        apply_chain(harness, [(bad, {})], seed=0)
    assert caught.value.where == "rule 'tests.params'"
    added = _renaming({}, record=False, require="region")
    with pytest.raises(RuleError, match="requires 'region', which no parameter"):
        apply_chain(harness, [(added, {})], seed=0)


def test_the_rule_that_lost_a_tool_is_named_not_the_chain(harness):
    from hsa.augment import Rewrite, Rule

    def forget(h, rng, params, context):  # renames a tool without recording it
        first = h.tools[0]
        return Rewrite(h.replace(tools=(dataclasses.replace(first, name="fetch_it"), *h.tools[1:])))

    buggy = Rule("tests.forget", "1", forget, doc="Rename a tool, unrecorded.")
    rename = get_rule("tools.rename")
    with pytest.raises(RuleError, match="which the harness it was given had") as caught:
        apply_chain(harness, [(rename, {"fraction": 1.0}), (buggy, {})], seed=0)
    assert caught.value.where == "rule 'tests.forget' (after ['tools.rename'])"
    assert "(canonical 'get_order')" in caught.value.message

    def drop(h, rng, params, context):  # drops the first tool, whatever it is called now
        return Rewrite(h.replace(tools=h.tools[1:]))

    dropper = Rule("tests.drop", "1", drop, doc="Drop the first tool.")
    with pytest.raises(RuleError, match="dropped while the trajectories' calls use it") as caught:
        apply_chain(harness, [(rename, {"fraction": 1.0}), (dropper, {})], seed=0)
    assert "a rename recorded but not made" not in caught.value.message


def test_a_hook_the_trajectories_may_fire_dropped_is_refused_naming_the_rule(harness):
    # rows firing it would name a hook their harness lacks (augment, build and preview used
    # to fail rendering, blaming the canonical harness and naming no rule)
    from hsa.augment import Rewrite, Rule
    from hsa.augment.preview import preview
    from hsa.augment.synthetic import sample_trajectory

    def drop(h, rng, params, context):
        return Rewrite(h.replace(hooks=[k for k in h.hooks if k.id != "nudge"]))

    dropper = Rule("tests.drop_hook", "1", drop, doc="Drop the nudge hook.")
    with pytest.raises(RuleError, match="has no hook 'nudge' and the mapping") as caught:
        apply_chain(harness, [(dropper, {})], seed=0)  # (not known which fire: any may)
    assert caught.value.where == "rule 'tests.drop_hook'"
    assert "rows would show the firing of a hook" in caught.value.message
    with pytest.raises(RuleError, match="no hook 'nudge'"):
        preview(dropper, harness, trajectory=sample_trajectory(harness))  # it fires there
    # where the trajectories are known not to fire it, it may go
    rewrite, _ = apply_chain(harness, [(dropper, {})], seed=0, fired={"greet", "audit"})
    assert rewrite.harness.hook("nudge") is None

    def rename(h, rng, params, context, record=True):
        hooks = [dataclasses.replace(k, id="nudge2") if k.id == "nudge" else k for k in h.hooks]
        mapping = RewriteMapping(hooks={"nudge": "nudge2"} if record else {})
        return Rewrite(h.replace(hooks=hooks), mapping)

    recorded = Rule("tests.rename_hook", "1", rename, doc="Rename the nudge hook.")
    apply_chain(harness, [(recorded, {})], seed=0)  # renamed in the mapping too: fine
    unrecorded = Rule(
        "tests.forget_hook", "1", lambda *a: rename(*a, record=False), doc="Forget the rename."
    )
    with pytest.raises(RuleError, match="renamed without the rename in the mapping"):
        apply_chain(harness, [(unrecorded, {})], seed=0)


def _editing(tool_name: str, edit, steps=()):
    """A rule that rewrites ``tool_name``'s schema with ``edit`` (recording ``steps``)."""
    from hsa.augment import Rewrite, Rule
    from hsa.augment.mapping import ToolMap

    def fn(h, rng, params, context):
        tools = tuple(
            dataclasses.replace(t, parameters=edit(copy_schema(t.parameters)))
            if t.name == tool_name
            else t
            for t in h.tools
        )
        mapping = RewriteMapping(tools={tool_name: ToolMap(tool_name, tuple(steps))})
        return Rewrite(h.replace(tools=tools), mapping if steps else IDENTITY)

    return Rule("tests.edit", "1", fn, doc="Edit one tool's schema.")


def _renamed(schema, old, new):
    schema["properties"] = {(new if k == old else k): v for k, v in schema["properties"].items()}
    return schema


def _respelled(schema, name, table):
    node = schema["properties"][name]
    node["enum"] = [table.get(v, v) for v in node["enum"]]
    return schema


def test_an_optional_parameter_or_an_enum_changed_without_its_step_is_refused(harness):
    # rows whose calls carry the optional parameter, or the enum value, would break their own
    # schema: as for a required parameter, the rewrite is refused as it is planned
    from hsa.augment.mapping import Step

    assert harness.tools[2].name == "get_order_history"  # page: an optional integer
    rename = _editing("get_order_history", lambda s: _renamed(s, "page", "pageNumber"))
    with pytest.raises(RuleError, match="does not declare 'page', which the mapping makes of"):
        apply_chain(harness, [(rename, {})], seed=0)
    recorded = _editing(
        "get_order_history",
        lambda s: _renamed(s, "page", "pageNumber"),
        [Step("move", ("page",), ("pageNumber",))],
    )
    apply_chain(harness, [(recorded, {})], seed=0)
    dropped = _editing(
        "get_order_history",
        lambda s: {**s, "properties": {"customer": s["properties"]["customer"]}},
    )
    with pytest.raises(RuleError, match="does not declare 'page'"):
        apply_chain(harness, [(dropped, {})], seed=0)
    tool = next(t for t in harness.tools if "sort" in t.parameters["properties"])
    table = {"price": "PRICE", "rating": "RATING"}
    respell = _editing(tool.name, lambda s: _respelled(s, "sort", table))
    with pytest.raises(RuleError, match=r"does not take 'price' at 'sort' \(its enum"):
        apply_chain(harness, [(respell, {})], seed=0)
    # a step that respells 1.0 does not respell a call's 1, as the engine reads it
    levels = {"type": "object", "properties": {"level": {"enum": [1, 2]}}}
    leveled = harness.replace(tools=(*harness.tools, Tool("set_level", "Set.", levels)))
    worded = {1: "low", 2: "high"}
    near = [Step("enum", ("level",), values=((1.0, "low"), (2.0, "high")))]
    near_miss = _editing("set_level", lambda s: _respelled(s, "level", worded), near)
    with pytest.raises(RuleError, match="does not take 1 at 'level'"):
        apply_chain(leveled, [(near_miss, {})], seed=0)
    step = Step("enum", ("sort",), values=tuple(table.items()))
    apply_chain(
        harness, [(_editing(tool.name, lambda s: _respelled(s, "sort", table), [step]), {})], seed=0
    )


def test_a_swap_of_tools_parameter_values_or_enum_values_is_refused(harness):
    # every call still validates, and says something else: a call to get_order reaching a
    # tool described as the status lookup, a value under another parameter's description, a
    # sort by rating for a sort by price (QA's swap.* rules)
    from hsa.augment import Rewrite, Rule
    from hsa.augment.mapping import Step

    def swap_names(h, rng, params, context):
        names = {"get_order": "get_order_status", "get_order_status": "get_order"}
        return Rewrite(
            h.replace(
                tools=[dataclasses.replace(t, name=names.get(t.name, t.name)) for t in h.tools]
            )
        )

    tools = Rule("tests.swap_tools", "1", swap_names, doc="Swap two tools' names.")
    with pytest.raises(
        RuleError,
        match="has the description and parameters of canonical tool 'get_order_status', not its",
    ) as caught:
        apply_chain(harness, [(tools, {})], seed=0)
    assert caught.value.where == "rule 'tests.swap_tools'"
    # the same swap, recorded in the mapping (its text renamed too): the calls move with it
    from hsa.augment.rules.tool_names import rename_tools

    table = {"get_order": "get_order_status", "get_order_status": "get_order"}
    recorded = Rule("tests.swap", "1", lambda h, *a: rename_tools(h, table), doc="Swap them.")
    apply_chain(harness, [(recorded, {})], seed=0)

    moves = [
        Step("move", ("customer",), ("tmp",)),
        Step("move", ("page",), ("customer",)),
        Step("move", ("tmp",), ("page",)),
    ]
    values = _editing("get_order_history", lambda s: s, moves)
    with pytest.raises(RuleError, match="declares 'page' as the canonical tool did, and the "):
        apply_chain(harness, [(values, {})], seed=0)
    swapped = Step("enum", ("sort",), values=(("price", "rating"), ("rating", "price")))
    enum = _editing("search", lambda s: s, [swapped])
    with pytest.raises(
        RuleError,
        match="gets 'rating' at 'sort' for the canonical 'price', another value of the enum",
    ):
        apply_chain(harness, [(enum, {})], seed=0)
    # read through $refs too (return_order_items' items are a $ref: its names are not read)
    pairs = (("damaged", "wrong_size"), ("wrong_size", "damaged"))
    reason = _editing("return_order_items", lambda s: s, [Step("enum", ("reason",), values=pairs)])
    with pytest.raises(RuleError, match="gets 'wrong_size' at 'reason' for the canonical 'damag"):
        apply_chain(harness, [(reason, {})], seed=0)


def test_a_parameter_dropped_by_a_step_is_refused(harness):
    # QA's mut.drop_value_step: the schema loses query and the mapping records a drop of it;
    # every call validates and searches for nothing (made without the step, it was refused)
    from hsa.augment.mapping import Step

    def without(name):
        def edit(schema):
            del schema["properties"][name]
            schema["required"] = [r for r in schema.get("required", ()) if r != name]
            return schema

        return edit

    query = _editing("search", without("query"), [Step("drop", ("query",))])
    with pytest.raises(
        RuleError,
        match="tool 'search' \\(canonical 'search'\\): the mapping drops its required parameter "
        "'query', a value",
    ) as caught:
        apply_chain(harness, [(query, {})], seed=0)
    assert caught.value.where == "rule 'tests.edit'"
    limit = _editing("search", without("limit"), [Step("drop", ("limit",))])
    with pytest.raises(RuleError, match="the mapping drops its parameter 'limit'"):
        apply_chain(harness, [(limit, {})], seed=0)

    # a value moved out of an object the steps then prune is not dropped (a flatten)
    def wrap(schema):
        limit = schema["properties"].pop("limit")
        schema["properties"]["paging"] = {"type": "object", "properties": {"limit": limit}}
        return schema

    steps = [Step("ensure", ("paging",)), Step("move", ("limit",), ("paging", "limit"))]
    nested = apply_chain(harness, [(_editing("search", wrap, steps), {})], seed=0)[0].harness
    flat = harness.tool("search").parameters
    flatten = [Step("move", ("paging", "limit"), ("limit",)), Step("prune", ("paging",))]
    unwrapped = _editing("search", lambda s: copy_schema(flat), flatten)
    apply_chain(nested, [(unwrapped, {})], seed=0)


def test_a_parameter_dropped_from_a_schema_with_refs_is_refused(harness):
    # review of 6c1ded8: a tool reading a part through $ref got no argument check at all, not
    # even of a drop step on a name its properties list
    from hsa.augment.mapping import Step

    assert "$ref" in str(harness.tool("return_order_items").parameters)

    def without(name):
        def edit(schema):
            del schema["properties"][name]
            schema["required"] = [r for r in schema["required"] if r != name]
            return schema

        return edit

    reason = _editing("return_order_items", without("reason"), [Step("drop", ("reason",))])
    with pytest.raises(RuleError, match="the mapping drops its parameter 'reason', a value"):
        apply_chain(harness, [(reason, {})], seed=0)
    items = _editing("return_order_items", without("items"), [Step("drop", ("items",))])
    with pytest.raises(RuleError, match="drops its required parameter 'items'"):
        apply_chain(harness, [(items, {})], seed=0)


def _with_filters(harness):
    """``harness`` whose ``search`` takes an optional object ``filters`` requiring ``price``."""
    filters = {
        "type": "object",
        "properties": {"brand": {"type": "string"}, "price": {"type": "integer"}},
        "required": ["price"],
    }

    def add(tool):
        props = {**tool.parameters["properties"], "filters": filters}
        return dataclasses.replace(tool, parameters={**tool.parameters, "properties": props})

    return harness.replace(tools=tuple(add(t) if t.name == "search" else t for t in harness.tools))


def test_a_nested_parameter_made_required_is_refused(harness):
    # review of 6c1ded8: planning read only the top-level required, so a nested optional
    # property made required (livestream's filters.price_range) passed
    from hsa.augment.mapping import Step

    nested = _with_filters(harness)

    def requiring(name, declare=False):
        def edit(schema):
            inner = schema["properties"]["filters"]
            if declare:
                inner["properties"][name] = {"type": "string"}
            inner["required"].append(name)
            return schema

        return edit

    with pytest.raises(
        RuleError,
        match=r"requires 'filters\.brand', which the mapping makes of a parameter the canonical "
        "tool's calls may leave out",
    ):
        apply_chain(nested, [(_editing("search", requiring("brand")), {})], seed=0)
    with pytest.raises(RuleError, match=r"requires 'filters\.color', which no parameter"):
        apply_chain(nested, [(_editing("search", requiring("color", True)), {})], seed=0)
    # the object renamed whole keeps what it requires: a call carrying it carries its price
    moved = [Step("move", ("filters",), ("where",))]
    apply_chain(
        nested, [(_editing("search", lambda s: _renamed(s, "filters", "where"), moved), {})], seed=0
    )
    # an optional parameter wrapped into an object every call carries, which requires it

    def wrapped(name):
        def edit(schema):
            inner = {"type": "object", "properties": {name: schema["properties"].pop(name)}}
            schema["properties"]["paging"] = {**inner, "required": [name]}
            schema["required"] = [r for r in schema["required"] if r != name] + ["paging"]
            return schema

        return edit

    def wrap(name):
        steps = [Step("ensure", ("paging",)), Step("move", (name,), ("paging", name))]
        return _editing("search", wrapped(name), steps)

    with pytest.raises(RuleError, match=r"requires 'paging\.limit', which the mapping makes of a"):
        apply_chain(harness, [(wrap("limit"), {})], seed=0)
    apply_chain(harness, [(wrap("query"), {})], seed=0)  # (every call carries the query)


def _bound(schema):
    """``schema`` (``search``'s) with ``limit`` at least 1."""
    out = copy_schema(schema)
    out["properties"]["limit"]["minimum"] = 1
    return out


def test_a_bound_added_to_a_parameter_is_refused(harness):
    # review of 6c1ded8: a minimum or a pattern added passed planning, and rows whose calls
    # give a value outside it were written
    def bounded(key, value, name="limit"):
        def edit(schema):
            schema["properties"][name][key] = value
            return schema

        return _editing("search", edit)

    with pytest.raises(RuleError, match="with minimum 5 where the canonical one has none"):
        apply_chain(harness, [(bounded("minimum", 5), {})], seed=0)
    with pytest.raises(RuleError, match=r"with pattern '\^a' where the canonical one has none"):
        apply_chain(harness, [(bounded("pattern", "^a", "query"), {})], seed=0)
    low = harness.replace(
        tools=tuple(
            dataclasses.replace(t, parameters=_bound(t.parameters)) if t.name == "search" else t
            for t in harness.tools
        )
    )
    with pytest.raises(RuleError, match="with minimum 2 where the canonical one has 1: a para"):
        apply_chain(low, [(bounded("minimum", 2), {})], seed=0)
    apply_chain(low, [(bounded("minimum", 0), {})], seed=0)  # (a bound moved outward widens)


def test_a_schema_the_canonical_calls_no_longer_fit_is_refused(harness):
    # QA's mut.optional_to_required, mut.type_change, mut.rename_skill_no_text: hsa augment
    # wrote rows whose calls (or loads) their own tool's schema refuses
    from hsa.augment import Rewrite, Rule

    def required(schema):
        schema["required"] = list(schema["properties"])
        return schema

    with pytest.raises(RuleError, match="requires 'limit', which the mapping makes of a param"):
        apply_chain(harness, [(_editing("search", required), {})], seed=0)

    def typed(name, kind):
        def edit(schema):
            schema["properties"][name]["type"] = kind
            return schema

        return edit

    with pytest.raises(
        RuleError,
        match="declares 'query', which the mapping makes of the canonical 'query', "
        "with type 'integer' where the canonical one is 'string'",
    ):
        apply_chain(harness, [(_editing("search", typed("query", "integer")), {})], seed=0)
    apply_chain(harness, [(_editing("search", typed("limit", "number")), {})], seed=0)

    def closed(schema):
        schema["properties"]["query"]["enum"] = ["shoes"]
        return schema

    with pytest.raises(RuleError, match="with an enum where the canonical one had none"):
        apply_chain(harness, [(_editing("search", closed), {})], seed=0)
    # a required object the steps make (tools.wrap_args) is carried by every call
    apply_chain(harness, [(get_rule("tools.wrap_args"), {})], seed=0)
    # a skill renamed, its mapping recorded, its skill tool's enum left as it was
    skill_id = {"type": "string", "enum": [s.id for s in harness.skills]}
    loader = dataclasses.replace(
        harness.skill_tool,
        parameters={**harness.skill_tool.parameters, "properties": {"skill_id": skill_id}},
    )
    listed = harness.replace(skill_tool=loader)

    def rename(h, rng, params, context):
        table = {s.id: f"{s.id}-x" for s in h.skills}
        skills = [dataclasses.replace(s, id=table[s.id]) for s in h.skills]
        return Rewrite(h.replace(skills=skills), RewriteMapping(skills=table))

    stale = Rule("tests.rename_skills", "1", rename, doc="Rename skills, not the enum.")
    with pytest.raises(RuleError, match="skill tool 'load_skill' does not take '"):
        apply_chain(listed, [(stale, {})], seed=0)
    apply_chain(listed, [(get_rule("skill_ids.rename"), {})], seed=0)


def test_two_parameters_schemas_swapped_with_their_names_kept_are_refused(harness):
    # QA's mut.swap_param_schemas: origin and destination trade schemas, keys in place, no
    # steps: every call validates, and {"origin": "SFO"} reads as where the flight goes
    from hsa.augment.mapping import Step

    def place(text):
        return {"type": "string", "description": text}

    props = {
        "origin": place("The airport the flight leaves from."),
        "destination": place("The airport the flight goes to."),
        "via": place("The airport the flight goes to."),  # (declared as destination is)
    }
    schema = {"type": "object", "properties": props, "required": ["origin", "destination"]}
    h = harness.replace(tools=(*harness.tools, Tool("book", "Book a flight.", schema)))

    def swapped(a, b):
        def edit(s):
            p = s["properties"]
            p[a], p[b] = p[b], p[a]
            return s

        return edit

    swap = _editing("book", swapped("origin", "destination"))
    with pytest.raises(
        RuleError,
        match="tool 'book' \\(canonical 'book'\\) declares 'origin', which the mapping makes of "
        "the canonical 'origin', as the canonical tool declared 'destination', not as it",
    ):
        apply_chain(h, [(swap, {})], seed=0)
    # two parameters declared alike may trade places: nothing reads otherwise
    apply_chain(h, [(_editing("book", swapped("destination", "via")), {})], seed=0)
    # the names swapped with their schemas, the steps recorded: each value keeps its own
    moves = [
        Step("move", ("origin",), ("tmp",)),
        Step("move", ("destination",), ("origin",)),
        Step("move", ("tmp",), ("destination",)),
    ]
    apply_chain(h, [(_editing("book", swapped("origin", "destination"), moves), {})], seed=0)
    # a description rewritten is no swap
    reworded = _editing("book", lambda s: {**s, "properties": {**props, "origin": place("From.")}})
    apply_chain(h, [(reworded, {})], seed=0)
    # two descriptions swapped where the schemas differ otherwise (review of 6c1ded8: no check
    # found it)
    typed = {"origin": props["origin"], "destination": {**props["destination"], "minLength": 3}}
    other = h.replace(
        tools=(*harness.tools, Tool("book", "Book a flight.", {**schema, "properties": typed}))
    )

    def descriptions(s):
        p = s["properties"]
        p["origin"]["description"], p["destination"]["description"] = (
            p["destination"]["description"],
            p["origin"]["description"],
        )
        return s

    with pytest.raises(
        RuleError,
        match="describes 'origin', which the mapping makes of the canonical 'origin', as the "
        "canonical tool described 'destination', not as it described 'origin': two parameters' "
        "descriptions swapped",
    ):
        apply_chain(other, [(_editing("book", descriptions), {})], seed=0)


def test_an_enum_swap_hidden_by_a_change_of_case_is_refused(harness):
    # QA's mut.enum_case_swap_open: price -> RATING, rating -> PRICE, the enum respelled so and
    # the steps recorded: every call validates, and a sort by price asks for one by rating
    from hsa.augment.mapping import Step

    table = {"price": "RATING", "rating": "PRICE"}
    step = Step("enum", ("sort",), values=tuple(table.items()))
    swap = _editing("search", lambda s: _respelled(s, "sort", table), [step])
    with pytest.raises(
        RuleError,
        match="gets 'RATING' at 'sort' for the canonical 'price', another value of the enum at "
        "'sort' \\('rating'\\) in another style",
    ):
        apply_chain(harness, [(swap, {})], seed=0)
    # through a $ref too, in any style (WrongSize is wrong_size)
    pairs = (("damaged", "WrongSize"), ("wrong_size", "Damaged"))
    reason = _editing("return_order_items", lambda s: s, [Step("enum", ("reason",), values=pairs)])
    with pytest.raises(RuleError, match="gets 'WrongSize' at 'reason' for the canonical 'damag"):
        apply_chain(harness, [(reason, {})], seed=0)
    # each value in its own words, in another style, is a respelling
    table = {"price": "PRICE", "rating": "Rating"}
    step = Step("enum", ("sort",), values=tuple(table.items()))
    apply_chain(
        harness, [(_editing("search", lambda s: _respelled(s, "sort", table), [step]), {})], seed=0
    )


def test_enum_values_twice_may_take_a_spelling_another_canonical_value_had(harness):
    # BFCL's calculate_genotype_frequency: style upper makes AA, AA_2, AA_3 (clear of the enum
    # it is given), then snake makes aa, aa_2, aa_3, so the canonical 'AA' ends as 'aa', the
    # canonical 'aa''s spelling: each rule's respelling, recorded, not a swap; it was refused,
    # which stopped `hsa augment`. A swap is read against the enum its rule was given.
    from hsa.augment.mapping import Step, apply_steps

    schema = {"type": "string", "enum": ["AA", "Aa", "aa"]}
    params = {"type": "object", "properties": {"genotype": schema}, "required": ["genotype"]}
    tool = Tool("calculate_genotype_frequency", "Frequency of a genotype.", params)
    h = harness.replace(tools=(*harness.tools, tool))
    enum = get_rule("tools.enum_values")
    rewrite, applied = apply_chain(
        h, [(enum, {"style": "upper"}), (enum, {"style": "snake"})], seed=0
    )
    assert [name for name, _, _ in applied] == ["tools.enum_values"] * 2
    new = rewrite.harness.tool("calculate_genotype_frequency")
    assert new.parameters["properties"]["genotype"]["enum"] == ["aa", "aa_2", "aa_3"]
    steps = rewrite.mapping.tools["calculate_genotype_frequency"].steps
    assert [apply_steps({"genotype": v}, steps)["genotype"] for v in schema["enum"]] == [
        "aa",
        "aa_2",
        "aa_3",
    ]
    twice = Recipe(
        (
            RecipeRule("tools.enum_values", 1.0, {"style": "upper"}),
            RecipeRule("tools.enum_values", 1.0, {"style": "snake"}),
        ),
        variants_per_harness=2,
        min_rules=2,
        max_rules=2,
    )
    for variant in plan(h, twice, seed=0):
        assert [name for name, _, _ in variant.rules] == ["tools.enum_values"] * 2
    # a rule that swaps two values of the enum it was given is still refused, and named
    pairs = (("AA", "AA_2"), ("AA_2", "AA"))
    swap = _editing(tool.name, lambda s: s, [Step("enum", ("genotype",), values=pairs)])
    with pytest.raises(
        RuleError, match="gets 'AA_2' at 'genotype' for 'AA', another value of the enum the rule"
    ) as caught:
        apply_chain(h, [(enum, {"style": "upper"}), (swap, {})], seed=0)
    assert caught.value.where == "rule 'tests.edit' (after ['tools.enum_values'])"


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), hide=st.sampled_from(["", "skills", "hooks", "both"]))
def test_variants_a_trajectory_shows_alike_render_it_alike(seed, hide) -> None:
    # what pick passes over must really be what rows show alike: equal shown keys for a
    # trajectory mean equal rendered conversations (tools and protocol included)
    from conftest import make_events, make_harness

    from hsa.augment.planner import Sight, shown_key
    from hsa.harness import render
    from hsa.harness.events import HookFired, SkillLoad

    harness = make_harness()
    hidden = {"": (), "skills": (SkillLoad,), "hooks": (HookFired,)}.get(
        hide, (SkillLoad, HookFired)
    )
    events = [e for e in make_events() if not isinstance(e, hidden)]
    recipe = dataclasses.replace(default_recipe(), variants_per_harness=6)
    context = Context.of(events)
    planned = [canonical_variant(harness), *plan(harness, recipe, seed=seed, context=context)]
    pool = [(v.harness, v.mapping) for v in planned]
    # and each variant with its skills or its hooks as the canonical harness has them: pairs
    # that differ in those parts alone
    for v in planned:
        if not v.mapping.skills:
            pool.append((v.harness.replace(skills=harness.skills), v.mapping))
        if not v.mapping.hooks:
            pool.append((v.harness.replace(hooks=harness.hooks), v.mapping))
    sight = Sight.of(events)
    seen: dict[bytes, tuple] = {}
    for rewritten, mapping in pool:
        conversation = render(map_events(events, mapping), rewritten)
        shown = (conversation, rewritten.protocol.label)
        key = shown_key(rewritten, mapping, sight, source=harness)
        assert seen.setdefault(key, shown) == shown


def test_the_skill_tools_first_parameter_is_what_a_load_shows(harness, events) -> None:
    # the parameter naming the skill is the skill tool's first: reordering its properties
    # renames the argument of every load, which a key of sorted JSON would not see
    from hsa.augment.planner import Sight, shown_key
    from hsa.harness import render
    from hsa.harness.model import Prompt, Protocol, Section

    loader = dataclasses.replace(
        harness.skill_tool,
        parameters={
            "type": "object",
            "properties": {"name": {"type": "string"}, "skill": {"type": "string"}},
        },
    )
    persona = Prompt(sections=(Section("persona", "Persona", "Be kind."),))
    before = harness.replace(skill_tool=loader, prompt=persona, protocol=Protocol("text"))
    props = loader.parameters["properties"]
    swapped = dataclasses.replace(
        loader, parameters={"type": "object", "properties": dict(reversed(props.items()))}
    )
    after = before.replace(skill_tool=swapped)
    assert (before.skill_arg, after.skill_arg) == ("name", "skill")
    assert render(events, before) != render(events, after)
    sight = Sight.of(events)
    assert sight.skills
    assert shown_key(before, IDENTITY, sight) != shown_key(after, IDENTITY, sight)


def test_a_wrapper_made_then_renamed_is_followed(harness) -> None:
    # a tool without parameters: add_optional gives it one, wrap_args wraps it in a new
    # (required) object, rename_params renames that object; calls `{}` become
    # `{"Arguments": {}}`, which the rewritten tool takes
    bare = Tool("ping", "Ping the service.", {"type": "object", "properties": {}})
    harness = harness.replace(tools=(*harness.tools, bare))
    chain = [
        (get_rule("tools.add_optional"), {}),
        (get_rule("tools.wrap_args"), {"fraction": 1.0}),
        (get_rule("tools.rename_params"), {"fraction": 1.0, "style": "pascal"}),
    ]
    wrapped = 0
    for seed in range(10):
        rewrite, _ = apply_chain(harness, chain, seed=seed)
        pinged = rewrite.harness.tools[-1]
        wrapped += bool(pinged.parameters.get("required"))
    assert wrapped  # the case arose


def test_steps_with_one_effect_show_alike_and_steps_with_two_do_not(harness) -> None:
    # a rename after a move shows as the one move; swapped renames do not show alike, though
    # the rewritten schemas are the same (the witnesses are drawn from the canonical tool)
    from hsa.augment.mapping import Step, ToolMap
    from hsa.augment.planner import shown_key

    def tool(*names: str) -> Tool:
        props = {name: {"type": "string"} for name in names}
        return Tool("book", "Book a table.", {"type": "object", "properties": props})

    base = harness.replace(tools=(tool("a", "b"),))

    def key(names: tuple[str, ...], *steps: Step) -> bytes:
        rewritten = base.replace(tools=(tool(*names),))
        mapping = RewriteMapping(tools={"book": ToolMap("book", steps)})
        return shown_key(rewritten, mapping, source=base)

    def move(a: str, b: str) -> Step:
        return Step("move", (a,), (b,))

    assert key(("x", "b"), move("a", "x")) == key(("x", "b"), move("a", "t"), move("t", "x"))
    swapped = key(("x", "y"), move("a", "x"), move("b", "y"))
    assert swapped != key(("x", "y"), move("a", "y"), move("b", "x"))
    assert key(("x", "b"), move("a", "x")) != key(("a", "b"))
    # an entry mapping a tool to itself is no change
    plain = shown_key(base, RewriteMapping(), source=base)
    assert shown_key(base, RewriteMapping(tools={"book": ToolMap("book")}), source=base) == plain


def test_a_mapping_entry_for_a_tool_the_variant_dropped_shows_nothing(harness, events) -> None:
    # tools.add_optional then tools.drop_unused: the parameter added to a tool the variant no
    # longer has is in its mapping, but no row can show it (none calls the tool, which
    # planning sees to: ``_lost``), so pick takes one of the two variants, not both
    from hsa.augment.mapping import Step, ToolMap
    from hsa.augment.planner import Sight, shown_key

    assert "cancel_order" not in Context.of(events).used_tools
    dropped = harness.replace(tools=tuple(t for t in harness.tools if t.name != "cancel_order"))
    added = ToolMap("cancel_order", (Step("add", ("client_note",)),))
    noted = RewriteMapping(tools={"cancel_order": added})
    sight = Sight.of(events)
    for steps in (True, False):
        plain = shown_key(dropped, IDENTITY, sight, source=harness, steps=steps)
        assert shown_key(dropped, noted, sight, source=harness, steps=steps) == plain
    # the same entry counts where the variant keeps the tool
    kept = shown_key(harness, noted, sight, source=harness)
    assert kept != shown_key(harness, IDENTITY, sight, source=harness)

    recipe = dataclasses.replace(default_recipe(), variants_per_trajectory=2)
    both = [
        Variant("a" * 16, harness.id, (("tools.drop_unused", "2", {}),), dropped, IDENTITY),
        Variant(
            "b" * 16,
            harness.id,
            (("tools.add_optional", "2", {}), ("tools.drop_unused", "2", {})),
            dropped,
            noted,
        ),
    ]
    assert len(pick(both, "t1", recipe, harness=harness, events=events)) == 1


@pytest.mark.parametrize("seed", ["0", -1, 1.5, True])
def test_a_seed_that_is_no_seed_is_refused_not_drawn_from(harness, seed) -> None:
    recipe = default_recipe()
    with pytest.raises(RuleError, match="seed must be an integer, 0 or more"):
        plan(harness, recipe, seed=seed)
    variants = plan(harness, recipe, seed=0)
    with pytest.raises(RuleError, match="seed must be an integer, 0 or more"):
        pick(variants, "t1", recipe, harness=harness, seed=seed)


def test_numpy_integers_are_seeds_as_python_integers_are(harness) -> None:
    recipe = default_recipe()
    ids = [v.variant_id for v in plan(harness, recipe, seed=np.int64(3))]
    assert ids == [v.variant_id for v in plan(harness, recipe, seed=3)]


def test_plan_and_pick_refuse_arguments_that_are_not_what_they_name(harness) -> None:
    recipe = default_recipe()
    variants = plan(harness, recipe, seed=0)
    with pytest.raises(RuleError, match=r"harness must be a Harness, got 'h'; hsa.load_harness"):
        plan("h", recipe)
    with pytest.raises(RuleError, match=r"harness must be a Harness, got dict; hsa.load_harness"):
        plan(harness.to_dict(), recipe)
    with pytest.raises(RuleError, match=r"recipe must be a Recipe, got 'r.yaml'; hsa.load_recipe"):
        plan(harness, "r.yaml")
    with pytest.raises(RuleError, match="recipe must be a Recipe, got None"):
        pick(variants, "t1", None, harness=harness)
    with pytest.raises(RuleError, match=r"variants must be a list of Variants .*, got Harness"):
        pick(harness, "t1", recipe)
    with pytest.raises(RuleError, match=r"variants must be a list of Variants .*, got list"):
        pick([harness], "t1", recipe, harness=harness)
    by_id = {v.variant_id: v for v in variants}  # as read_variants gives them
    assert pick(by_id, "t1", recipe, harness=harness) == pick(
        variants, "t1", recipe, harness=harness
    )
    with pytest.raises(RuleError, match="trajectory_id must be a string, got 7"):
        pick(variants, 7, recipe, harness=harness)


def test_a_draw_that_makes_two_hooks_read_alike_is_drawn_again(harness):
    # told apart by their wrappers alone: hooks.wrapper may give both one tag, and then no
    # conversation could tell their firings apart (parse refuses such a message)
    from hsa.harness import Hook
    from hsa.harness.parse import alike_hooks

    twins = tuple(
        Hook(hook_id, "stop", "add_context", "Note: {{ text }}", wrapper=tag)
        for hook_id, tag in (("a", "first"), ("b", "second"))
    )
    h = harness.replace(hooks=twins)
    wrapper = get_rule("hooks.wrapper")
    refused = []
    for seed in range(40):
        try:
            apply_chain(h, [(wrapper, {"allow_none": False})], seed=seed)
        except RuleError as exc:
            refused.append(exc)
    assert refused  # (about one draw in eight)
    assert refused[0].where == "rule 'hooks.wrapper'"
    assert "every message hook 'b' shows read as a message of hook 'a'" in refused[0].message
    recipe = Recipe((RecipeRule("hooks.wrapper", 1.0, {"allow_none": False}),))
    recipe = dataclasses.replace(recipe, variants_per_harness=40, include_canonical=False)
    variants = plan(h, recipe, seed=0)
    assert all(alike_hooks(v.harness.hooks) is None for v in variants)
    assert not any(v.is_canonical for v in variants)  # drawn again, not given up


def _by_position(harness, template="{{ sections[0] }}\n\n{{ sections[4] }}"):
    # a text-protocol prompt whose template takes its fifth section (the output format):
    # under api the tools and output format sections render empty and are left out
    prompt = dataclasses.replace(harness.prompt, template=template)
    return harness.replace(protocol=Protocol("text", doc_format="json"), prompt=prompt)


def test_a_draw_under_which_the_prompt_does_not_render_is_drawn_again(harness):
    h = _by_position(harness)
    assert system_prompt(h)  # (renders as it is)
    to_api = RecipeRule("protocol.switch", 0.5, {"target": "api"})
    recipe = Recipe(
        (RecipeRule("tools.rename", 0.5, {"style": "camel"}), to_api),
        variants_per_harness=8,
        include_canonical=False,
    )
    variants = plan(h, recipe, seed=0)
    dropped = [why for v in variants for why in v.dropped]
    assert dropped  # (about one draw in two)
    assert dropped[0].startswith("rule 'protocol.switch'")  # (after tools.rename, when drawn)
    assert "harness 'acme-support' fail to render: $.prompt.template: " in dropped[0]
    assert "no element 4" in dropped[0]
    assert sum(bool(v.rules) for v in variants) >= 6  # drawn again, not given up
    for variant in variants:
        assert not variant.harness.protocol.is_api
        assert system_prompt(variant.harness)
        assert variant == plan_variant(h, recipe, variant.index, seed=0)


def test_a_plan_no_draw_of_which_renders_the_prompt_is_refused(harness):
    h = _by_position(harness)
    to_api = RecipeRule("protocol.switch", 1.0, {"target": "api"})
    for recipe in (
        Recipe((to_api,), variants_per_harness=3),
        Recipe((RecipeRule("tools.rename", 0.5),), base=(to_api,), variants_per_harness=3),
    ):
        with pytest.raises(PlanError) as caught:
            plan(h, recipe, seed=0)
        assert caught.value.harness_id == "acme-support"
        assert caught.value.message.startswith(
            "rule 'protocol.switch': made the prompt of harness 'acme-support' fail to render: "
            "$.prompt.template: template uses an undefined value at line 3: list object has no "
            "element 4; every draw of rules that changed it did (12 dropped)"
        )


def test_a_prompt_that_does_not_render_unchanged_is_not_the_rules_doing(harness):
    h = _by_position(harness, "{{ sections[9] }}")  # (a harness made in code, unvalidated)
    recipe = Recipe((RecipeRule("protocol.switch", 1.0, {"target": "api"}),))
    variants = plan(h, recipe, seed=0)
    assert all(v.rules and not v.dropped for v in variants[1:])  # left to fail where used


def _nested(depth: int) -> object:
    value: object = 1
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize("depth", [150, MAX_DEPTH + 1, MAX_DEPTH, MAX_DEPTH - MOVED_DOWN])
def test_pick_passes_over_a_call_format_that_cannot_write_the_arguments(
    harness, events, depth
) -> None:
    # Python literals nest at most MAX_DEPTH levels (Python's parser refuses deeper): a
    # trajectory with deeper arguments, as a variant's mapping writes them (tools.wrap_args
    # moves them a level down), gets its other variants, never one that cannot render it
    at = next(i for i, e in enumerate(events) if isinstance(e, ToolCall))
    deep = list(events)
    key = next(iter(events[at].args))  # a declared argument, which wrap_args moves
    deep[at] = dataclasses.replace(events[at], args={**events[at].args, key: _nested(depth)})
    rules = (
        RecipeRule("protocol.switch", 1.0, {"target": "text"}),
        RecipeRule("tools.wrap_args", 0.5, {"fraction": 1.0}),
    )
    recipe = Recipe(rules=rules, variants_per_harness=24, min_rules=1)
    recipe = dataclasses.replace(recipe, variants_per_trajectory=6)
    planned = plan(harness, recipe, context=Context.of(events))

    def renders(variant: Variant) -> bool:
        try:
            render(map_events(deep, variant.mapping), variant.harness)
        except ProtocolError:
            return False
        return True

    unwritable = {v.variant_id for v in planned if not renders(v)}
    assert bool(unwritable) == (depth >= MAX_DEPTH)  # (MAX_DEPTH: once wrapped)
    literal = set()
    for i in range(6):
        chosen = pick(planned, f"t{i}", recipe, harness=harness, events=deep)
        assert chosen and not {v.variant_id for v in chosen} & unwritable
        formats = {v.harness.protocol.call_format for v in chosen if not v.harness.protocol.is_api}
        literal |= formats & {"python", "xml_verbose", "xml_concise"}
        if depth == MAX_DEPTH - MOVED_DOWN:
            assert hazard_of(deep) is None  # most trajectories: nothing to look at
            assert chosen == pick(planned, f"t{i}", recipe, harness=harness, events=events)
    assert bool(literal) == (depth <= MAX_DEPTH)  # the variants that fit it are taken
    passed_over = [pick(planned, f"t{i}", recipe, harness=harness) for i in range(6)]
    assert any({v.variant_id for v in p} & unwritable for p in passed_over) or not unwritable


_ENUM_VALUES = st.one_of(
    st.sampled_from([0, 1, 1.0, -0.0, True, False, None, "1", "a", float("nan")]),
    st.dictionaries(st.sampled_from("ab"), st.sampled_from([1, 1.0, True]), max_size=1),
    st.lists(st.sampled_from([1, True]), max_size=1),
)


@settings(max_examples=100, deadline=None, derandomize=True)
@given(allowed=st.lists(_ENUM_VALUES, max_size=6).map(tuple), value=_ENUM_VALUES)
def test_an_enum_holds_a_value_by_its_index_as_by_json_equality(allowed, value):
    from hsa.augment.planner import _holds, _keys, _same

    assert _holds(_keys(allowed), allowed, value) == any(_same(value, a) for a in allowed)
