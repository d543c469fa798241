"""Schema walking: instance paths through properties, items, $ref and combinators; pinned
sub-schemas; renaming with required lists and move steps that the mapping can follow."""

from __future__ import annotations

from conftest import ORDER_SCHEMA

from hsa.augment import apply_steps
from hsa.augment.mapping import Step
from hsa.augment.param_schemas import free_nodes, property_names, reached, rename_properties


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
