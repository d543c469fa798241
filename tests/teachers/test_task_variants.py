"""Variants per task: drawn deterministically; the server's pool finds them by id."""

from __future__ import annotations

from hsa.augment.recipe import default_recipe
from hsa.teachers.task_variants import VariantPool, task_variants


def test_variants_per_task_are_deterministic_and_distinct(env):
    tasks = env.tasks()[:5]
    recipe = default_recipe()
    first = task_variants(env.harness(), tasks, recipe, seed=3, per_task=2, include_canonical=False)
    again = task_variants(env.harness(), tasks, recipe, seed=3, per_task=2, include_canonical=False)
    assert {k: [v.variant_id for v in vs] for k, vs in first.items()} == {
        k: [v.variant_id for v in vs] for k, vs in again.items()
    }
    for chosen in first.values():
        assert len(chosen) == 2 and len({v.variant_id for v in chosen}) == 2
        assert not any(v.is_canonical for v in chosen)


def test_zero_variants_means_the_canonical_harness(env):
    tasks = env.tasks()[:2]
    out = task_variants(
        env.harness(), tasks, default_recipe(), seed=0, per_task=0, include_canonical=False
    )
    assert all([v.is_canonical for v in vs] == [True] for vs in out.values())
    with_canonical = task_variants(
        env.harness(), tasks, default_recipe(), seed=0, per_task=1, include_canonical=True
    )
    assert all(vs[0].is_canonical and len(vs) == 2 for vs in with_canonical.values())


def test_the_pool_finds_every_variant_a_job_drew(env):
    tasks = env.tasks()[:20]
    drawn = task_variants(
        env.harness(), tasks, default_recipe(), seed=5, per_task=3, include_canonical=False
    )
    pool = VariantPool(env.harness(), default_recipe(), seed=5, max_size=8)
    for chosen in drawn.values():
        for variant in chosen:
            found = pool(variant.variant_id)
            assert found is not None and found.harness == variant.harness
    assert pool("0000000000000000") is None  # planned the most it may, not found
    assert pool(pool.canonical.variant_id).is_canonical


def test_the_pool_finds_the_variants_eval_plans_with_a_tasks_context(env):
    """``hsa eval`` plans a recipe's trajectory-dependent rules with what each task's solution
    uses; ``hsa serve oracle`` finds those variants through the request's task."""
    from hsa.augment.recipe import Recipe, RecipeRule
    from hsa.augment.rule import NO_CONTEXT
    from hsa.teachers.oracle import OracleResponder
    from hsa.teachers.task_variants import solution_context
    from tests.teachers.test_oracle import body_for, opening

    recipe = Recipe(
        rules=(
            RecipeRule("tools.drop_unused", 1.0, {"keep": 2}),
            RecipeRule("tools.rename", 1.0, {}),
        ),
        min_rules=2,
        variants_per_harness=8,
    )
    task = next(t for t in env.tasks() if t.kind == "single_tool")
    context = solution_context(env, task)
    assert context != NO_CONTEXT
    [variant] = task_variants(
        env.harness(),
        [task],
        recipe,
        seed=1,
        per_task=1,
        include_canonical=False,
        context=context,
    )[task.id]
    assert len(variant.harness.tools) < len(env.harness().tools)  # drop_unused ran
    plain = VariantPool(env.harness(), recipe, seed=1)
    assert plain.for_tasks(variant.variant_id, [task]) is None
    pool = VariantPool(env.harness(), recipe, seed=1, context_of=lambda t: solution_context(env, t))
    found = pool.for_tasks(variant.variant_id, [task])
    assert found is not None and found.harness == variant.harness
    message, _ = OracleResponder(env, variants=pool)(body_for(opening(env, task), variant))
    [call] = message["tool_calls"]
    assert call["function"]["name"] in {t.name for t in variant.harness.tools}


def test_the_pool_finds_a_variant_of_the_recipes_base_rules_alone(env):
    """``hsa eval``'s canonical episodes under a recipe with base rules: the base alone."""
    import dataclasses

    from hsa.augment.recipe import Recipe, RecipeRule
    from hsa.teachers.task_variants import solution_context

    recipe = Recipe(
        base=(RecipeRule("tools.drop_unused", 1.0, {"keep": 1}),),
        rules=(RecipeRule("tools.rename", 1.0, {}),),
        variants_per_harness=8,
    )
    base_only = dataclasses.replace(recipe, rules=(), min_rules=0)
    task = env.tasks()[3]
    [variant] = task_variants(
        env.harness(),
        [task],
        base_only,
        seed=2,
        per_task=1,
        include_canonical=False,
        context=solution_context(env, task),
    )[task.id]
    assert [name for name, _, _ in variant.rules] == ["tools.drop_unused"]
    pool = VariantPool(env.harness(), recipe, seed=2, context_of=lambda t: solution_context(env, t))
    assert pool(variant.variant_id) is None
    found = pool.for_tasks(variant.variant_id, [task])
    assert found is not None and found.harness == variant.harness


def test_without_the_task_id_a_context_variant_is_found_past_hook_notes(env):
    """A client that sends only the variant id: the task is the first user message that
    begins one, though the variant sends a hook note as a user message before it."""
    from hsa.augment.recipe import Recipe, RecipeRule
    from hsa.teachers.oracle import OracleResponder
    from hsa.teachers.task_variants import solution_context

    task = env.tasks()[0]
    context = solution_context(env, task)
    recipe = Recipe(
        rules=(RecipeRule("tools.drop_unused", 1.0, {"keep": 1}),), variants_per_harness=4
    )
    [variant] = task_variants(
        env.harness(), [task], recipe, seed=0, per_task=1, include_canonical=False, context=context
    )[task.id]
    pool = VariantPool(env.harness(), recipe, seed=0, context_of=lambda t: solution_context(env, t))
    note = {"role": "user", "content": "<system_note>\nStream clock: 10:00\n</system_note>"}
    first = {"role": "user", "content": env.turns(task)[0]}
    responder = OracleResponder(env, variants=pool)
    assert responder.variant({"hsa_variant": variant.variant_id}, [note, first]) == variant


def test_an_id_the_pool_finds_names_the_harness_eval_planned(env):
    """``hsa eval`` plans with a task's context, where tools.distractors may add nothing (a
    solution that calls no tool, as some of tau2's); ``hsa serve oracle`` looks the id up
    without the context first: the variant it finds is the one eval sent, not another
    harness under the same id."""
    from hsa.augment.recipe import Recipe, RecipeRule
    from hsa.augment.rule import Context

    recipe = Recipe(
        rules=(
            RecipeRule("tools.distractors", 0.5),
            RecipeRule("tools.rename", 0.5),
            RecipeRule("tools.shuffle", 0.5),
        ),
        variants_per_harness=8,
    )
    refusal = Context(frozenset(), frozenset())
    task = env.tasks()[0]
    planned = task_variants(
        env.harness(), [task], recipe, seed=0, per_task=8, include_canonical=False, context=refusal
    )[task.id]
    pool = VariantPool(env.harness(), recipe, seed=0, context_of=lambda t: refusal)
    for variant in planned:
        found = pool.for_tasks(variant.variant_id, [task])
        assert found is not None and found.key() == variant.key(), variant
