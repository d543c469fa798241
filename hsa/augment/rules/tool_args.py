"""Tool-schema rules over argument structure: optional parameters, wrapping, flattening, enums.

These rules change the shape of calls, so each returns the argument ``Step``s that carry a
canonical call to its surface form; the inverse steps carry it back exactly. The skill tool is
left alone: skill loads render its single argument directly.
"""

from __future__ import annotations

import dataclasses
import functools
import random
import re
from collections.abc import Mapping
from typing import Any

from hsa.augment import arguments as undeclared
from hsa.augment.banks import synonyms
from hsa.augment.mapping import EACH, RewriteMapping, Step, ToolMap, one_to_one
from hsa.augment.names import (
    ANY_VALUE,
    NOT_A_KEYWORD,
    PARAM_NAME,
    draw_style,
    fresh_names,
    restyle,
    style_param,
    synonym_name,
)
from hsa.augment.param_schemas import (
    all_property_names,
    copy_schema,
    free_nodes,
    map_instance_values,
    object_schema,
    reached,
    refs_outside_defs,
)
from hsa.augment.registry import rule
from hsa.augment.rule import CANDIDATES, DRAWS, Context, Rewrite
from hsa.harness.identifiers import replace_identifiers
from hsa.harness.jsonvalues import resolve_pointer
from hsa.harness.model import Harness, Tool

NEUTRAL_PARAMS = {
    "trace_id": "Optional identifier to correlate this call in logs; does not change the result.",
    "client_note": "Optional free-text note for auditing; ignored by the tool's logic.",
    "request_tag": "Optional label attached to the request for bookkeeping.",
    "caller_ref": "Optional reference of the calling application.",
    "session_label": "Optional label of the current session, for logs only.",
}
_FRACTION = {
    "type": "number",
    "minimum": 0,
    "maximum": 1,
    "default": 1.0,
    "description": "Share of the tools to rewrite (at least one when any qualifies).",
}

#: the wrapper names ``tools.wrap_args`` draws from
WRAPPERS = ["params", "args", "input", "arguments", "payload", "request"]


def _choose(tools: list[Tool], fraction: float, rng: random.Random) -> set[str]:
    if not tools:
        return set()
    count = max(1, round(len(tools) * fraction))
    return {t.name for t in rng.sample(tools, min(count, len(tools)))}


def _rewrite_tools(
    harness: Harness,
    rewrites: dict[str, tuple[dict, tuple[Step, ...]]],
    text: tuple[tuple[str, str], ...] = (),
) -> Rewrite:
    tools = [
        dataclasses.replace(t, parameters=rewrites[t.name][0]) if t.name in rewrites else t
        for t in harness.tools
    ]
    mapping = RewriteMapping(
        tools={name: ToolMap(name, steps) for name, (_, steps) in rewrites.items() if steps},
        text=text,
    )
    return Rewrite(harness.replace(tools=tools), mapping)


@rule(
    "tools.add_optional",
    version="2",  # 2: misses the arguments calls use that the schema does not declare
    params={
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "fraction": _FRACTION,
            "names": {
                "type": "array",
                "items": {"type": "string", "pattern": PARAM_NAME.pattern, "not": NOT_A_KEYWORD},
                "minItems": 1,
                "default": list(NEUTRAL_PARAMS),
                "description": "Candidate names of the inserted parameter (one drawn per tool).",
                CANDIDATES: True,
            },
        },
    },
)
def add_optional(harness: Harness, rng: random.Random, params: dict[str, Any], context: Context):
    """Insert a neutral optional parameter (a trace id, a note) into tools' schemas.

    It is never required and never changes what a call does; a call that sets it is mapped
    back by dropping it. Its name is none the calls use as an argument the schema does not
    declare (``Context.arguments``).
    """
    rewrites: dict[str, tuple[dict, tuple[Step, ...]]] = {}
    chosen = _choose(list(harness.tools), params["fraction"], rng)
    for tool in harness.tools:
        if tool.name not in chosen:
            continue
        schema = copy_schema(tool.parameters)
        taken = all_property_names(schema) | undeclared.top_names(context.arguments, tool.name)
        wanted = rng.choice(params["names"])
        name = fresh_names([wanted], lambda n: n, taken=taken, pattern=PARAM_NAME)[wanted]
        description = NEUTRAL_PARAMS.get(wanted, "Optional; does not change the result.")
        props = dict(schema.get("properties") or {})
        keys = list(props)
        at = rng.randint(0, len(keys))
        new_props = {k: props[k] for k in keys[:at]}
        new_props[name] = {"type": "string", "description": description}
        new_props.update({k: props[k] for k in keys[at:]})
        schema["properties"] = new_props
        schema.setdefault("type", "object")
        rewrites[tool.name] = (schema, (Step("add", (name,)),))
    return _rewrite_tools(harness, rewrites)


_OBJECT_LEVEL = ("$defs", "definitions", "$schema", "$id", "id", "type")  # id: draft-04's $id


@rule(
    "tools.wrap_args",
    # 4: the wrapper goes where the arguments were, which keep their order
    # 5: misses the arguments calls use that the schema does not declare
    version="5",
    params={
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "fraction": _FRACTION,
            "wrapper": {
                "type": ["string", "null"],
                "pattern": PARAM_NAME.pattern,
                "not": NOT_A_KEYWORD,
                "default": None,
                "description": "Name of the wrapping object; null draws one from a bank.",
                DRAWS: WRAPPERS,
            },
        },
    },
)
def wrap_args(harness: Harness, rng: random.Random, params: dict[str, Any], context: Context):
    """Wrap all of a tool's arguments into one required object (``{"params": {...}}``).

    ``$defs`` stay at the schema root so every ``$ref`` still resolves; the object-level
    constraints (``required``, ``additionalProperties``, ...) move inside the wrapper. A tool
    whose arguments an ``update_input`` hook sets or removes by name is left alone, and so is
    one nested so deep (60-odd levels) that the walks of schemas would not reach its deepest
    parts once wrapped. The wrapper's name is none the calls use as an argument the schema
    does not declare (``Context.arguments``): those stay beside it.
    """
    # a $ref into the arguments (#/properties/...) would point elsewhere once they are
    # wrapped, and arguments the schema does not declare would stay outside the wrapper
    candidates = [
        t
        for t in harness.tools
        if (t.parameters.get("properties") or {})
        and not refs_outside_defs(t.parameters)
        and not _depends_on_undeclared(t.parameters)
        and not _hook_set(harness, t.name)
    ]
    chosen = _choose(candidates, params["fraction"], rng)
    rewrites = {}
    for tool in candidates:
        if tool.name not in chosen:
            continue
        schema = copy_schema(tool.parameters)
        wanted = params["wrapper"] or rng.choice(WRAPPERS)
        taken = all_property_names(schema) | undeclared.top_names(context.arguments, tool.name)
        name = fresh_names([wanted], lambda n: n, taken=taken, pattern=PARAM_NAME)[wanted]
        inner = {k: v for k, v in schema.items() if k not in _OBJECT_LEVEL}
        inner["type"] = "object"
        outer = {k: v for k, v in schema.items() if k in _OBJECT_LEVEL and k != "type"}
        outer = {
            "type": "object",
            "properties": {name: {"description": "The call's arguments.", **inner}},
            "required": [name],
            **outer,
        }
        if len(list(reached(outer))) != len(list(reached(schema))) + 1:
            continue  # so deep that the rules' walks would not reach its deepest parts wrapped
        steps = [Step("ensure", (name,))]
        steps += [Step("move", (key,), (name, key)) for key in schema.get("properties") or {}]
        rewrites[tool.name] = (outer, tuple(steps))
    return _rewrite_tools(harness, rewrites)


def _hook_set(harness: Harness, tool: str) -> set[str]:
    """The arguments of ``tool`` that ``update_input`` hooks set or remove by their top-level
    names: wrapping or flattening would move them where the hooks no longer name them."""
    names: set[str] = set()
    for hook in harness.hooks:
        pattern = hook.matcher.tool
        if hook.effect != "update_input" or (
            pattern is not None and re.fullmatch(pattern, tool) is None
        ):
            continue
        given = hook.params.get("set")
        removed = hook.params.get("remove")
        names.update(given if isinstance(given, Mapping) else ())
        names.update(
            n for n in (removed if isinstance(removed, list) else ()) if isinstance(n, str)
        )
    return names


def _resolved(schema: dict[str, Any], node: Any) -> Any:
    seen = 0
    while isinstance(node, dict) and isinstance(node.get("$ref"), str) and seen < 16:
        target = resolve_pointer(schema, node["$ref"])
        if target is None:
            return node
        extra = {k: v for k, v in node.items() if k != "$ref"}
        node = {**target, **extra}
        seen += 1
    return node


def _named_elsewhere(schema: dict[str, Any], key: str) -> bool:
    """Whether the object ``schema`` names its property ``key`` other than by its own
    ``properties`` and ``required``: in ``dependentRequired`` (or ``dependentSchemas``,
    draft-07's ``dependencies``), or in a schema that applies to the same object (``allOf``,
    ``if``, ...)."""
    for found in reached(schema):
        if found.path != ():
            continue
        node = found.node
        if node is not schema and (
            key in (node.get("properties") or {}) or key in _names(node.get("required"))
        ):
            return True
        for word in ("dependentRequired", "dependentSchemas", "dependencies"):
            dep = node.get(word)
            if isinstance(dep, dict) and (
                key in dep or any(key in _names(v) for v in dep.values())
            ):
                return True
    return False


def _depends_on_undeclared(schema: Mapping[str, Any]) -> bool:
    """Whether the object ``schema``'s ``required``, ``dependentRequired`` (or draft-07
    ``dependencies``) names a property its ``properties`` do not declare (one an ``allOf`` or
    a ``patternProperties`` does)."""
    props = schema.get("properties") or {}
    if any(name not in props for name in _names(schema.get("required"))):
        return True
    for word in ("dependentRequired", "dependencies"):
        dep = schema.get(word)
        if isinstance(dep, dict) and any(
            name not in props for names in dep.values() for name in _names(names)
        ):
            return True
    return False


def _names(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _flattenable(schema: dict[str, Any], key: str) -> dict[str, Any] | None:
    """The object schema of top-level ``key`` if flattening it is exact, else None.

    Exact means: ``key`` is required (so the object is always there and ``{}`` can be rebuilt),
    it is a plain object with named properties and no combinators, and extra keys inside it
    either cannot occur or would still be accepted at the top level.
    """
    if key not in (schema.get("required") or ()) or _named_elsewhere(schema, key):
        return None
    if "propertyNames" in schema or "patternProperties" in schema:
        return None  # the joined names might break the one or newly match the other
    sub = _resolved(schema, (schema.get("properties") or {}).get(key))
    if not isinstance(sub, dict) or sub.get("type") != "object":
        return None
    if not sub.get("properties") or any(
        k in sub for k in ("anyOf", "oneOf", "allOf", "patternProperties", "not", "if")
    ):
        return None
    if sub.get("additionalProperties") is not False and schema.get("additionalProperties") is False:
        return None
    return sub


@rule(
    "tools.flatten_args",
    version="6",  # 6: misses the arguments calls use that the schema does not declare
    # (5: the fields go where the object was, in its order; 4: defaults and the like that
    # hold the object are flattened too)
    params={
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "join": {
                "enum": ["any", "_", "__", "camel"],
                "default": "any",
                "description": "Joins the object's name and its field's name "
                "(address_city, address__city, addressCity).",
            }
        },
    },
)
def flatten_args(harness: Harness, rng: random.Random, params: dict[str, Any], context: Context):
    """Flatten a required object parameter into top-level ones (``address_city``).

    The object's required fields become required top-level parameters; a ``default``,
    ``const``, ``examples`` or ``enum`` value that holds the object is flattened as calls are.
    Only objects whose flattening is exact are touched (required, named properties, no
    combinators), so the inverse rebuilds the object, an empty one included; not one an
    ``update_input`` hook sets or removes by name. The joined names are none the calls use as
    an argument the schema does not declare (``Context.arguments``).
    """
    join = params["join"] if params["join"] != "any" else rng.choice(["_", "__", "camel"])

    def joined(parent: str, field: str) -> str:
        if join == "camel":
            return parent + field[:1].upper() + field[1:]
        return f"{parent}{join}{field}"

    rewrites = {}
    for tool in harness.tools:
        if refs_outside_defs(tool.parameters):
            continue  # a $ref into the arguments might name the object flattened away
        schema = copy_schema(tool.parameters)
        props = schema.get("properties") or {}
        hooked = _hook_set(harness, tool.name)
        flattenable = {
            k: s for k in props if k not in hooked and (s := _flattenable(schema, k)) is not None
        }
        if not flattenable:
            continue
        key = rng.choice(list(flattenable))
        sub = flattenable[key]
        inner = list(sub["properties"])
        names = fresh_names(
            inner,
            functools.partial(joined, key),
            taken=all_property_names(schema)
            | set(inner)
            | undeclared.top_names(context.arguments, tool.name),
            pattern=PARAM_NAME,
        )
        steps = [Step("move", (key, f), (names[f],)) for f in inner]
        steps.append(Step("prune", (key,)))
        # the values the schema holds (an arguments object's default) are flattened as calls
        map_instance_values(free_nodes(schema), steps)
        hint = sub.get("description") or props[key].get("description")
        new_props: dict[str, Any] = {}
        for k, v in props.items():
            if k != key:
                new_props[k] = v
                continue
            for field, fschema in sub["properties"].items():
                # a boolean schema as the object it stands for, to hold the note
                fschema = dict(fschema) if isinstance(fschema, dict) else object_schema(fschema)
                note = f"Field {field!r} of {key}" + (f" ({hint})" if hint else "") + "."
                fschema["description"] = (
                    f"{fschema['description']} {note}" if fschema.get("description") else note
                )
                new_props[names[field]] = fschema
        required = []
        for k in schema.get("required") or []:
            if k == key:
                required += [names[f] for f in sub.get("required") or [] if f in names]
            else:
                required.append(k)
        schema["properties"] = new_props
        schema["required"] = required
        rewrites[tool.name] = (schema, tuple(steps))
    return _rewrite_tools(harness, rewrites)


ENUM_STYLES = ["upper", "camel", "pascal", "kebab", "snake", "synonym"]
#: what a respelling keeps of a value: letters, digits and the separators between words
_RESPELLABLE = re.compile(r"[A-Za-z0-9 _-]+")
#: a value written as a code, whose words a synonym may replace: snake_case, UPPER_SNAKE or
#: camelCase (one lower-case word too)
_CODE = re.compile(
    r"[a-z][a-z0-9]*(?:_[a-z0-9]+)*|[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*|[a-z][a-z0-9]*(?:[A-Z][a-z0-9]*)+"
)


@rule(
    "tools.enum_values",
    # 7: a surface spelling off the canonical enum is respelled back (one_to_one)
    # 8: file names in descriptions (value.rb, value.yaml:3) keep the value's spelling
    # 9: a synonym keeps an UPPER value upper (CANCEL -> VOID); one with no synonym stays
    # 10: the synonym bank holds no word whose meaning depends on the API (order, list, stock)
    version="10",
    params={
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "style": style_param(ENUM_STYLES, "How values are respelled; meaning is always kept.")
        },
    },
)
def enum_values(harness: Harness, rng: random.Random, params: dict[str, Any], context: Context):
    """Respell string enum values (``wrong_size`` -> ``WRONG_SIZE``, ``WrongSize``, a synonym).

    The one rule that rewrites argument values: only values of an ``enum`` the schema declares,
    with an ``enum`` step per argument path (arrays, nested objects and shared ``$defs``
    included). The ``default``, ``const`` and ``examples`` that hold them follow, as the steps
    map calls (an array's default, an object's, a ``$ref``'s beside it); mentions in the
    description of the property, or of the array whose items they are, are replaced
    token-aware.

    A value is kept as it is where respelling would lose what it says: one holding anything but
    letters, digits, spaces, ``_`` and ``-`` (``C++``, ``C#``, ``google.com``), in every style;
    and under ``synonym``, one not written as a code (snake_case, UPPER_SNAKE, camelCase): a
    capitalised word or phrase is a name (``Country`` the music genre, ``JavaScript``), and
    words joined by spaces or hyphens a phrase (``one-stop``, ``Living room``), whose words a
    synonym would change the meaning of.
    """
    bank = synonyms()
    # the string enum values of each tool's free sub-schemas, looked up without a copy
    values_of = [
        [
            v
            for node, _ in free_nodes(dict(tool.parameters))
            if isinstance(node.get("enum"), list)
            for v in node["enum"]
            if isinstance(v, str)
        ]
        for tool in harness.tools
    ]
    style = params["style"]
    if not isinstance(style, str) or style == "any":
        values = [v for found in values_of for v in found if _RESPELLABLE.fullmatch(v)]
        style = draw_style(style, ENUM_STYLES, values, bank, rng)
    rewrites = {}
    texts: dict[tuple[str, str], None] = {}  # (a set in order: an enum may be long)
    for tool, found in zip(harness.tools, values_of, strict=True):
        if not found:
            continue  # nothing to respell: the tool stays as it is
        schema = copy_schema(tool.parameters)
        steps: list[Step] = []
        nodes = free_nodes(schema)
        at_path: dict[tuple, list[dict]] = {}
        for node, paths in nodes:
            for path in paths:
                at_path.setdefault(path, []).append(node)
        for node, paths in nodes:
            declared = node.get("enum")
            if not isinstance(declared, list) or not paths or () in paths:
                continue
            if not all(
                _annotation_only(other) for p in paths for other in at_path[p] if other is not node
            ):
                continue  # another schema (an anyOf branch) also describes these values
            strings = [v for v in declared if isinstance(v, str)]
            if not strings:
                continue

            def propose(value: str) -> str:
                if not _RESPELLABLE.fullmatch(value):
                    return value
                if style == "synonym":
                    return synonym_name(value, bank, rng) if _CODE.fullmatch(value) else value
                return restyle(value, style)

            table = fresh_names(strings, propose, pattern=ANY_VALUE)
            table = {k: v for k, v in table.items() if k != v}
            if not table:
                continue
            # the description of the property holding these values (a $ref to them beside
            # it), and of the array holding them as items
            described = [*paths, *(_owner(p) for p in paths if p[-1] == EACH)]
            owners = {id(n): n for p in described for n in at_path.get(p, ())}
            for owner in owners.values():
                if isinstance(owner.get("description"), str):
                    owner["description"] = replace_identifiers(owner["description"], table)
            pairs = tuple(table.items())
            # closed, so a call's value off the enum that is a surface spelling cannot read
            # back as the value it respells (one_to_one)
            closed = one_to_one(pairs)
            steps += [Step("enum", path, values=closed) for path in paths]
            texts.update(dict.fromkeys(pairs))
        if steps:
            # the enums themselves, and every default, const and example that holds them
            map_instance_values(nodes, steps)
            rewrites[tool.name] = (schema, tuple(steps))
    return _rewrite_tools(harness, rewrites, tuple(texts))


_ANNOTATIONS = {
    "$ref",
    "description",
    "title",
    "default",
    "examples",
    "$comment",
    "deprecated",
    "readOnly",
    "writeOnly",
}


def _owner(path: tuple[str, ...]) -> tuple[str, ...]:
    """The path of the property whose (nested) arrays hold the items at ``path``."""
    while path and path[-1] == EACH:
        path = path[:-1]
    return path


def _annotation_only(node: dict[str, Any]) -> bool:
    """A schema that only points elsewhere or annotates: it constrains no value itself."""
    return set(node) <= _ANNOTATIONS
