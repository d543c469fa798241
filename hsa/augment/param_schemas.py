"""Tool parameter schemas as rules see them: every sub-schema with the argument path it describes.

A sub-schema describes the values at one instance path (``("items", "[]", "sku")``): object
properties add their key, array ``items`` add ``"[]"``, and the keywords that apply to the same
value (``$ref``, ``anyOf``/``oneOf``/``allOf``, ``not``, ``if``/``then``/``else``,
``dependentSchemas``) keep the path. Sub-schemas reached only through keywords that have no such
path (``prefixItems``, tuple ``items``, ``additionalProperties``, ``patternProperties``, ...), and
those of a recursive ``$ref`` cycle (whose paths never end), are *pinned*: rules leave their
property names and enums alone, because no ``RewriteMapping`` step could follow them. A
``$defs`` entry used from two places is reached twice, with both paths.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from collections.abc import Mapping as MappingABC
from dataclasses import dataclass
from typing import Any

from hsa.augment.mapping import EACH, ArgPath, Step, apply_steps, respelled
from hsa.harness.jsonvalues import child, pointer_key, resolve_pointer

#: keywords holding sub-schemas that apply to the same value: a list or a map of them (the
#: map of draft 2019-09's ``dependentSchemas``, and draft-07's ``dependencies``, which holds
#: them beside ``dependentRequired``'s lists of names), or one
_SAME_MANY = ("anyOf", "oneOf", "allOf", "dependentSchemas", "dependencies")
_SAME_ONE = ("not", "if", "then", "else")
#: keywords holding sub-schemas that no argument path reaches
_PINNED_ONE = (
    "additionalProperties",
    "unevaluatedProperties",
    "propertyNames",
    "unevaluatedItems",
    "additionalItems",
)
_PINNED_MANY = ("patternProperties", "prefixItems")
#: keywords that constrain an object's property names by pattern: its keys are not renamed
_KEYED = frozenset(("propertyNames", "patternProperties"))
_MAX_DEPTH = 64
#: the keywords ``_walk`` looks under besides ``$ref``, ``properties`` and ``items``
_RARE = frozenset((*_SAME_MANY, *_SAME_ONE, *_PINNED_ONE, *_PINNED_MANY, "contains"))
#: every keyword ``_walk`` looks under: a schema with none of them is a leaf
_WALKED = frozenset((*_RARE, "$ref", "properties", "items"))
#: the keywords of sub-schemas of the same value, and all that ``rename_properties`` visits
_SAME = frozenset((*_SAME_MANY, *_SAME_ONE))
_VISITED = frozenset((*_SAME, "$ref", "properties", "items", "contains"))
#: the keywords whose names ``_rename_keys`` renames
_NAMING = frozenset(
    ("properties", "required", "dependentRequired", "dependentSchemas", "dependencies")
)
#: the JSON types ``copy_json`` shares as they are: none is a mapping, list or tuple
_SCALARS = frozenset((str, int, float, bool, type(None)))
#: keywords whose value is an instance of the schema that holds it, and those whose items are
_INSTANCE_ONE = ("default", "const")
_INSTANCE_MANY = ("examples", "enum")
_INSTANCE_KEYS = frozenset((*_INSTANCE_ONE, *_INSTANCE_MANY))
#: what ``map_instance_values`` puts where a value sits, to see where the steps take it
_PROBE = "\ue000hsa:probe"


def copy_schema(schema: MappingABC[str, Any]) -> dict[str, Any]:
    """A deep, mutable copy of a JSON Schema (JSON types only)."""
    return copy_json(schema)


def copy_json(value: Any) -> Any:
    """A deep, mutable copy of a JSON value (a schema, a rule's parameters): objects as dicts,
    arrays as lists, the rest shared (immutable). What a ``json`` round trip gives, at a
    third of its cost, and a tenth of ``copy.deepcopy``'s: planning copies on every rule."""
    try:
        return _copied(value)
    except RecursionError:  # nested deeper than the recursion takes: the same copy, level by level
        return _copied_by_levels(value)


def _copied(value: Any) -> Any:
    kind = type(value)
    # The exact JSON types first: an ``isinstance`` check against the ``Mapping`` ABC costs
    # more than the copy of a string, and most values of a schema are strings.
    if kind is dict:
        return {k: v if type(v) in _SCALARS else _copied(v) for k, v in value.items()}
    if kind is list:
        return [v if type(v) in _SCALARS else _copied(v) for v in value]
    if kind in _SCALARS:
        return value
    if isinstance(value, MappingABC):
        return {k: _copied(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_copied(v) for v in value]
    return value


def _copied_by_levels(value: Any) -> Any:
    """``_copied(value)`` without recursion: each container is made empty, then filled."""

    def made(item: Any) -> Any:
        if isinstance(item, MappingABC):
            out: Any = {}
        elif isinstance(item, list | tuple):
            out = []
        else:
            return item
        todo.append((item, out))
        return out

    todo: list[tuple[Any, Any]] = []
    top = made(value)
    while todo:
        source, out = todo.pop()
        if isinstance(out, dict):
            out.update((k, made(v)) for k, v in source.items())
        else:
            out.extend(made(v) for v in source)
    return top


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
    if isinstance(ref, str) and ref.startswith("#"):
        if ref not in refs:
            _walk(root, resolve_pointer(root, ref), path, deeper, refs | {ref}, out)
        elif path is not None:
            # a recursive type: its paths never end, so every node of the cycle is pinned
            _walk(root, resolve_pointer(root, ref), None, deeper, refs, out)
    props = node.get("properties")
    if isinstance(props, dict):
        leaves = deeper <= _MAX_DEPTH
        for key, sub in props.items():
            at = None if path is None else (*path, key)
            if leaves and type(sub) is dict and _WALKED.isdisjoint(sub):
                out.append(Reached(sub, at))  # what _walk does of a leaf, without the call
            elif type(sub) is bool:
                out.append(Reached(object_schema(sub), at))  # a declared name all the same
            else:
                _walk(root, sub, at, deeper, refs, out)
    items = node.get("items")
    contains = node.get("contains")  # some element: a schema of the elements' path too
    if isinstance(items, dict | bool) or isinstance(contains, dict):
        # items after prefixItems (or a tuple) describe only the later elements: no path
        # says which
        each = None if path is None or "prefixItems" in node else (*path, EACH)
        if type(items) is dict and deeper <= _MAX_DEPTH and _WALKED.isdisjoint(items):
            out.append(Reached(items, each))  # a leaf, as for properties
        elif isinstance(items, dict):
            _walk(root, items, each, deeper, refs, out)
        elif type(items) is bool:
            out.append(Reached(object_schema(items), each))
        if isinstance(contains, dict):
            _walk(root, contains, each, deeper, refs, out)
    if _RARE.isdisjoint(node) and not isinstance(items, list):
        return  # most nodes: nothing below but properties and items
    for key in _SAME_MANY:
        for sub in _schemas(node.get(key)):
            _walk(root, sub, path, deeper, refs, out)
    for key in _SAME_ONE:
        if key in node:
            _walk(root, node[key], path, deeper, refs, out)
    for key in _PINNED_ONE:
        if key in node:
            _walk(root, node[key], None, deeper, refs, out)
    # the tuple form of ``items`` (drafts before 2020-12) is ``prefixItems``'s
    tuple_items = items if isinstance(items, list) else []
    for sub in [*tuple_items, *(s for k in _PINNED_MANY for s in _schemas(node.get(k)))]:
        _walk(root, sub, None, deeper, refs, out)


def object_schema(schema: bool) -> dict[str, Any]:
    """A new object schema meaning what the boolean one does (``true``: any value, ``false``:
    none): ``reached`` gives one where a property or items are declared by a boolean, so
    the path is declared as any other (a rewrite of it changes nothing in the schema)."""
    return {} if schema else {"not": {}}


def _schemas(value: Any) -> list[Any]:
    """The sub-schemas a keyword holds: a list's items, a map's values (a draft-07
    ``dependencies`` list of names among them, which ``_walk`` passes over)."""
    if isinstance(value, list):
        return value
    if isinstance(value, dict):
        return list(value.values())
    return []


def free_nodes(
    schema: dict[str, Any], walked: list[Reached] | None = None
) -> list[tuple[dict[str, Any], list[ArgPath]]]:
    """Sub-schemas never reached through a pinned keyword, each with all its paths, in order
    (``walked``: ``reached(schema)``, when the caller has it). A path that a pinned sub-schema
    describes too is left alone as a whole: a rewrite of the other schemas there would part
    them from the one that keeps its names."""
    found: dict[int, tuple[dict[str, Any], list[ArgPath | None]]] = {}
    for r in reached(schema) if walked is None else walked:
        entry = found.get(id(r.node))
        if entry is None:
            found[id(r.node)] = (r.node, [r.path])
        elif r.path not in entry[1]:
            entry[1].append(r.path)
    stuck = {p for _, ps in found.values() if None in ps for p in ps if p is not None}
    # (a node kept has no None among its paths)
    return [
        (node, ps)  # type: ignore[misc]
        for node, ps in found.values()
        if None not in ps and stuck.isdisjoint(ps)
    ]


def renamable_nodes(
    schema: dict[str, Any], walked: list[Reached] | None = None
) -> list[dict[str, Any]]:
    """The free sub-schemas (``free_nodes``) whose property names may be renamed: not those
    at a path where a schema constrains the names by pattern (``propertyNames``,
    ``patternProperties``), which a new name might break or newly match."""
    walked = list(reached(schema)) if walked is None else walked
    return _renamable(walked, free_nodes(schema, walked))


def _renamable(
    walked: list[Reached], free: list[tuple[dict[str, Any], list[ArgPath]]]
) -> list[dict[str, Any]]:
    """``renamable_nodes`` of a schema ``walked``, whose ``free_nodes`` are ``free``."""
    keyed = {r.path for r in walked if r.path is not None and not _KEYED.isdisjoint(r.node)}
    return [node for node, paths in free if keyed.isdisjoint(paths)]


def rename_properties(
    schema: MappingABC[str, Any], table: MappingABC[str, str]
) -> tuple[dict[str, Any], tuple[Step, ...]]:
    """Rename property keys by ``table`` wherever a step can follow them.

    Returns the new schema (``required``, ``dependentRequired`` and ``dependentSchemas``
    renamed along; ``$defs`` keep their names, so only a ``$ref`` through a renamed property
    changes) and the ``move`` steps, parents before children, that take canonical arguments to
    the new names. The values sub-schemas hold (``default``, ``const``, ``examples``,
    ``enum``) are renamed by the same steps, as calls are.
    """
    out = copy_schema(schema)
    walked = list(reached(out))
    nodes = free_nodes(out, walked)
    free = _renamable(walked, nodes)
    renamable = {id(node) for node in free}
    refs = _renamed_refs(out, walked, renamable, table)
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
                if type(sub) is not dict or not _VISITED.isdisjoint(sub):  # (else: a leaf)
                    visit(sub, (*spath, new), depth + 1, refs)
        for key in ("items", "contains"):  # (pinned beside prefixItems: not renamable)
            if isinstance(node.get(key), dict):
                visit(node[key], (*spath, EACH), depth + 1, refs)
        if _SAME.isdisjoint(node):
            return
        for key in _SAME_MANY:
            for sub in _schemas(node.get(key)):
                visit(sub, spath, depth + 1, refs)
        for key in _SAME_ONE:
            if key in node:
                visit(node[key], spath, depth + 1, refs)

    visit(out, (), 0, frozenset())
    if steps:
        map_instance_values(nodes, steps)
    for node in free:  # renaming keys makes new property maps; the nodes stay the same
        if not _NAMING.isdisjoint(node):
            _rename_keys(node, table)
    for node, ref in refs:
        node["$ref"] = ref
    return out, tuple(steps)


def map_instance_values(
    nodes: list[tuple[dict[str, Any], list[ArgPath]]], steps: Sequence[Step]
) -> None:
    """Rewrite in place the values that sub-schemas hold as instances of themselves
    (``default``, ``const``, each of ``examples`` and ``enum``) as ``apply_steps`` rewrites
    the argument values at their path: so an object's ``default`` follows its properties'
    renames, and an array's its items' enum respellings. ``nodes``: ``free_nodes`` of the
    schema (a pinned sub-schema's values are at no path a step reaches); a sub-schema at
    several paths is read at its first."""
    # moves only carry a value elsewhere: a scalar changes under an enum step alone
    scalars_too = any(step.kind == "enum" for step in steps)
    moves = any(step.kind == "move" for step in steps)
    for node, paths in nodes:
        if not paths or node.keys().isdisjoint(_INSTANCE_KEYS):
            continue
        path = paths[0]
        moved = _moved(path, steps) if moves else path
        if moved is None:
            continue  # the steps drop what is there
        for key in _INSTANCE_ONE:
            if key in node and (scalars_too or type(node[key]) not in _SCALARS):
                node[key] = _mapped(node[key], path, moved, steps)
        for key in _INSTANCE_MANY:
            if isinstance(node.get(key), list):
                node[key] = [
                    _mapped(v, path, moved, steps) if scalars_too or type(v) not in _SCALARS else v
                    for v in node[key]
                ]


def _mapped(value: Any, path: ArgPath, moved: ArgPath, steps: Sequence[Step]) -> Any:
    """``value`` as ``steps`` rewrite an argument value at ``path``, which they move to
    ``moved``: placed alone in a call, rewritten, and read back there."""
    if not path and not isinstance(value, dict):
        return value  # arguments are an object: steps apply to none other
    if type(value) in _SCALARS:
        # (a step's path may be any sequence, as apply_steps takes it: a plugin's list)
        at = [tuple(step.path) if step.kind == "enum" else None for step in steps]
        if all(p is not None and (p == path or not _related(p, path)) for p in at):
            # what apply_steps does here, without placing the value: an enum step at its
            # path respells it, one elsewhere finds nothing there (one above or below it
            # might: a value an enum step respelled may be an object, or in one)
            for step, p in zip(steps, at, strict=True):
                if p == path:
                    value = respelled(step.values, value)
            return value
    return _at(apply_steps(_placed(path, value), steps), moved, value)


def moved_path(path: ArgPath, steps: Sequence[Step]) -> ArgPath | None:
    """Where ``steps`` take the argument value at ``path`` (None: they drop it)."""
    return _moved(path, steps)


def _related(a: ArgPath, b: ArgPath) -> bool:
    """Whether ``a`` and ``b`` are one path, or one of them leads to where the other is."""
    n = min(len(a), len(b))
    return a[:n] == b[:n]


def _moved(path: ArgPath, steps: Sequence[Step]) -> ArgPath | None:
    """Where ``steps`` take the argument value at ``path``: a probe placed there, looked up."""
    return _located(apply_steps(_placed(path, _PROBE), steps)) if path else path


def _at(out: Any, path: ArgPath, missing: Any) -> Any:
    """The value at ``path`` in ``out`` (which ``_placed`` built, so an array holds one item),
    or ``missing`` (an empty object the steps pruned)."""
    for key in path:
        if key == EACH and isinstance(out, list) and out:
            out = out[0]
        elif isinstance(out, dict) and key in out:
            out = out[key]
        else:
            return missing
    return out


def _placed(path: ArgPath, value: Any) -> Any:
    """An argument object holding ``value`` at ``path``, alone (an array of it at ``"[]"``)."""
    for key in reversed(path):
        value = [value] if key == EACH else {key: value}
    return value


def _located(node: Any, path: ArgPath = ()) -> ArgPath | None:
    """The path of ``_PROBE`` in ``node`` (lists holding one item: ``"[]"``)."""
    if node == _PROBE:
        return path
    if isinstance(node, dict):
        children = list(node.items())
    elif isinstance(node, list):
        children = [(EACH, v) for v in node]
    else:
        return None
    for key, sub in children:
        found = _located(sub, (*path, key))
        if found is not None:
            return found
    return None


def _rename_keys(node: dict[str, Any], table: MappingABC[str, str]) -> None:
    props = node.get("properties")
    if isinstance(props, dict):
        node["properties"] = {table.get(k, k): v for k, v in props.items()}
    if isinstance(node.get("required"), list):
        node["required"] = [table.get(k, k) for k in node["required"]]
    for key in ("dependentRequired", "dependentSchemas", "dependencies"):
        dep = node.get(key)
        if isinstance(dep, dict):
            node[key] = {
                table.get(k, k): [table.get(x, x) for x in v] if isinstance(v, list) else v
                for k, v in dep.items()
            }


def _renamed_refs(
    root: dict[str, Any], walked: list[Reached], renamed: set[int], table: MappingABC[str, str]
) -> list[tuple[dict[str, Any], str]]:
    """The ``$ref``s of ``root``'s sub-schemas (``walked``) that pass through a property of a
    schema whose keys are renamed (``#/properties/home/properties/city``), each with its
    pointer after the rename (``$defs`` entries keep their names, so most pointers need
    none)."""
    found: dict[int, tuple[dict[str, Any], str]] = {}
    for r in walked:
        ref = r.node.get("$ref")
        if isinstance(ref, str) and "/properties/" in ref and id(r.node) not in found:
            new = _renamed_pointer(root, ref, renamed, table)
            if new != ref:
                found[id(r.node)] = (r.node, new)
    return list(found.values())


def _renamed_pointer(
    root: dict[str, Any], ref: str, renamed: set[int], table: MappingABC[str, str]
) -> str:
    if not ref.startswith("#/"):
        return ref
    node: Any = root
    parts = ref[2:].split("/")
    for i, raw in enumerate(list(parts)):  # the old names lead through the schema
        key = pointer_key(raw)
        owner, node = node, child(node, key)
        if node is None:
            return ref
        if key == "properties" and id(owner) in renamed and i + 1 < len(parts):
            name = pointer_key(parts[i + 1])
            if table.get(name, name) != name:
                parts[i + 1] = table[name]  # a new name is an identifier: nothing to escape
    return "#/" + "/".join(parts)


def refs_outside_defs(schema: MappingABC[str, Any]) -> bool:
    """Whether a ``$ref`` in ``schema`` points elsewhere than into its ``$defs`` (or
    ``definitions``): at the root (``#``, a recursive type) or into its properties."""
    stack: list[Any] = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, list):
            stack.extend(node)
        elif isinstance(node, MappingABC):
            ref = node.get("$ref")
            if isinstance(ref, str) and not ref.startswith(("#/$defs/", "#/definitions/")):
                return True
            stack.extend(node.values())
    return False


def property_names(schema: dict[str, Any], walked: list[Reached] | None = None) -> list[str]:
    """Every property name a step can reach in ``schema``, in first-seen order (``walked``:
    ``reached(schema)``, when the caller has it)."""
    names: dict[str, None] = {}
    for node in renamable_nodes(schema, walked):
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
