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
