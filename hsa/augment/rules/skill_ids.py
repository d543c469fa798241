"""Skill-identifier rules: rename skill ids (styles, random tokens, synonyms) and namespace them.

A skill id is what the catalogue lists and what a skill load passes to the skill tool, so the
mapping's ``skills`` table carries skill loads; mentions of the id in skill contents, the
prompt and descriptions are replaced token-aware, and an ``enum`` of skill ids on the skill
tool's parameter follows.
"""

from __future__ import annotations

import dataclasses
import random
import re
from collections.abc import Mapping, Set
from typing import Any

from hsa.augment.banks import synonyms
from hsa.augment.free_text import replace_in_harness
from hsa.augment.mapping import RewriteMapping
from hsa.augment.names import (
    ID_NAME,
    draw_style,
    fresh_names,
    proposer,
    style_param,
)
from hsa.augment.param_schemas import copy_schema
from hsa.augment.registry import rule
from hsa.augment.rule import DRAWS, MEANS, Context, Rewrite
from hsa.harness.importers.skills import spec_name
from hsa.harness.model import Harness

ID_STYLES = ["random", "snake", "camel", "pascal", "kebab", "synonym"]

#: the namespaces and separators ``skill_ids.namespace`` draws from
SKILL_NAMESPACES = ["acme", "team", "org", "plugin", "local", "shared", "core", "user"]
SKILL_SEPARATORS = [":", ".", "-", "_"]


def spec_name_for(skill_id: str, taken: Set[str]) -> str | None:
    """A name the Agent Skills specification allows for a skill renamed ``skill_id``, none in
    ``taken``: the id itself where it is one, else its lower-case letters and digits joined by
    single hyphens (``acme:FrontendDesign`` -> ``acme-frontenddesign``), with ``-2``, ``-3``...
    after it where that is taken; None where the id has no such form."""
    name = _spec_form(skill_id)
    return None if name is None else _unused(name, taken)


def _spec_form(skill_id: str) -> str | None:
    if spec_name(skill_id):
        return skill_id
    name = re.sub(r"[^a-z0-9]+", "-", skill_id.lower()).strip("-")[:64].rstrip("-")
    return name if spec_name(name) else None


def _unused(name: str, taken: Set[str]) -> str:
    fresh, n = name, 2
    while fresh in taken:
        suffix = f"-{n}"
        fresh, n = name[: 64 - len(suffix)].rstrip("-") + suffix, n + 1
    return fresh


def _names(harness: Harness, table: dict[str, str]) -> dict[str, str]:
    """Skill id -> its name after a rename: a skill named by its id is named by its new one
    (``spec_name_for``), apart from every other name after the rename (those that stay, and
    those given before it), and keeps its name where the new id has no spec-legal form."""
    names = {s.id: s.name for s in harness.skills}
    forms = {
        s.id: form
        for s in harness.skills
        if s.id in table and s.name == s.id and (form := _spec_form(table[s.id])) is not None
    }
    taken = {name for skill_id, name in names.items() if skill_id not in forms}
    for skill_id, form in forms.items():
        names[skill_id] = _unused(form, taken)
        taken.add(names[skill_id])
    return names


def _rekeyed(metadata: Mapping[str, Any], table: dict[str, str]) -> dict[str, Any]:
    """``metadata`` with the entries an import keys by skill keyed by the new skill ids:
    ``skill_id_map`` (id -> the folder name it was made from, where that was no legal id) and
    ``bundled_files`` (by folder name, which is the id but in ``skill_id_map``; by id once
    renamed)."""
    out = dict(metadata)
    id_map = out.get("skill_id_map")
    folders: dict[str, str] = {}  # folder name -> the new id of the id it was made
    if isinstance(id_map, dict):
        folders = {  # (only those renamed: a skill the rule leaves keeps its folder's key)
            f: table[i] for i, f in id_map.items() if isinstance(f, str) and i in table
        }
        out["skill_id_map"] = {table.get(k, k): v for k, v in id_map.items()}
    bundled = out.get("bundled_files")
    if isinstance(bundled, dict):
        out["bundled_files"] = {folders.get(k, table.get(k, k)): v for k, v in bundled.items()}
    return out


def rename_skills(harness: Harness, table: dict[str, str]) -> Rewrite:
    """Apply a skill-id table everywhere a skill id lives."""
    table = {k: v for k, v in table.items() if k != v}
    if not table:
        return Rewrite(harness)
    renamed = replace_in_harness(harness, table, phrases=table.keys())  # ids read as phrases
    names = _names(harness, table)
    skills = [
        dataclasses.replace(s, id=table.get(s.id, s.id), name=names.get(s.id, s.name))
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
    out = renamed.replace(
        skills=skills, skill_tool=skill_tool, metadata=_rekeyed(renamed.metadata, table)
    )
    return Rewrite(out, mapping)


@rule(
    "skill_ids.rename",
    # 5: front-matter names the Agent Skills spec allows; bundled_files re-keyed
    # 6: file names in prose (data_export.rb, out.tar.gz, x.yaml:3) keep a renamed id's spelling
    # 7: a synonym keeps an UPPER id upper; an id with no synonym stays as it is
    # 8: the synonym bank holds no word whose meaning depends on the API (order, list, stock)
    # 9: a synonym the harness or the rewrite has in another form (films, film) is passed over
    version="9",
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
    ids = [s.id for s in harness.skills]
    style = draw_style(params["style"], ID_STYLES, ids, synonyms(), rng)
    propose = proposer(style, rng, "skill-", harness)
    table = fresh_names([s.id for s in harness.skills], propose, pattern=ID_NAME)
    return rename_skills(harness, table)


@rule(
    "skill_ids.namespace",
    # 3: front-matter names the Agent Skills spec allows; bundled_files re-keyed
    # 4: file names in prose (data_export.rb, out.tar.gz, x.yaml:3) keep a renamed id's spelling
    version="4",
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
                MEANS: {"/": [":"]},
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
