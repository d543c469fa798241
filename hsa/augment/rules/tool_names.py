"""Tool-schema rules that rename: tool names (styles, random tokens, synonyms, namespaces) and
parameter names (nested objects, array items and ``$defs`` included, ``required`` kept)."""

from __future__ import annotations

import dataclasses
import random
import re
from typing import Any

from hsa.augment import arguments as undeclared
from hsa.augment.banks import synonyms
from hsa.augment.free_text import (
    format_accepts,
    remap_matchers,
    replace_in_harness,
    replace_in_skills,
)
from hsa.augment.mapping import RewriteMapping, ToolMap
from hsa.augment.names import (
    PARAM_NAME,
    TOOL_NAME,
    draw_style,
    fresh_names,
    proposer,
    style_param,
)
from hsa.augment.param_schemas import (
    all_property_names,
    property_names,
    reached,
    rename_properties,
)
from hsa.augment.registry import rule
from hsa.augment.rule import DRAWS, MEANS, Context, Rewrite
from hsa.harness.model import Harness, Hook, Skill, Tool

NAME_STYLES = ["random", "snake", "camel", "pascal", "kebab", "synonym"]
_STYLE_PARAM = style_param(
    NAME_STYLES,
    "How new names are made: a random token, a case style (snake_case, camelCase, PascalCase, "
    "kebab-case), synonyms from hsa's bank, or 'any' to draw one per rewrite.",
)
#: ``kebab`` where a name takes no dash is ``snake`` (``_draw_style``): tool names under a call
#: format that cannot write one, parameter names always
_TOOL_STYLE = {**_STYLE_PARAM, MEANS: {"kebab": ["kebab", "snake"]}}
_PARAM_STYLE = {**_STYLE_PARAM, MEANS: {"kebab": ["snake"]}}

#: the namespaces ``tools.namespace`` draws from
TOOL_NAMESPACES = ["shop", "api", "svc", "tools", "mcp", "app", "ext", "core", "srv", "fn"]


def _draw_style(params: dict[str, Any], rng: random.Random, kebab: bool, names: list[str]) -> str:
    styles = [s for s in NAME_STYLES if kebab or s != "kebab"]
    style = params["style"]
    if isinstance(style, str) and style != "any":
        return style if style in styles else "snake"
    if not isinstance(style, str) and not any(s in styles for s in style):
        return "snake"  # only kebab was listed, and the format does not take it
    return draw_style(style, styles, names, synonyms(), rng)


def _all_tools(harness: Harness) -> list[Tool]:
    return [*harness.tools, *([harness.skill_tool] if harness.skill_tool else [])]


def rename_tools(harness: Harness, table: dict[str, str]) -> Rewrite:
    """Apply a tool-name table to every place a tool name lives; the mapping skips the skill tool
    (skill loads are events of their own and render through whatever it is called)."""
    table = {k: v for k, v in table.items() if k != v}
    if not table:
        return Rewrite(harness)
    hooks = remap_matchers(harness.hooks, [t.name for t in _all_tools(harness)], table)
    skills = [rename_allowed_tools(s, table) for s in harness.skills]
    renamed = replace_in_harness(harness.replace(hooks=hooks, skills=skills), table)
    # a tool the table leaves alone stays the same object, and keeps what was derived from it
    # (its JSON, its validation)
    tools = [
        dataclasses.replace(t, name=table[t.name]) if t.name in table else t for t in renamed.tools
    ]
    skill_tool = renamed.skill_tool
    if skill_tool is not None and skill_tool.name in table:
        skill_tool = dataclasses.replace(skill_tool, name=table[skill_tool.name])
    mapping = RewriteMapping(
        tools={t.name: ToolMap(table[t.name]) for t in harness.tools if t.name in table},
        text=tuple(table.items()),
    )
    return Rewrite(renamed.replace(tools=tools, skill_tool=skill_tool), mapping)


ALLOWED_TOOLS = ("allowed-tools", "allowed_tools")
#: an entry of ``allowed-tools``: a tool's name, alone or with what it may run there
#: (``Read``, ``Bash(git:*)``, ``Bash(git add:*)``); entries are separated by spaces or commas
_ALLOWED_ENTRY = re.compile(r"([^\s,()]+)(\([^)]*(?:\)|$))?")


def allowed_tool_names(value: object) -> list[str]:
    """The tool names an ``allowed-tools`` value (a string or a list of entries) lists."""
    entries = [value] if isinstance(value, str) else value if isinstance(value, list) else []
    return [m.group(1) for v in entries if isinstance(v, str) for m in _ALLOWED_ENTRY.finditer(v)]


def _rename_entries(value: str, table: dict[str, str]) -> str:
    return _ALLOWED_ENTRY.sub(
        lambda m: table.get(m.group(1), m.group(1)) + (m.group(2) or ""), value
    )


def rename_allowed_tools(skill: Skill, table: dict[str, str]) -> Skill:
    """Agent Skills name the tools a skill may use in ``allowed-tools``: they follow a rename,
    the name at the start of each entry (``Bash`` of ``Bash(git:*)``) only."""
    extra = dict(skill.extra)
    for key in ALLOWED_TOOLS:
        value = extra.get(key)
        if isinstance(value, str):
            extra[key] = _rename_entries(value, table)
        elif isinstance(value, list):
            extra[key] = [_rename_entries(v, table) if isinstance(v, str) else v for v in value]
    return dataclasses.replace(skill, extra=extra) if extra != dict(skill.extra) else skill


@rule(
    "tools.rename",
    # 5: renames Bash of a skill's allowed-tools entry Bash(git:*); file names in prose
    # (get_order.rb, get_order.yaml:3) keep the name
    # 6: a synonym keeps an UPPER name upper; a name with no synonym stays as it is
    # 7: the synonym bank holds no word whose meaning depends on the API (order, list, stock)
    # 8: a synonym the harness or the rewrite has in another form (films, film) is passed over
    version="8",
    params={
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "style": _TOOL_STYLE,
            "fraction": {
                "type": "number",
                "minimum": 0,
                "maximum": 1,
                "default": 1.0,
                "description": "Share of the tools to rename (at least one when there are any).",
            },
            "skill_tool": {
                "type": "boolean",
                "default": True,
                "description": "Rename the skill-loading tool too.",
            },
        },
    },
)
def rename(harness: Harness, rng: random.Random, params: dict[str, Any], context: Context):
    """Rename tools: random tokens, snake/camel/Pascal/kebab case, or synonyms from a bank.

    New names are legal OpenAI/Anthropic names (``^[a-zA-Z0-9_-]{1,64}$``), parse back in the
    harness's call format, and never equal another tool's name, old or new. Tool names in
    descriptions, prompt sections, skills and hook messages are replaced as whole tokens, and hook
    matchers keep firing on the same tools.
    """
    tools = [t.name for t in harness.tools]
    if params["skill_tool"] and harness.skill_tool is not None:
        tools.append(harness.skill_tool.name)
    if not tools:
        return Rewrite(harness)
    style = _draw_style(params, rng, format_accepts(harness.protocol, "a-b"), tools)
    count = max(1, round(len(tools) * params["fraction"]))
    chosen = sorted(rng.sample(range(len(tools)), count))
    targets = [tools[i] for i in chosen]
    others = [t.name for t in _all_tools(harness) if t.name not in targets]
    table = fresh_names(
        targets,
        proposer(style, rng, "t_", harness),
        taken=others,
        pattern=TOOL_NAME,
        accept=lambda n: format_accepts(harness.protocol, n),
    )
    return rename_tools(harness, table)


@rule(
    "tools.namespace",
    # 3: renames Bash of a skill's allowed-tools entry Bash(git:*); file names in prose
    # (get_order.rb, get_order.yaml:3) keep the name
    version="3",
    params={
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "prefix": {
                "type": ["string", "null"],
                "pattern": r"^[A-Za-z][A-Za-z0-9]{0,15}$(?!\n)",
                "default": None,
                "description": "The namespace; null draws one from a bank.",
                DRAWS: TOOL_NAMESPACES,
            },
            "separator": {
                "enum": ["_", "__", "-", "any"],
                "default": "any",
                "description": "Between namespace and name ('-' only where the format allows).",
                MEANS: {"-": ["-", "_"]},  # '_' where the format cannot write a dash
            },
        },
    },
)
def namespace(harness: Harness, rng: random.Random, params: dict[str, Any], context: Context):
    """Prefix every tool name with a namespace, as MCP servers do (``shop__get_order``)."""
    tools = [t.name for t in _all_tools(harness)]
    if not tools:
        return Rewrite(harness)
    prefix = params["prefix"] or rng.choice(TOOL_NAMESPACES)
    separators = ["_", "__", "-"]
    if not format_accepts(harness.protocol, "a-b"):
        separators.remove("-")
    sep = params["separator"] if params["separator"] != "any" else rng.choice(separators)
    if sep not in separators:
        sep = "_"
    table = fresh_names(
        tools,
        lambda n: f"{prefix}{sep}{n}",
        pattern=TOOL_NAME,
        accept=lambda n: format_accepts(harness.protocol, n),
    )
    return rename_tools(harness, table)


@rule(
    "tools.rename_params",
    # 8: never renames a parameter to a Python keyword (a synonym "from")
    # 9: file names in prose (order_id.rb, order_id.yaml:3) keep the name
    # 10: a synonym keeps an UPPER name upper; a name with no synonym stays as it is
    # 11: misses the arguments calls use that the schema does not declare
    # 12: the synonym bank holds no word whose meaning depends on the API (order, list, stock)
    # 13: a synonym the harness or the rewrite has in another form (films, film) is passed over
    version="13",
    params={
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "style": _PARAM_STYLE,
            "fraction": {
                "type": "number",
                "minimum": 0,
                "maximum": 1,
                "default": 1.0,
                "description": "Share of the distinct parameter names to rename.",
            },
        },
    },
)
def rename_params(harness: Harness, rng: random.Random, params: dict[str, Any], context: Context):
    """Rename parameters everywhere they occur: nested objects, array items, ``$defs``.

    One table for the whole harness (a name means the same everywhere, so descriptions and the
    prompt can be rewritten consistently); ``required``, ``dependentRequired`` and the schemas
    that apply to the same value (``if``/``then``/``else``, ``not``, ``dependentSchemas``)
    follow, ``$ref``s keep pointing at the same definitions, and a ``$ref`` through a renamed
    property follows it. Sub-schemas that no argument path can reach (``prefixItems``,
    ``patternProperties``, a recursive type, ...) keep their names, and so do objects whose
    names a pattern constrains. The skill tool's parameter is renamed too; skill loads need no
    mapping. No new name is one the calls use as an argument the schema does not declare
    (``Context.arguments``, of any tool, anywhere: the table is the harness's).
    """
    tools = _all_tools(harness)
    names: dict[str, None] = {}
    taken: set[str] = set()
    names_of: list[list[str]] = []  # of each of ``tools``
    for tool in tools:
        schema = dict(tool.parameters)
        walked = list(reached(schema))
        names_of.append(property_names(schema, walked))
        names.update(dict.fromkeys(names_of[-1]))
        taken |= all_property_names(schema, walked)
    if not names:
        return Rewrite(harness)
    style = _draw_style(params, rng, False, list(names))
    originals = list(names)
    count = max(1, round(len(originals) * params["fraction"]))
    targets = [originals[i] for i in sorted(rng.sample(range(len(originals)), count))]
    table = fresh_names(
        targets,
        proposer(style, rng, "p_", harness),
        # (a target's own name, an undeclared argument of another tool, is blocked for the
        # other targets all the same: fresh_names never gives one another's original)
        taken=(taken | undeclared.all_names(context.arguments)) - set(targets),
        pattern=PARAM_NAME,
        accept=lambda n: all(format_accepts(harness.protocol, t.name, [n]) for t in tools[:1]),
    )
    table = {k: v for k, v in table.items() if k != v}
    if not table:
        return Rewrite(harness)
    steps_by_tool: dict[str, ToolMap] = {}
    new_tools: list[Tool] = []
    for tool in harness.tools:
        schema, steps = rename_properties(tool.parameters, table)
        new_tools.append(dataclasses.replace(tool, parameters=schema))
        if steps:
            steps_by_tool[tool.name] = ToolMap(tool.name, steps)
    skill_tool = harness.skill_tool
    if skill_tool is not None:
        schema, _ = rename_properties(skill_tool.parameters, table)
        skill_tool = dataclasses.replace(skill_tool, parameters=schema)
    hooks = [_rename_hook_input(h, table) for h in harness.hooks]
    renamed = harness.replace(tools=new_tools, skill_tool=skill_tool, hooks=hooks)
    # A parameter spelled like a tool or skill stays as it is in prose, where it would be
    # ambiguous which of the two a mention means.
    other_ids = {t.name for t in tools} | {s.id for s in harness.skills}
    prose = {k: v for k, v in table.items() if k not in other_ids}
    renamed = replace_in_harness(renamed, prose)
    # A skill's body documents its task, never how it is loaded: a name only the skill tool's
    # parameters have (Agent Skills' `name`) is another thing there (a JSON key in an example,
    # a front-matter field), and stays as written.
    own = set()
    if harness.skill_tool is not None:
        own = set(names_of[-1]) & prose.keys()  # the skill tool is the last of ``tools``
        for found in names_of[:-1]:
            own -= set(found)
    if own:
        kept = {k: v for k, v in prose.items() if k not in own}
        renamed = renamed.replace(skills=replace_in_skills(harness.skills, kept))
    return Rewrite(renamed, RewriteMapping(tools=steps_by_tool, text=tuple(prose.items())))


def _rename_hook_input(hook: Hook, table: dict[str, str]) -> Hook:
    """An ``update_input`` hook sets and removes arguments by name: it must name the renamed
    ones."""
    if hook.effect != "update_input":
        return hook
    params = dict(hook.params)
    values, removed = params.get("set"), params.get("remove")
    if isinstance(values, dict):
        params["set"] = {table.get(k, k): v for k, v in values.items()}
    if isinstance(removed, list):
        params["remove"] = [table.get(k, k) if isinstance(k, str) else k for k in removed]
    return hook if params == hook.params else dataclasses.replace(hook, params=params)
