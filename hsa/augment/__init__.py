"""Augmentation: task-preserving rewrites of harnesses, and the mappings they imply.

The public surface: ``Rule``/``Rewrite``/``Context`` and the ``rule`` decorator to write rules;
``all_rules``/``get_rule`` to find them and ``register_rule`` to add a ``Rule`` built by hand;
``Recipe`` and ``plan`` to draw variants; ``RewriteMapping`` and ``map_events`` to apply them
to canonical events (the engine does it in bulk).
"""

from hsa.augment.invert import invert as invert
from hsa.augment.mapping import (
    IDENTITY,
    ArgumentClash,
    RewriteMapping,
    Step,
    ToolMap,
    apply_steps,
    map_events,
)
from hsa.augment.planner import Variant, apply_chain, canonical_variant, pick, plan
from hsa.augment.recipe import Recipe, RecipeRule, default_recipe, load_recipe, loads_recipe
from hsa.augment.registry import ENTRY_POINT_GROUP, all_rules, rule
from hsa.augment.registry import get as get_rule
from hsa.augment.registry import register as register_rule
from hsa.augment.rule import FAMILIES, NO_CONTEXT, Context, Rewrite, Rule, compose

__all__ = [
    "ENTRY_POINT_GROUP",
    "FAMILIES",
    "IDENTITY",
    "NO_CONTEXT",
    "ArgumentClash",
    "Context",
    "Recipe",
    "RecipeRule",
    "Rewrite",
    "RewriteMapping",
    "Rule",
    "Step",
    "ToolMap",
    "Variant",
    "all_rules",
    "apply_chain",
    "apply_steps",
    "canonical_variant",
    "compose",
    "default_recipe",
    "get_rule",
    "load_recipe",
    "loads_recipe",
    "map_events",
    "pick",
    "plan",
    "register_rule",
    "rule",
]
