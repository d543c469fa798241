"""Harness-wide edits that many rules share: identifiers in free text, and names a protocol takes.

Free text is every place a harness speaks to the model in prose: tool and parameter
descriptions, skill descriptions and contents, prompt section titles, bodies and template, and
the literal parts of hook messages. Templates keep their Jinja2 code untouched.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from functools import lru_cache
from typing import Any

from hsa.augment.param_schemas import reached
from hsa.errors import HsaError
from hsa.harness.identifiers import replace_identifiers
from hsa.harness.model import Harness, Hook, Protocol, Section, Skill, Tool
from hsa.harness.protocols import CALL_FORMATS, CallFormat


def replace_in_schema(
    schema: Any, table: Mapping[str, str], phrases: AbstractSet[str] = frozenset()
) -> Any:
    """``schema`` with identifiers replaced in every ``description`` and ``title``: the parts
    that change are new objects, the parts that do not are shared (schemas are never changed
    in place), so a schema that mentions none of ``table``'s keys comes back as it is.
    ``phrases``: as ``replace_identifiers`` takes them."""
    try:
        return _replaced(schema, table, phrases)
    except RecursionError:  # nested deeper than the recursion takes: the same, level by level
        return _replaced_by_levels(schema, table, phrases)


def _replaced(schema: Any, table: Mapping[str, str], phrases: AbstractSet[str]) -> Any:
    if isinstance(schema, dict):
        out: dict[str, Any] | None = None
        for key, value in schema.items():
            new: Any
            if key in ("description", "title") and isinstance(value, str):
                new = replace_identifiers(value, table, phrases=phrases)
            elif key in ("properties", "$defs", "definitions", "patternProperties") and isinstance(
                value, dict
            ):
                new = _replace_in_values(value, table, phrases)
            elif key in ("enum", "const", "default", "examples", "required"):
                continue  # values and names, not prose
            else:
                new = _replaced(value, table, phrases)
            if new is not value:
                if out is None:
                    out = dict(schema)
                out[key] = new
        return schema if out is None else out
    if isinstance(schema, list):
        items = [_replaced(v, table, phrases) for v in schema]
        return schema if all(a is b for a, b in zip(items, schema, strict=True)) else items
    return schema


def _replace_in_values(
    schemas: dict[str, Any], table: Mapping[str, str], phrases: AbstractSet[str]
) -> dict[str, Any]:
    """``replace_in_schema`` of each value of a name -> schema map (itself when none changes)."""
    out = {k: _replaced(v, table, phrases) for k, v in schemas.items()}
    return schemas if all(out[k] is v for k, v in schemas.items()) else out


#: the keywords whose value maps names to schemas, and those ``replace_in_schema`` keeps
_NAMED_SCHEMAS = ("properties", "$defs", "definitions", "patternProperties")
_KEPT = ("enum", "const", "default", "examples", "required")


def _replaced_by_levels(schema: Any, table: Mapping[str, str], phrases: AbstractSet[str]) -> Any:
    """``_replaced(schema, ...)`` without recursion: each part after the parts it holds."""
    done: dict[tuple[int, bool], Any] = {}  # by a part's id, and whether it maps names

    def parts(node: Any, named: bool) -> list[tuple[Any, bool]]:
        if named:
            return [(v, False) for v in node.values()]
        if isinstance(node, list):
            return [(v, False) for v in node]
        if not isinstance(node, dict):
            return []
        return [
            (v, k in _NAMED_SCHEMAS and isinstance(v, dict))
            for k, v in node.items()
            if k not in _KEPT and not (k in ("description", "title") and isinstance(v, str))
        ]

    todo: list[tuple[Any, bool, bool]] = [(schema, False, False)]
    while todo:
        node, named, ready = todo.pop()
        if (id(node), named) in done:
            continue
        if not ready:
            todo.append((node, named, True))
            todo.extend((part, inner, False) for part, inner in parts(node, named))
            continue
        new: Any = node
        if named:
            out = {k: done[id(v), False] for k, v in node.items()}
            new = node if all(out[k] is v for k, v in node.items()) else out
        elif isinstance(node, list):
            items = [done[id(v), False] for v in node]
            new = node if all(a is b for a, b in zip(items, node, strict=True)) else items
        elif isinstance(node, dict):
            changed: dict[str, Any] | None = None
            for key, value in node.items():
                if key in ("description", "title") and isinstance(value, str):
                    got = replace_identifiers(value, table, phrases=phrases)
                elif key in _KEPT:
                    continue
                else:
                    got = done[id(value), key in _NAMED_SCHEMAS and isinstance(value, dict)]
                if got is not value:
                    changed = dict(node) if changed is None else changed
                    changed[key] = got
            new = node if changed is None else changed
        done[id(node), named] = new
    return done[id(schema), False]


def replace_in_tool(
    tool: Tool, table: Mapping[str, str], phrases: AbstractSet[str] = frozenset()
) -> Tool:
    description = replace_identifiers(tool.description, table, phrases=phrases)
    parameters = replace_in_schema(tool.parameters, table, phrases)
    if description is tool.description and parameters is tool.parameters:
        return tool
    return dataclasses.replace(tool, description=description, parameters=parameters)


def replace_in_skills(
    skills: Sequence[Skill], table: Mapping[str, str], phrases: AbstractSet[str] = frozenset()
) -> list[Skill]:
    """``skills`` with every free-text occurrence of ``table``'s keys replaced, token-aware."""
    return [
        dataclasses.replace(
            s,
            description=replace_identifiers(s.description, table, phrases=phrases),
            content=replace_identifiers(s.content, table, phrases=phrases),
        )
        for s in skills
    ]


def replace_in_harness(
    harness: Harness, table: Mapping[str, str], phrases: AbstractSet[str] = frozenset()
) -> Harness:
    """``harness`` with every free-text occurrence of ``table``'s keys replaced, token-aware.
    ``phrases``: the keys that may read as words joined by hyphens (skill ids), as
    ``replace_identifiers`` takes them."""
    table = {k: v for k, v in table.items() if k != v}
    if not table:
        return harness
    prompt = harness.prompt
    sections = tuple(
        Section(
            id=s.id,
            title=replace_identifiers(s.title, table, phrases=phrases),
            body=replace_identifiers(s.body, table, template=True, phrases=phrases),
            kind=s.kind,
            verbatim=s.verbatim,
        )
        for s in prompt.sections
    )
    template = (
        None
        if prompt.template is None
        else replace_identifiers(prompt.template, table, template=True, phrases=phrases)
    )
    skills = replace_in_skills(harness.skills, table, phrases)
    hooks = [
        dataclasses.replace(
            h, message=replace_identifiers(h.message, table, template=True, phrases=phrases)
        )
        for h in harness.hooks
    ]
    return harness.replace(
        prompt=dataclasses.replace(prompt, sections=sections, template=template),
        tools=[replace_in_tool(t, table, phrases) for t in harness.tools],
        skill_tool=None
        if harness.skill_tool is None
        else replace_in_tool(harness.skill_tool, table, phrases),
        skills=skills,
        hooks=hooks,
    )


def remap_matchers(hooks: Iterable[Hook], names: Iterable[str], table: Mapping[str, str]) -> list:
    """Hooks whose tool matchers fire on exactly the renamed tools they fired on before.

    ``names`` are the tool names before the rename; a matcher (a full-match regex) that would
    now match a different set is replaced by the alternation of the new names it must match.
    """
    names = list(names)
    out = []
    for hook in hooks:
        pattern = hook.matcher.tool
        if pattern is None:
            out.append(hook)
            continue
        regex = re.compile(pattern)
        before = [n for n in names if regex.fullmatch(n)]
        wanted = {table.get(n, n) for n in before}
        after = {table.get(n, n) for n in names if regex.fullmatch(table.get(n, n))}
        if after != wanted:
            new = "|".join(re.escape(n) for n in sorted(wanted)) if wanted else "(?!)"
            hook = dataclasses.replace(hook, matcher=dataclasses.replace(hook.matcher, tool=new))
        out.append(hook)
    return out


# --- names a protocol can carry ---


def format_accepts(protocol: Protocol, tool: str, params: Iterable[str] = ()) -> bool:
    """Whether calls to ``tool`` with arguments named ``params`` survive ``protocol``'s format.

    Asked of the call format itself (its ``plain_names``, then a call written and read back),
    so formats registered later (Python call syntax, XML) are covered without hsa.augment
    knowing their rules. Python call syntax can write any argument name (``**{'from': 1}``),
    but other readers cannot read that, so it does not take such a name.
    """
    if protocol.is_api:
        return True
    fmt = CALL_FORMATS.get(protocol.call_format)
    if fmt is None:
        return False
    return _accepts(fmt, protocol.call_tag, tool, tuple(params))


@lru_cache(maxsize=8192)
def _accepts(fmt: CallFormat, tag: bool, tool: str, params: tuple[str, ...]) -> bool:
    # once per distinct (format, tag, tool name, parameter names): a tool recurs across
    # variants, protocols that differ only in their doc format, and conversations
    if fmt.plain_names is not None and not fmt.plain_names(tool, params):
        return False
    args = {p: 1 for p in params}
    try:
        text = fmt.format_calls([(tool, args)], tag)
        parsed = fmt.parse_calls(text, tag)
    except (HsaError, ValueError):  # a format that cannot write this name at all refuses it
        return False
    return parsed is not None and parsed[1] == [(tool, args)]


def harness_names(harness: Harness) -> list[tuple[str, list[str]]]:
    """Each surface tool (skill tool included) with its top-level parameter names."""
    tools = [*harness.tools, *([harness.skill_tool] if harness.skill_tool else [])]
    return [(t.name, t.derived(argument_names)) for t in tools]


def argument_names(tool: Tool) -> list[str]:
    """The names a call to ``tool`` can give its arguments: the properties of its parameters'
    root and of what describes the same object (``allOf``, ``anyOf``, ``oneOf``, a ``$ref``),
    in first-seen order."""
    names: dict[str, None] = {}
    for found in reached(dict(tool.parameters)):
        if found.path == ():
            for key in found.node.get("properties") or {}:
                names.setdefault(key, None)
    return list(names)


def protocol_fits(harness: Harness, protocol: Protocol) -> bool:
    """Whether every tool and top-level parameter name of ``harness`` survives ``protocol``."""
    return all(format_accepts(protocol, name, params) for name, params in harness_names(harness))
