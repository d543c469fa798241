"""Tool parameter schemas as rules see them: every sub-schema with the argument path it describes.

A sub-schema describes the values at one instance path (``("items", "[]", "sku")``): object
properties add their key, array ``items`` add ``"[]"``, ``$ref``/``anyOf``/``oneOf``/``allOf``
keep the path. Sub-schemas reached only through keywords that have no such path
(``prefixItems``, ``additionalProperties``, ``patternProperties``, ``not``, ``if``, ...) are
*pinned*: rules leave their property names and enums alone, because no ``RewriteMapping`` step could
follow them. A ``$defs`` entry used from two places is reached twice, with both paths.
"""

from __future__ import annotations

from collections.abc import Iterator
from collections.abc import Mapping as MappingABC
from dataclasses import dataclass
from typing import Any

from hsa.augment.mapping import EACH, ArgPath, Step
from hsa.harness.validate import resolve_pointer

_SAME_PATH = ("anyOf", "oneOf", "allOf")
_PINNED_ONE = (
    "additionalProperties",
    "unevaluatedProperties",
    "propertyNames",
    "not",
    "if",
    "then",
    "else",
    "contains",
    "unevaluatedItems",
)
_PINNED_MAP = ("patternProperties", "dependentSchemas")
_MAX_DEPTH = 64
#: the keywords ``_walk`` looks under besides ``$ref``, ``properties`` and ``items``
_RARE = frozenset((*_SAME_PATH, *_PINNED_ONE, *_PINNED_MAP, "prefixItems"))


def copy_schema(schema: MappingABC[str, Any]) -> dict[str, Any]:
    """A deep, mutable copy of a JSON Schema (JSON types only)."""
    return copy_json(schema)


def copy_json(value: Any) -> Any:
    """A deep, mutable copy of a JSON value (a schema, a rule's parameters): objects as dicts,
    arrays as lists, the rest shared (immutable). What a ``json`` round trip gives, at a
    third of its cost, and a tenth of ``copy.deepcopy``'s: planning copies on every rule."""
    if isinstance(value, MappingABC):
        return {k: copy_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [copy_json(v) for v in value]
    return value


@dataclass(frozen=True, slots=True)
class Reached:
    """One sub-schema and one instance path it describes (``None`` when pinned)."""

    node: dict[str, Any]
    path: ArgPath | None


def reached(schema: dict[str, Any]) -> Iterator[Reached]:
    """Every sub-schema of ``schema`` (``$ref``s followed) with its instance path, pre-order."""
    out: list[Reached] = []
    _walk(schema, schema, (), 0, frozenset(), out)
    return iter(out)


def _walk(
    root: dict[str, Any],
    node: Any,
    path: ArgPath | None,
    depth: int,
    refs: frozenset[str],
    out: list[Reached],
) -> None:
    # appends to one list rather than yielding through nested generators: every item would
    # otherwise pass up through each level above it, and planning walks schemas a lot
    if not isinstance(node, dict) or depth > _MAX_DEPTH:
        return
    out.append(Reached(node, path))
    deeper = depth + 1
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#") and ref not in refs:
        _walk(root, resolve_pointer(root, ref), path, deeper, refs | {ref}, out)
    props = node.get("properties")
    if isinstance(props, dict):
        for key, sub in props.items():
            _walk(root, sub, None if path is None else (*path, key), deeper, refs, out)
    items = node.get("items")
    if isinstance(items, dict):
        _walk(root, items, None if path is None else (*path, EACH), deeper, refs, out)
    if _RARE.isdisjoint(node):  # most nodes: nothing below but properties and items
        return
    for key in _SAME_PATH:
        for sub in node.get(key) or ():
            _walk(root, sub, path, deeper, refs, out)
    for key in _PINNED_ONE:
        if key in node:
            _walk(root, node[key], None, deeper, refs, out)
    for key in _PINNED_MAP:
        for sub in (node.get(key) or {}).values():
            _walk(root, sub, None, deeper, refs, out)
    for sub in node.get("prefixItems") or ():
        _walk(root, sub, None, deeper, refs, out)


def free_nodes(
    schema: dict[str, Any], walked: list[Reached] | None = None
) -> list[tuple[dict[str, Any], list[ArgPath]]]:
    """Sub-schemas never reached through a pinned keyword, each with all its paths, in order
    (``walked``: ``reached(schema)``, when the caller has it)."""
    paths: dict[int, list[ArgPath | None]] = {}
    nodes: dict[int, dict[str, Any]] = {}
    for r in reached(schema) if walked is None else walked:
        key = id(r.node)
        nodes.setdefault(key, r.node)
        bucket = paths.setdefault(key, [])
        if r.path not in bucket:
            bucket.append(r.path)
    return [
        (nodes[k], [p for p in ps if p is not None]) for k, ps in paths.items() if None not in ps
    ]


def rename_properties(
    schema: MappingABC[str, Any], table: MappingABC[str, str]
) -> tuple[dict[str, Any], tuple[Step, ...]]:
    """Rename property keys by ``table`` wherever a step can follow them.

    Returns the new schema (``required`` and ``dependentRequired`` renamed along, ``$ref``s
    untouched since ``$defs`` keep their names) and the ``move`` steps, parents before children,
    that take canonical arguments to the new names.
    """
    out = copy_schema(schema)
    free = [node for node, _ in free_nodes(out)]
    renamable = {id(node) for node in free}
    steps: list[Step] = []
    seen: set[Step] = set()

    def visit(node: Any, spath: ArgPath, depth: int, refs: frozenset[str]) -> None:
        if not isinstance(node, dict) or depth > _MAX_DEPTH:
            return
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#") and ref not in refs:
            visit(resolve_pointer(out, ref), spath, depth + 1, refs | {ref})
        props = node.get("properties")
        if isinstance(props, dict):
            active = id(node) in renamable
            for key, sub in props.items():
                new = table.get(key, key) if active else key
                if new != key:
                    step = Step("move", (*spath, key), (*spath, new))
                    if step not in seen:
                        seen.add(step)
                        steps.append(step)
                visit(sub, (*spath, new), depth + 1, refs)
        if isinstance(node.get("items"), dict):
            visit(node["items"], (*spath, EACH), depth + 1, refs)
        for key in _SAME_PATH:
            for sub in node.get(key) or ():
                visit(sub, spath, depth + 1, refs)

    visit(out, (), 0, frozenset())
    for node in free:  # renaming keys makes new property maps; the nodes stay the same
        _rename_keys(node, table)
    return out, tuple(steps)


def _rename_keys(node: dict[str, Any], table: MappingABC[str, str]) -> None:
    props = node.get("properties")
    if isinstance(props, dict):
        node["properties"] = {table.get(k, k): v for k, v in props.items()}
    if isinstance(node.get("required"), list):
        node["required"] = [table.get(k, k) for k in node["required"]]
    dep = node.get("dependentRequired")
    if isinstance(dep, dict):
        node["dependentRequired"] = {
            table.get(k, k): [table.get(x, x) for x in v] for k, v in dep.items()
        }


def property_names(schema: dict[str, Any], walked: list[Reached] | None = None) -> list[str]:
    """Every property name a step can reach in ``schema``, in first-seen order (``walked``:
    ``reached(schema)``, when the caller has it)."""
    names: dict[str, None] = {}
    for node, _ in free_nodes(schema, walked):
        for key in node.get("properties") or {}:
            names.setdefault(key, None)
    return list(names)


def all_property_names(schema: dict[str, Any], walked: list[Reached] | None = None) -> set[str]:
    """Every property name anywhere in ``schema``, pinned sub-schemas included (``walked``:
    ``reached(schema)``, when the caller has it)."""
    nodes = reached(schema) if walked is None else walked
    return {k for r in nodes for k in (r.node.get("properties") or {})} | {
        k
        for d in (schema.get("$defs"), schema.get("definitions"))
        if isinstance(d, dict)
        for sub in d.values()
        if isinstance(sub, dict)
        for k in (sub.get("properties") or {})
    }
