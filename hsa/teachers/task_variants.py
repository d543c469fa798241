"""Which harness variants a teacher job runs each task under, and finding a variant by id.

A job draws ``variants_per_task`` variants of the environment's harness per task by the task
id, as ``hsa.augment.pick`` draws them from a pool planned from a recipe and seed, planning
only the variants its tasks visit (``LazyPlan``); the same recipe, seed and tasks always give
the same rollouts. Each variant is planned on its own (planning more keeps the first ones),
which lets ``VariantPool`` (used by ``hsa serve oracle``) find any variant a job with the same
recipe and seed sent, without knowing how many it planned.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np

from hsa.augment.planner import LazyPlan, Variant, canonical_variant, pick_order, walk
from hsa.augment.recipe import Recipe, default_recipe, load_recipe
from hsa.augment.registry import get
from hsa.augment.rule import NO_CONTEXT, Context
from hsa.augment.seeded import id_array
from hsa.envs.base import Environment, Task
from hsa.errors import TeacherError
from hsa.harness.model import Harness

#: the most variants ``VariantPool`` plans while looking for an id (planning costs tens of
#: milliseconds a variant, so an unknown id is expensive once, then remembered)
MAX_POOL = 64


def recipe_from(path: str | Path | None) -> Recipe:
    """The recipe at ``path``, or the default recipe."""
    return default_recipe() if path is None else load_recipe(path)


def trajectory_rules_note(recipe: Recipe, why: str) -> str | None:
    """What a job that plans ``recipe``'s variants without a trajectory (``NO_CONTEXT``) says
    of the rules that depend on one (their ``needs``), which the planner leaves out there;
    ``why`` says why the job has no trajectory. None when the recipe has no such rule."""
    drawn = recipe.base + tuple(r for r in recipe.rules if r.probability > 0)
    names = list(dict.fromkeys(r.rule for r in drawn if get(r.rule).needs))
    if not names:
        return None
    if len(names) == 1:
        return (
            f"the recipe's rule that depends on a trajectory ({names[0]}): {why}; it is "
            "applied where trajectories are augmented: hsa augment, hsa build"
        )
    return (
        f"the recipe's rules that depend on a trajectory ({', '.join(names)}): {why}; these "
        "rules are applied where trajectories are augmented: hsa augment, hsa build"
    )


def task_variants(
    harness: Harness,
    tasks: list[Task],
    recipe: Recipe,
    *,
    seed: int,
    per_task: int,
    include_canonical: bool,
    context: Context = NO_CONTEXT,
) -> dict[str, list[Variant]]:
    """Per task id, the variants its rollouts run under (canonical first when included);
    ``context``: what the tasks' solutions use, for the recipe's trajectory-dependent rules."""
    if per_task < 0:
        raise TeacherError(f"variants_per_task must be 0 or more, got {per_task}")
    canonical = canonical_variant(harness)
    out: dict[str, list[Variant]] = {}
    size = max(recipe.variants_per_harness, per_task)
    planning = dataclasses.replace(recipe, variants_per_harness=size, include_canonical=False)
    pool = LazyPlan(harness, planning, seed=seed, context=context)
    widths = np.full(len(tasks), size if per_task else 0, dtype=np.int64)
    orders = pick_order(id_array([t.id for t in tasks]), widths, seed)
    for task, order in zip(tasks, orders, strict=True):
        chosen = [pool.variant(s) for s in walk(order, pool.content, per_task)]
        if include_canonical or not per_task:
            chosen = [canonical, *chosen]
        out[task.id] = chosen
    return out


def short_tasks(variants: Mapping[str, Sequence[Variant]], per_task: int) -> int:
    """How many tasks ``variants`` (``task_variants``) runs under fewer than ``per_task``
    drawn variants, the canonical harness aside: the recipe drew too few for them that change
    the harness and differ from each other (``walk`` passes over the others)."""
    drawn = (sum(not v.is_canonical for v in chosen) for chosen in variants.values())
    return sum(n < per_task for n in drawn)


def env_task_variants(
    env: Environment,
    tasks: Sequence[Task],
    recipe: Recipe,
    *,
    seed: int,
    per_task: int,
    include_canonical: bool,
) -> dict[str, list[Variant]]:
    """``task_variants`` of each task under its own harness: an imported corpus (BFCL) has a
    harness per task, and each group of tasks under one harness draws from that harness."""
    by_harness: dict[str, tuple[Harness, list[Task]]] = {}
    for task in tasks:
        harness = env.harness_for(task)
        by_harness.setdefault(harness.id, (harness, []))[1].append(task)
    out: dict[str, list[Variant]] = {}
    for harness, group in by_harness.values():
        out |= task_variants(
            harness,
            group,
            recipe,
            seed=seed,
            per_task=per_task,
            include_canonical=include_canonical,
        )
    return out


def solution_context(env: Environment, task: Task) -> Context:
    """What ``task``'s reference solution uses: the context ``hsa eval`` plans a recipe's
    trajectory-dependent rules (``tools.drop_unused`` and the like) with, per task (with the
    arguments its calls use that their schemas do not declare, which no rule's new parameter
    may be named)."""
    return Context.of(env.solve(task).events, env.harness_for(task))


class VariantPool:
    """Variants of one harness under one recipe and seed, planned as far as a lookup needs.

    ``context_of``, when given, says what a task's trajectory uses (``solution_context``):
    ``for_tasks`` then also finds the variants a job planned with a task's context, as
    ``hsa eval`` plans a recipe's trajectory-dependent rules."""

    def __init__(
        self,
        harness: Harness,
        recipe: Recipe,
        *,
        seed: int,
        max_size: int = MAX_POOL,
        context: Context = NO_CONTEXT,
        context_of: Callable[[Task], Context] | None = None,
    ):
        self.harness = harness
        self.recipe = dataclasses.replace(recipe, include_canonical=False, seed=seed)
        self.seed = seed
        self.max_size = max_size
        self.canonical = canonical_variant(harness)
        self._lazy = LazyPlan(harness, self.recipe, seed=seed, context=context)
        self._planned: list[Variant] = []
        self._by_id: dict[str, Variant] = {}
        self._unknown: set[str] = set()
        self._context_of = context_of
        self._by_context: dict[str, VariantPool] = {}  # by (base rules alone, context)

    def _plan(self, size: int) -> None:
        for index in range(len(self._planned), size):
            variant = self._lazy.variant(index)
            self._planned.append(variant)
            self._by_id[variant.variant_id] = variant

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

    def for_tasks(self, variant_id: str, tasks: Sequence[Task]) -> Variant | None:
        """The variant ``variant_id`` (``self(variant_id)``), or else one ``hsa eval`` plans
        otherwise: its canonical episodes under the recipe's base rules alone, and, with
        ``context_of``, a recipe's trajectory-dependent rules planned with the context of one
        of ``tasks`` (the tasks the request may be of). An id names one harness wherever it
        was planned (``Variant``), so the first of these that has it has the one sent."""
        found = self(variant_id)
        if found is not None:
            return found
        recipes = [self.recipe]
        if self.recipe.base and self.recipe.rules:
            recipes.append(dataclasses.replace(self.recipe, rules=(), min_rules=0))
        contexts = [NO_CONTEXT]
        if self._context_of is not None and self.recipe.needs:
            contexts += [self._context_of(task) for task in tasks]
        for based, recipe in enumerate(recipes):
            for context in contexts:
                if not based and context is NO_CONTEXT:
                    continue  # this pool
                key = json.dumps([based, context.key()], sort_keys=True)
                pool = self._by_context.get(key)
                if pool is None:
                    pool = VariantPool(
                        self.harness,
                        recipe,
                        seed=self.seed,
                        max_size=self.max_size,
                        context=context,
                    )
                    self._by_context[key] = pool
                found = pool(variant_id)
                if found is not None:
                    return found
        return None
