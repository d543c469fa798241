"""Schema walking: instance paths through properties, items, $ref and combinators; pinned
sub-schemas; renaming with required lists and move steps that the mapping can follow."""

from __future__ import annotations

import copy
import enum
from collections import OrderedDict
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from conftest import ORDER_SCHEMA
from hypothesis import given, settings
from hypothesis import strategies as st

from hsa.augment import apply_steps
from hsa.augment.mapping import Step
from hsa.augment.param_schemas import (
    copy_json,
    free_nodes,
    map_instance_values,
    property_names,
    reached,
    rename_properties,
)
from tests.harness.strategies import json_scalars


def test_paths_follow_refs_and_array_items():
    paths = {r.path for r in reached(ORDER_SCHEMA) if "properties" in r.node}
    assert paths == {(), ("items", "[]"), ("address",)}


def test_shared_definitions_are_reached_with_every_path():
    schema = {
        "type": "object",
        "properties": {"a": {"$ref": "#/$defs/P"}, "b": {"$ref": "#/$defs/P"}},
        "$defs": {"P": {"type": "object", "properties": {"x": {"type": "string"}}}},
    }
    nodes = dict((id(n), p) for n, p in free_nodes(schema))
    assert nodes[id(schema["$defs"]["P"])] == [("a",), ("b",)]
    new, steps = rename_properties(schema, {"x": "y"})
    assert new["$defs"]["P"]["properties"] == {"y": {"type": "string"}}
    assert set(steps) == {
        Step("move", ("a", "x"), ("a", "y")),
        Step("move", ("b", "x"), ("b", "y")),
    }


def test_pinned_subschemas_keep_their_names():
    schema = {
        "type": "object",
        "properties": {"t": {"type": "array", "prefixItems": [{"$ref": "#/$defs/Q"}]}},
        "$defs": {"Q": {"type": "object", "properties": {"x": {}}}},
    }
    assert property_names(schema) == ["t"]
    new, steps = rename_properties(schema, {"x": "y", "t": "u"})
    assert new["$defs"]["Q"]["properties"] == {"x": {}}
    assert steps == (Step("move", ("t",), ("u",)),)


def test_rename_keeps_required_and_moves_parents_first():
    new, steps = rename_properties(
        ORDER_SCHEMA, {"items": "lines", "item_id": "sku", "city": "town"}
    )
    assert new["required"] == ["order_id", "lines", "address"]
    assert new["properties"]["address"]["required"] == ["town"]
    assert new["$defs"]["Item"]["required"] == ["sku", "quantity"]
    assert new["properties"]["lines"]["items"] == {"$ref": "#/$defs/Item"}
    args = {"order_id": "1", "items": [{"item_id": "a", "quantity": 1}], "address": {"city": "P"}}
    out = apply_steps(args, steps)
    assert out == {
        "order_id": "1",
        "lines": [{"sku": "a", "quantity": 1}],
        "address": {"town": "P"},
    }
    back = apply_steps(out, [s.inverse() for s in reversed(steps)])
    assert back == args


def _copy_by_isinstance(value: Any) -> Any:
    """``copy_json`` as it was before its exact-type fast path: the reference it must match."""
    if isinstance(value, Mapping):
        return {k: _copy_by_isinstance(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_copy_by_isinstance(v) for v in value]
    return value


class _Size(enum.IntEnum):
    S = 1


class _Word(str):
    pass


#: values a schema made in code may hold besides JSON's own: tuples, other mappings, and
#: subclasses of the scalar types
_CODE_VALUES = st.recursive(
    st.one_of(json_scalars(), st.sampled_from([_Size.S, _Word("w"), b"raw"])),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.lists(inner, max_size=3).map(tuple),
        st.dictionaries(st.text(max_size=3), inner, max_size=3),
        st.dictionaries(st.text(max_size=3), inner, max_size=3).map(OrderedDict),
        st.dictionaries(st.text(max_size=3), inner, max_size=3).map(MappingProxyType),
    ),
    max_leaves=8,
)


def _shape(value: Any) -> Any:
    """``value`` with the type of every part spelled out, so equal shapes mean equal types."""
    if isinstance(value, dict):
        return (type(value), [(k, _shape(v)) for k, v in value.items()])
    if isinstance(value, list):
        return (type(value), [_shape(v) for v in value])
    return (type(value), value)


def _containers(value: Any) -> list[int]:
    if isinstance(value, Mapping):
        return [id(value), *(i for v in value.values() for i in _containers(v))]
    if isinstance(value, list | tuple):
        return [id(value), *(i for v in value for i in _containers(v))]
    return []


@settings(max_examples=300, deadline=None)
@given(_CODE_VALUES)
def test_copy_json_is_the_copy_it_was_before_its_fast_path(value):
    copied = copy_json(value)
    assert _shape(copied) == _shape(_copy_by_isinstance(value))
    # every object and array is new: a rule may change the copy in place
    assert set(_containers(copied)).isdisjoint(_containers(value))


@settings(max_examples=60, deadline=None, derandomize=True)
@given(_CODE_VALUES)
def test_copy_json_past_the_recursion_is_the_copy_within_it(value):
    from hsa.augment.param_schemas import _copied_by_levels

    copied = _copied_by_levels(value)
    assert _shape(copied) == _shape(copy_json(value))
    assert set(_containers(copied)).isdisjoint(_containers(value))


def test_copy_json_copies_a_schema_nested_past_the_recursion_limit():
    schema: dict = {"type": "string"}
    for _ in range(1500):
        schema = {"type": "object", "properties": {"a": schema}, "required": ["a"]}
    copied = copy_json(schema)
    for _ in range(1500):  # (== would recurse as deep)
        assert copied is not schema and copied.keys() == schema.keys()
        copied, schema = copied["properties"]["a"], schema["properties"]["a"]
    assert copied == schema == {"type": "string"}


def test_renames_reach_the_values_schemas_hold_as_the_steps_reach_calls():
    speed = {"type": "string", "enum": ["standard", "express"]}
    ship = {
        "type": "object",
        "properties": {"speed": speed},
        "additionalProperties": False,
        "default": {"speed": "standard"},
        "examples": [{"speed": "express"}],
    }
    schema = {
        "type": "object",
        "properties": {
            "ship": ship,
            "legs": {"type": "array", "items": {"$ref": "#/$defs/Leg"}, "default": [{"ship": {}}]},
            "maybe": {
                "anyOf": [
                    {"properties": {"ship": ship}, "default": {"ship": {"speed": "express"}}},
                    {"type": "null"},
                ],
                "default": {"ship": {}},
            },
            "fixed": {
                "properties": {"ship": {}},
                "const": {"ship": {"speed": "express"}},
                "enum": [{"speed": 1}],
            },
            "free": {"type": "object", "additionalProperties": ship, "default": {"speed": "x"}},
        },
        "$defs": {"Leg": {"type": "object", "properties": {"ship": ship}, "default": {"ship": {}}}},
    }
    new, _ = rename_properties(schema, {"speed": "pace", "ship": "send"})
    props = new["properties"]
    assert props["send"]["default"] == {"pace": "standard"}
    assert props["send"]["examples"] == [{"pace": "express"}]
    assert props["legs"]["default"] == [{"send": {}}]
    assert new["$defs"]["Leg"]["default"] == {"send": {}}
    # only the keys the schema declares where the value sits are renamed
    assert props["fixed"]["const"] == {"send": {"speed": "express"}}
    assert props["fixed"]["enum"] == [{"speed": 1}]
    # additionalProperties' values are at no path: their names stay, and so do its values
    assert props["free"]["default"] == {"speed": "x"}
    assert props["free"]["additionalProperties"]["properties"] == {"speed": speed}
    assert props["maybe"]["anyOf"][0]["default"] == {"send": {"pace": "express"}}
    assert props["maybe"]["default"] == {"send": {}}
    assert ship["default"] == {"speed": "standard"}  # the input is left as it was


def _reference_walk(root: Any, node: Any, path: Any, depth: int, refs: Any, out: list) -> None:
    """``reached``'s walk as it was before it appended leaves without a call: the reference
    its fast path must match."""
    from hsa.augment.param_schemas import _PINNED_MANY, _PINNED_ONE, _SAME_MANY, _SAME_ONE
    from hsa.augment.param_schemas import _schemas as schemas
    from hsa.harness.jsonvalues import resolve_pointer

    if not isinstance(node, dict) or depth > 64:
        return
    out.append((id(node), path))
    deeper = depth + 1
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#"):
        if ref not in refs:
            _reference_walk(root, resolve_pointer(root, ref), path, deeper, refs | {ref}, out)
        elif path is not None:
            _reference_walk(root, resolve_pointer(root, ref), None, deeper, refs, out)
    props = node.get("properties")
    if isinstance(props, dict):
        for key, sub in props.items():
            at = None if path is None else (*path, key)
            _reference_walk(root, sub, at, deeper, refs, out)
    items = node.get("items")
    each = None if path is None or "prefixItems" in node else (*path, "[]")
    if isinstance(items, dict):
        _reference_walk(root, items, each, deeper, refs, out)
    if isinstance(node.get("contains"), dict):
        _reference_walk(root, node["contains"], each, deeper, refs, out)
    for key in _SAME_MANY:
        for sub in schemas(node.get(key)):
            _reference_walk(root, sub, path, deeper, refs, out)
    for key in _SAME_ONE:
        if key in node:
            _reference_walk(root, node[key], path, deeper, refs, out)
    for key in _PINNED_ONE:
        if key in node:
            _reference_walk(root, node[key], None, deeper, refs, out)
    tuple_items = items if isinstance(items, list) else []
    for sub in [*tuple_items, *(s for k in _PINNED_MANY for s in schemas(node.get(k)))]:
        _reference_walk(root, sub, None, deeper, refs, out)


_LEAVES = st.one_of(
    st.fixed_dictionaries({"type": st.sampled_from(["string", "integer"])}),
    st.fixed_dictionaries({"enum": st.lists(st.text(max_size=2), max_size=2)}).map(OrderedDict),
    st.sampled_from([{"$ref": "#/$defs/D"}, {"$ref": "#"}, {}, "not a schema"]),
)
_SCHEMAS = st.recursive(
    _LEAVES,
    lambda inner: st.one_of(
        st.dictionaries(st.sampled_from("abc"), inner, max_size=3).map(
            lambda p: {"type": "object", "properties": p}
        ),
        st.builds(lambda i: {"type": "array", "items": i}, inner),
        st.builds(lambda i, c: {"items": i, "contains": c, "prefixItems": [c]}, inner, inner),
        st.builds(lambda a, b: {"anyOf": [a, b], "not": a}, inner, inner),
        st.builds(lambda a: {"additionalProperties": a, "properties": {"x": a}}, inner),
    ),
    max_leaves=10,
)


@settings(max_examples=300, deadline=None)
@given(_SCHEMAS, _SCHEMAS)
def test_reached_and_free_nodes_match_the_plain_walk(body, definition):
    schema = {"type": "object", "properties": {"p": body}, "$defs": {"D": definition}}
    expected: list = []
    _reference_walk(schema, schema, (), 0, frozenset(), expected)
    walked = list(reached(schema))
    assert [(id(r.node), r.path) for r in walked] == expected
    # free_nodes: every node reached with none of its paths pinned, nor at a pinned path
    paths: dict[int, list] = {}
    for key, path in expected:
        if path not in paths.setdefault(key, []):
            paths[key].append(path)
    stuck = {p for ps in paths.values() if None in ps for p in ps if p is not None}
    free = [(k, ps) for k, ps in paths.items() if None not in ps and stuck.isdisjoint(ps)]
    assert [(id(node), ps) for node, ps in free_nodes(schema, walked)] == free


_PATHS = st.lists(st.sampled_from(["a", "b", "[]"]), min_size=0, max_size=3).map(tuple)
# (objects and arrays drawn anew each time: a respelled one ends up in the output)
_ENUM_VALUES = st.one_of(
    json_scalars(),
    st.fixed_dictionaries({"a": st.sampled_from([1, True, "x"])}),
    st.lists(st.just(1), min_size=1, max_size=1),
)


@settings(max_examples=500, deadline=None)
@given(
    json_scalars(),
    _PATHS,
    st.lists(
        st.builds(
            lambda path, pairs: Step("enum", path, values=tuple(pairs)),
            _PATHS,
            st.lists(st.tuples(_ENUM_VALUES, _ENUM_VALUES), max_size=3),
        ),
        max_size=3,
    ),
)
def test_enum_steps_map_a_scalar_as_apply_steps_does(value, path, steps):
    from hsa.augment.param_schemas import _at, _mapped, _placed

    # each side gets its own steps, so that neither sees what the other did to them
    mine = copy.deepcopy(steps)
    expected = _at(apply_steps(_placed(path, value), steps), path, value) if path else value
    got = _mapped(value, path, path, mine)
    assert (type(got), got) == (type(expected), expected) or (got != got and expected != expected)
    assert steps == mine  # apply_steps leaves the steps' tables as they were


def test_an_enum_step_below_a_scalar_respelled_to_an_object_maps_it_as_apply_steps_does():
    from hsa.augment.param_schemas import _at, _mapped, _placed

    def steps() -> list[Step]:  # the scalar becomes an object whose "b" the second respells
        return [
            Step("enum", ("a",), values=((False, {"b": 1}),)),
            Step("enum", ("a", "b"), values=((1, 2),)),
        ]

    assert _mapped(False, ("a",), ("a",), steps()) == {"b": 2}
    assert _at(apply_steps(_placed(("a",), False), steps()), ("a",), False) == {"b": 2}


def test_an_enum_step_above_a_scalar_maps_it_as_apply_steps_does():
    from hsa.augment.param_schemas import _at, _mapped, _placed

    steps = [Step("enum", ("a",), values=(({"b": "x"}, {"b": "y"}),))]
    for value in ("x", "z"):
        path = ("a", "b")
        expected = _at(apply_steps(_placed(path, value), steps), path, value)
        assert _mapped(value, path, path, steps) == expected


def test_an_enum_step_whose_path_is_a_list_respells_the_schema_as_calls():
    # a plugin's Step may carry its path as a list, as apply_steps takes it: the schema's
    # enum and default are respelled as the calls are
    schema = {
        "type": "object",
        "properties": {"color": {"enum": ["red", "blue"], "default": "red"}},
    }
    steps = [Step("enum", ["color"], values=(("red", "RED"), ("blue", "BLUE")))]  # type: ignore[arg-type]
    map_instance_values(free_nodes(schema), steps)
    assert schema["properties"]["color"] == {"enum": ["RED", "BLUE"], "default": "RED"}
    assert apply_steps({"color": "red"}, steps) == {"color": "RED"}
