"""Undeclared arguments: the argument paths a trajectory's calls use that their tools' schemas
do not declare, which a rule must not give a parameter it makes.

A schema that does not forbid extra keys lets a call carry arguments it never names (``args``
beside ``city``). A rule that makes a parameter (a wrapper, an inserted optional one, a
flattened field, a new name) picks a name no declared parameter has; it must also miss these,
or the call's value there is overwritten (``apply_steps`` refuses to) and the inverse cannot
give the call back. The planner gives them to rules in ``Context.arguments``, per canonical
tool: ``(tool, (path, ...))`` pairs sorted by tool, each path a tuple of keys (``"[]"`` for
every item of an array) ending at an undeclared key; the keys under it are not listed. A key
the schema declares elsewhere is left out: a rule makes no name a declared one has, and
makes none where no parameter is declared.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from hsa.augment.mapping import EACH, ArgPath, ArgumentClash, RewriteMapping
from hsa.augment.param_schemas import moved_path, reached
from hsa.harness.events import Event, ToolCall
from hsa.harness.model import Harness, Tool

#: per canonical tool, its calls' undeclared argument paths (see the module's docstring)
Arguments = tuple[tuple[str, tuple[ArgPath, ...]], ...]

#: a JSON object key in a call's arguments text: a string followed by a colon
_KEY = re.compile(r'"((?:[^"\\]|\\.)*)"\s*:')


def of_calls(harness: Harness, events: Iterable[Event]) -> Arguments:
    """The undeclared argument paths of the canonical calls ``events`` holds, per tool of
    ``harness`` (tools it lacks left out)."""
    found: dict[str, set[ArgPath]] = {}
    for event in events:
        if isinstance(event, ToolCall):
            tool = harness.tool(event.tool)
            if tool is not None:
                paths = undeclared(tool, event.args)
                if paths:
                    found.setdefault(tool.name, set()).update(paths)
    return packed(found)


def of_texts(harness: Harness, calls: Iterable[tuple[str, str | None]]) -> Arguments:
    """``of_calls`` of calls given as (tool, arguments JSON text) pairs, as a dataset row holds
    them; a text whose keys all are names the tool's schema declares somewhere is passed
    over without being parsed (most are)."""
    found: dict[str, set[ArgPath]] = {}
    for name, text in calls:
        tool = harness.tool(name)
        if tool is None or not text:
            continue
        declared = tool.derived(_declared_names)
        if all(key in declared for key in _KEY.findall(text)):
            continue  # nothing undeclared (a key with an escape is parsed)
        try:
            args = json.loads(text)
        except (ValueError, RecursionError):
            continue  # the renderer names a row whose arguments are not JSON
        paths = undeclared(tool, args) if isinstance(args, dict) else ()
        if paths:
            found.setdefault(name, set()).update(paths)
    return packed(found)


def undeclared(tool: Tool, args: Mapping[str, Any]) -> list[ArgPath]:
    """The paths of ``args`` whose last key the tool's schema declares nowhere (in no
    ``properties``), reached through keys it declares there."""
    names = tool.derived(_declared_names)
    out: list[ArgPath] = []
    if any(key not in names for key in _keys(args)):
        _walk(args, (), tool.derived(_declared_paths), names, out)
    return out


def _keys(node: Any) -> Iterable[str]:
    """Every object key in ``node``."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield key
            yield from _keys(value)
    elif isinstance(node, list):
        for value in node:
            yield from _keys(value)


def _walk(
    node: Any,
    path: ArgPath,
    declared: frozenset[ArgPath],
    names: frozenset[str],
    out: list[ArgPath],
) -> None:
    if isinstance(node, dict):
        for key, value in node.items():
            at = (*path, key)
            if at in declared:
                _walk(value, at, declared, names, out)
            elif key not in names:
                out.append(at)
    elif isinstance(node, list):
        for value in node:
            _walk(value, (*path, EACH), declared, names, out)


def _declared_paths(tool: Tool) -> frozenset[ArgPath]:
    """Every instance path the tool's schema names a property at."""
    schema = dict(tool.parameters)
    return frozenset(
        (*r.path, key)
        for r in reached(schema)
        if r.path is not None
        for key in (r.node.get("properties") or {})
    )


def _declared_names(tool: Tool) -> frozenset[str]:
    """Every key of a ``properties`` anywhere in the tool's schema (``$defs``, sub-schemas no
    call reaches: every name a rule takes as taken): found without following a ``$ref``, as
    most calls' keys all are such names."""
    out: set[str] = set()
    todo: list[Any] = [dict(tool.parameters)]
    while todo:
        node = todo.pop()
        values = node.values() if type(node) is dict else node
        if type(node) is dict and type(node.get("properties")) is dict:
            out.update(node["properties"])
        todo.extend(v for v in values if type(v) is dict or type(v) is list)
    return frozenset(out)


def packed(found: Mapping[str, Iterable[ArgPath]]) -> Arguments:
    """``found`` (paths per tool) as ``Arguments``: sorted, tools without paths left out."""
    out = [(tool, tuple(sorted(set(paths)))) for tool, paths in found.items()]
    return tuple(sorted((tool, paths) for tool, paths in out if paths))


def merged(many: Iterable[Arguments | None]) -> Arguments:
    """The paths of any of ``many``."""
    found: dict[str, set[ArgPath]] = {}
    for arguments in many:
        for tool, paths in arguments or ():
            found.setdefault(tool, set()).update(paths)
    return packed(found)


def through(arguments: Arguments, mapping: RewriteMapping) -> Arguments:
    """``arguments`` as ``mapping`` carries them to the surface: tools renamed, paths where
    its steps move the values (kept where a step would clash with one: the rule that made
    such a step is named when the mapping is applied)."""
    found: dict[str, set[ArgPath]] = {}
    for tool, paths in arguments:
        tool_map = mapping.tools.get(tool)
        if tool_map is None:
            found.setdefault(tool, set()).update(paths)
            continue
        mine = found.setdefault(tool_map.name, set())
        for path in paths:
            try:
                moved = moved_path(path, tool_map.steps)
            except ArgumentClash:
                moved = None
            mine.add(path if moved is None else moved)
    return packed(found)


def clash(arguments: Arguments | None, mapping: RewriteMapping) -> str | None:
    """Why ``mapping`` would overwrite one of ``arguments`` (a step that puts a value at one of
    their paths, or under one, where the steps before it took them), or None: a rule that made
    a parameter of a name the calls use undeclared."""
    for tool, paths in arguments or ():
        tool_map = mapping.tools.get(tool)
        if tool_map is None:
            continue
        at = list(paths)
        for step in tool_map.steps:
            target = step.dst if step.kind == "move" else step.path
            if step.kind in ("move", "ensure", "add") and target is not None:
                hit = next((p for p in at if tuple(target[: len(p)]) == p), None)
                if hit is not None:
                    return (
                        f"its mapping puts a parameter at {'.'.join(target)} of tool {tool!r}, "
                        f"where calls hold {'.'.join(hit)}, an argument the schema does not "
                        "declare: the value would be lost (a rule makes no parameter of a name "
                        "in context.arguments)"
                    )
            with contextlib.suppress(ArgumentClash):  # (named when the mapping is applied)
                at = [moved_path(p, (step,)) or p for p in at]
    return None


def top_names(arguments: Arguments | None, tool: str) -> frozenset[str]:
    """The top-level keys ``tool``'s calls use that its schema does not declare (the first
    key of each path: an object holding one, left where a flatten took its declared fields,
    is one the surface schema does not declare)."""
    for name, paths in arguments or ():
        if name == tool:
            return frozenset(path[0] for path in paths)
    return frozenset()


def all_names(arguments: Arguments | None) -> frozenset[str]:
    """Every key on the paths of ``arguments``, of every tool, wherever it is."""
    return frozenset(
        key for _, paths in arguments or () for path in paths for key in path if key != EACH
    )


def to_json(arguments: Arguments) -> list[list[Any]]:
    """``arguments`` as JSON values (a variant id's context, a batch mark)."""
    return [[tool, [list(path) for path in paths]] for tool, paths in arguments]


def from_json(value: Sequence[Any]) -> Arguments:
    """``to_json``'s value read back."""
    return packed({tool: [tuple(path) for path in paths] for tool, paths in value})
