"""Skill-identifier rules: rename skill ids (styles, random tokens, synonyms) and namespace them.

A skill id is what the catalogue lists and what a skill load passes to the skill tool, so the
mapping's ``skills`` table carries skill loads; mentions of the id in skill contents, the
prompt and descriptions are replaced token-aware, and an ``enum`` of skill ids on the skill
tool's parameter follows.
"""

from __future__ import annotations

import dataclasses
import random
from typing import Any

from hsa.augment.banks import synonyms
from hsa.augment.free_text import replace_in_harness
from hsa.augment.mapping import RewriteMapping
from hsa.augment.names import (
    ID_NAME,
    draw_style,
    fresh_names,
    random_token,
    restyle,
    style_param,
    synonym_name,
    vocabulary,
)
from hsa.augment.param_schemas import copy_schema
from hsa.augment.registry import rule
from hsa.augment.rule import DRAWS, Context, Rewrite
from hsa.harness.model import Harness

ID_STYLES = ["random", "snake", "camel", "pascal", "kebab", "synonym"]

#: the namespaces and separators ``skill_ids.namespace`` draws from
SKILL_NAMESPACES = ["acme", "team", "org", "plugin", "local", "shared", "core", "user"]
SKILL_SEPARATORS = [":", ".", "-", "_"]


def rename_skills(harness: Harness, table: dict[str, str]) -> Rewrite:
    """Apply a skill-id table everywhere a skill id lives."""
    table = {k: v for k, v in table.items() if k != v}
    if not table:
        return Rewrite(harness)
    renamed = replace_in_harness(harness, table, phrases=table.keys())  # ids read as phrases
    skills = [
        dataclasses.replace(
            s,
            id=table.get(s.id, s.id),
            name=table.get(s.id, s.id) if s.name == s.id else s.name,
        )
        for s in renamed.skills
    ]
    skill_tool = renamed.skill_tool
    if skill_tool is not None and harness.skill_arg is not None:
        schema = copy_schema(skill_tool.parameters)
        arg = (schema.get("properties") or {}).get(harness.skill_arg)
        if isinstance(arg, dict) and isinstance(arg.get("enum"), list):
            arg["enum"] = [table.get(v, v) if isinstance(v, str) else v for v in arg["enum"]]
        skill_tool = dataclasses.replace(skill_tool, parameters=schema)
    mapping = RewriteMapping(skills=table, text=tuple(table.items()))
    return Rewrite(renamed.replace(skills=skills, skill_tool=skill_tool), mapping)


@rule(
    "skill_ids.rename",
    version="4",
    params={
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "style": style_param(ID_STYLES, "Random token, a case style, or synonyms from a bank.")
        },
    },
)
def rename(harness: Harness, rng: random.Random, params: dict[str, Any], context: Context):
    """Rename skill ids: random tokens, snake/camel/Pascal/kebab case, or synonyms.

    New ids match the harness schema's id pattern, are unique, and never equal another skill's
    id, old or new (``returns`` and ``returns-policy`` stay apart).
    """
    bank = synonyms()
    ids = [s.id for s in harness.skills]
    style = draw_style(params["style"], ID_STYLES, ids, bank, rng)
    # a synonym is never a word the harness names something else with
    avoid = vocabulary(harness) if style == "synonym" else frozenset()
    claimed: dict[str, str] = {}  # nor one another word of this rewrite took

    def propose(skill_id: str) -> str:
        if style == "random":
            return f"skill-{random_token(rng)}"
        if style == "synonym":
            return synonym_name(skill_id, bank, rng, avoid, claimed)
        return restyle(skill_id, style)

    table = fresh_names([s.id for s in harness.skills], propose, pattern=ID_NAME)
    return rename_skills(harness, table)


@rule(
    "skill_ids.namespace",
    version="2",
    params={
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "prefix": {
                "type": ["string", "null"],
                "pattern": r"^[A-Za-z][A-Za-z0-9]{0,15}$(?!\n)",
                "default": None,
                "description": "The namespace; null draws one from a bank.",
                DRAWS: SKILL_NAMESPACES,
            },
            "separator": {
                "enum": [":", ".", "-", "_", "/", "any"],
                "default": "any",
                "description": "Between namespace and id ('/' is written as ':').",
                DRAWS: SKILL_SEPARATORS,
            },
        },
    },
)
def namespace(harness: Harness, rng: random.Random, params: dict[str, Any], context: Context):
    """Prefix skill ids with a namespace (``acme:returns``), as plugin marketplaces do."""
    prefix = params["prefix"] or rng.choice(SKILL_NAMESPACES)
    sep = params["separator"] if params["separator"] != "any" else rng.choice(SKILL_SEPARATORS)
    sep = ":" if sep == "/" else sep
    table = fresh_names(
        [s.id for s in harness.skills], lambda i: f"{prefix}{sep}{i}", pattern=ID_NAME
    )
    return rename_skills(harness, table)
