"""Which harness variants a teacher job runs each task under, and finding a variant by id.

A job plans one pool of variants of the environment's harness from a recipe and seed, then
draws ``variants_per_task`` of them per task by the task id (``hsa.augment.pick``), so the
same recipe, seed and tasks always give the same rollouts. Planning is prefix-stable (planning
more variants keeps the first ones), which lets ``VariantPool`` (used by ``hsa serve oracle``)
find any variant a job with the same recipe and seed sent, without knowing how many it planned.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from hsa.augment.planner import Variant, canonical_variant, pick, plan
from hsa.augment.recipe import Recipe, default_recipe, load_recipe
from hsa.envs.base import Task
from hsa.errors import TeacherError
from hsa.harness.model import Harness

#: the most variants ``VariantPool`` plans while looking for an id (planning costs tens of
#: milliseconds a variant, so an unknown id is expensive once, then remembered)
MAX_POOL = 64


def recipe_from(path: str | Path | None) -> Recipe:
    """The recipe at ``path``, or the default recipe."""
    return default_recipe() if path is None else load_recipe(path)


def task_variants(
    harness: Harness,
    tasks: list[Task],
    recipe: Recipe,
    *,
    seed: int,
    per_task: int,
    include_canonical: bool,
) -> dict[str, list[Variant]]:
    """Per task id, the variants its rollouts run under (canonical first when included)."""
    if per_task < 0:
        raise TeacherError(f"variants_per_task must be 0 or more, got {per_task}")
    canonical = canonical_variant(harness)
    out: dict[str, list[Variant]] = {}
    pool: list[Variant] = []
    if per_task:
        size = max(recipe.variants_per_harness, per_task)
        planning = dataclasses.replace(
            recipe, variants_per_harness=size, include_canonical=False, seed=seed
        )
        pool = plan(harness, planning, seed=seed)
    drawing = dataclasses.replace(recipe, variants_per_trajectory=per_task, seed=seed)
    for task in tasks:
        chosen = pick(pool, task.id, drawing, seed=seed, harness=harness) if per_task else []
        if include_canonical or not per_task:
            chosen = [canonical, *chosen]
        out[task.id] = chosen
    return out


class VariantPool:
    """Variants of one harness under one recipe and seed, planned as far as a lookup needs."""

    def __init__(self, harness: Harness, recipe: Recipe, *, seed: int, max_size: int = MAX_POOL):
        self.harness = harness
        self.recipe = dataclasses.replace(recipe, include_canonical=False, seed=seed)
        self.seed = seed
        self.max_size = max_size
        self.canonical = canonical_variant(harness)
        self._planned: list[Variant] = []
        self._by_id: dict[str, Variant] = {}
        self._unknown: set[str] = set()

    def _plan(self, size: int) -> None:
        planning = dataclasses.replace(self.recipe, variants_per_harness=size)
        self._planned = plan(self.harness, planning, seed=self.seed)
        self._by_id = {v.variant_id: v for v in self._planned}

    def warm(self) -> None:
        """Plan the recipe's own number of variants now rather than at the first lookup."""
        if not self._planned:
            self._plan(max(self.recipe.variants_per_harness, 1))

    def __call__(self, variant_id: str) -> Variant | None:
        if variant_id == self.canonical.variant_id:
            return self.canonical
        if variant_id in self._by_id:
            return self._by_id[variant_id]
        if variant_id in self._unknown:
            return None
        size = max(len(self._planned), self.recipe.variants_per_harness, 8)
        while size <= self.max_size:
            if size > len(self._planned):
                self._plan(size)
                if variant_id in self._by_id:
                    return self._by_id[variant_id]
            size *= 2
        self._unknown.add(variant_id)
        return None
