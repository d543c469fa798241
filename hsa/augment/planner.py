"""The variant planner: from a harness and a recipe, the harness variants to render under.

Planning is small and deterministic (same harness, recipe, seed and context give the same
variants, ids included); the engine then applies each variant's mapping to trajectories in
bulk. A recipe with a trajectory-dependent rule (``Recipe.needs``) is planned per trajectory
(or per group of trajectories with the same ``Context``): without a context such rules are
left out of the draw's application, never guessed.

Which variants a trajectory is rendered under is decided here too, by hashing its id:
``pick_slots`` for a column of ids (the augment job), ``pick`` for one trajectory, with the
same candidates (``distinct``) and the same draw, so ``plan`` then ``pick`` predicts exactly
what ``hsa augment`` writes.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping as MappingABC
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from hsa.augment.mapping import RewriteMapping
from hsa.augment.recipe import Recipe, RecipeRule
from hsa.augment.registry import get
from hsa.augment.rule import NO_CONTEXT, Context, Rewrite, Rule
from hsa.augment.seeded import derive_seed, fnv1a, generator, splitmix64
from hsa.errors import RuleError
from hsa.harness.model import Harness
from hsa.harness.validate import document_problems

_REDRAWS = 4  # attempts at a variant that differs from the ones already planned


@dataclass(frozen=True, slots=True)
class Variant:
    """One planned harness variant: the rules applied, the rewritten harness and its mapping.

    ``rules`` holds ``(name, version, params)`` with the parameters the rule ran with (defaults
    filled in). ``variant_id`` is a stable hash of the harness id and version, the rules, their
    parameters, the variant's seed and, for trajectory-dependent rules, the context.
    """

    variant_id: str
    harness_id: str
    rules: tuple[tuple[str, str, MappingABC[str, Any]], ...]
    harness: Harness
    mapping: RewriteMapping
    seed: int = 0
    index: int = 0

    @property
    def is_canonical(self) -> bool:
        return not self.rules

    def lineage(self) -> dict[str, Any]:
        """What a dataset row records about the variant it was rendered under."""
        return {
            "variant_id": self.variant_id,
            "harness_id": self.harness_id,
            "seed": self.seed,
            "rules": [{"name": n, "version": v, "params": dict(p)} for n, v, p in self.rules],
        }


def context_through(context: Context, mapping: RewriteMapping) -> Context:
    """``context`` with canonical names turned into ``mapping``'s surface names."""
    tools = context.used_tools
    skills = context.used_skills
    return Context(
        None if tools is None else frozenset(mapping.tool_name(t) for t in tools),
        None if skills is None else frozenset(mapping.skills.get(s, s) for s in skills),
    )


def apply_chain(
    harness: Harness,
    chain: Sequence[tuple[Rule, MappingABC[str, Any]]],
    *,
    seed: int,
    context: Context = NO_CONTEXT,
) -> tuple[Rewrite, tuple[tuple[str, str, dict[str, Any]], ...]]:
    """Apply rules in order, each with its own generator derived from ``seed`` and its position.

    Returns the composed rewrite and the ``(name, version, params)`` actually applied. The
    result is validated as a harness document; an invalid one is the rule's bug.
    """
    rewrite = Rewrite(harness)
    applied: list[tuple[str, str, dict[str, Any]]] = []
    stages: list[Harness] = []
    for position, (item, params) in enumerate(chain):
        resolved = item.resolve_params(params)
        rng = generator("rule", seed, position, item.name)
        step = item.apply(rewrite.harness, rng, resolved, context_through(context, rewrite.mapping))
        rewrite = rewrite.then(step)
        applied.append((item.name, item.version, resolved))
        stages.append(rewrite.harness)
    # Validating once at the end keeps planning cheap; only when the result is invalid are the
    # intermediate harnesses checked, to name the first rule that broke it.
    if stages and document_problems(rewrite.harness.to_dict()):
        for index, stage in enumerate(stages):
            problems = document_problems(stage.to_dict())
            if problems:
                raise RuleError(
                    f"produced an invalid harness: {problems[0]}",
                    where=f"rule {applied[index][0]!r} (after {[a[0] for a in applied[:index]]})",
                )
    return rewrite, tuple(applied)


def variant_id(
    harness: Harness, rules: Sequence[tuple[str, str, MappingABC[str, Any]]], seed: int, ctx: Any
) -> str:
    key = {
        "harness": [harness.id, harness.version],
        "rules": [[n, v, dict(p)] for n, v, p in rules],
        "seed": seed,
        "context": ctx,
    }
    text = json.dumps(key, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def canonical_variant(harness: Harness) -> Variant:
    """The unchanged harness as a variant (no rules, identity mapping)."""
    return Variant(variant_id(harness, (), 0, None), harness.id, (), harness, RewriteMapping())


def _draw(recipe: Recipe, rng, eligible: set[str]) -> list[RecipeRule]:
    # Every rule gets its draw, eligible or not, so a context never shifts the other draws.
    drawn = [i for i, r in enumerate(recipe.rules) if rng.random() < r.probability]
    chosen = [i for i in drawn if recipe.rules[i].rule in eligible]
    pool = [
        i
        for i, r in enumerate(recipe.rules)
        if i not in chosen and r.rule in eligible and r.probability > 0
    ]
    while len(chosen) < recipe.min_rules and pool:
        extra = rng.choices(pool, weights=[recipe.rules[i].probability for i in pool])[0]
        pool.remove(extra)
        chosen.append(extra)
    if recipe.max_rules is not None and len(chosen) > recipe.max_rules:
        chosen = rng.sample(chosen, recipe.max_rules)
    return [recipe.rules[i] for i in sorted(chosen)]


def plan(
    harness: Harness,
    recipe: Recipe,
    *,
    seed: int | None = None,
    context: Context = NO_CONTEXT,
) -> list[Variant]:
    """The variants of ``harness`` under ``recipe`` (``seed`` defaults to the recipe's).

    Returns ``recipe.variants_per_harness`` variants, preceded by the canonical one when
    ``recipe.include_canonical``. A variant whose redraws found no rewrite unlike the earlier
    ones is kept as drawn (so the count and every later variant stay fixed): a harness that
    cannot have that many distinct variants yields repeats, which the augment job drops and
    reports. Rules whose ``needs`` the context does not provide are not
    applied (plan with ``context=Context.of(events)`` to include them).
    """
    seed = recipe.seed if seed is None else seed
    eligible = {r.rule for r in recipe.rules if all(context.has(n) for n in get(r.rule).needs)}
    out: list[Variant] = [canonical_variant(harness)] if recipe.include_canonical else []
    seen = {(harness.to_json(), RewriteMapping().to_json())} if recipe.include_canonical else set()
    for index in range(recipe.variants_per_harness):
        for attempt in range(_REDRAWS):
            variant_seed = derive_seed("variant", seed, harness.id, index, attempt)
            chosen = _draw(recipe, generator("draw", variant_seed), eligible)
            chain = [(get(r.rule), r.params) for r in chosen]
            rewrite, applied = apply_chain(harness, chain, seed=variant_seed, context=context)
            key = (rewrite.harness.to_json(), rewrite.mapping.to_json())
            if key not in seen or attempt == _REDRAWS - 1:
                break
        seen.add(key)
        uses = any(get(n).needs for n, _, _ in applied)
        vid = variant_id(harness, applied, variant_seed, context.key() if uses else None)
        out.append(
            Variant(vid, harness.id, applied, rewrite.harness, rewrite.mapping, variant_seed, index)
        )
    return out


def distinct(harness: Harness, planned: Sequence[Variant]) -> list[Variant]:
    """The variants a trajectory may be rendered under: ``planned`` without the canonical
    variant, rewrites of ``harness`` that change nothing, and repeats (the first kept).

    ``plan`` keeps a repeat when its redraws found nothing new (so that later variants stay
    fixed), and rendering one trajectory twice the same way would only duplicate rows.
    """
    seen = {(harness.to_json(), RewriteMapping().to_json())}
    out = []
    for variant in planned:
        key = (variant.harness.to_json(), variant.mapping.to_json())
        if not variant.is_canonical and key not in seen:
            seen.add(key)
            out.append(variant)
    return out


def pick_slots(ids: pa.Array, available: np.ndarray, k: int, seed: int) -> np.ndarray:
    """For each id, ``min(k, available)`` distinct slots out of ``range(available)``.

    Column-wise: slot ``s`` of an id gets the key ``splitmix64(fnv1a(id) ^ derive_seed("pick",
    seed, s))`` and the id takes its ``k`` smallest keys, so a pick depends on the id, the
    seed and the number available, never on the other ids of the batch. Returns an ``(n, k)``
    array of slots in increasing order, -1 where fewer are available; the caller reports
    those ids (the augment job counts them in its manifest), since a row that silently gets
    fewer variants than asked reads as a smaller dataset than configured.
    """
    n = len(ids)
    width = int(available.max()) if n else 0
    if width == 0 or k == 0:
        return np.full((n, k), -1, dtype=np.int64)
    base = fnv1a(ids)
    salts = np.array([derive_seed("pick", seed, s) for s in range(width)], dtype=np.uint64)
    keys = splitmix64(base[:, None] ^ salts[None, :])
    keys[np.arange(width)[None, :] >= available[:, None]] = np.iinfo(np.uint64).max
    width_k = min(k, width)
    order = np.argsort(keys, axis=1, kind="stable")[:, :width_k]  # the smallest keys
    taken = np.arange(width_k)[None, :] < np.minimum(available, width_k)[:, None]
    big = np.iinfo(np.int64).max
    chosen = np.where(taken, order, big)
    chosen.sort(axis=1)
    out = np.full((n, k), -1, dtype=np.int64)
    out[:, :width_k] = np.where(chosen == big, -1, chosen)
    return out


def pick(
    variants: Sequence[Variant],
    trajectory_id: str,
    recipe: Recipe,
    *,
    seed: int | None = None,
    harness: Harness | None = None,
) -> list[Variant]:
    """The variants one trajectory is rendered under, exactly as ``hsa augment`` picks them.

    The canonical variant first when ``variants`` hold one, then ``variants_per_trajectory``
    of the ``distinct`` rewrites (fewer when fewer are distinct), drawn by the trajectory id
    with ``pick_slots``. ``harness`` is the harness ``variants`` were planned from; it may be
    left out when they hold its canonical variant (``include_canonical``), which carries it.
    """
    seed = recipe.seed if seed is None else seed
    canonical = [v for v in variants if v.is_canonical][:1]
    if harness is None:
        if not canonical:
            raise RuleError(
                "pick needs the harness the variants were planned from (harness=...) when "
                "they hold no canonical variant, to leave out rewrites that change nothing"
            )
        harness = canonical[0].harness
    candidates = distinct(harness, variants)
    slots = pick_slots(
        pa.array([trajectory_id], pa.string()),
        np.array([len(candidates)], dtype=np.int64),
        recipe.variants_per_trajectory,
        seed,
    )[0]
    return canonical + [candidates[int(s)] for s in slots if s >= 0]
