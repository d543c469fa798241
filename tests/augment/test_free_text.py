"""Identifiers in free text: ``replace_in_schema`` rewrites prose and shares what it leaves."""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from hsa.augment.free_text import format_accepts, replace_in_schema, replace_in_tool
from hsa.harness.identifiers import replace_identifiers
from hsa.harness.model import Protocol, Tool

NAMES = ["get_order", "sku", "order_id", "find"]
prose = st.lists(st.sampled_from([*NAMES, "the", "`find`", "get_order_details", ",", "."])).map(
    " ".join
)
leaf = st.fixed_dictionaries(
    {"type": st.sampled_from(["string", "integer"])},
    optional={"description": prose, "title": prose, "enum": st.lists(st.sampled_from(NAMES))},
)
schemas = st.recursive(
    leaf,
    lambda inner: st.fixed_dictionaries(
        {"type": st.just("object")},
        optional={
            "description": prose,
            "properties": st.dictionaries(st.sampled_from(NAMES), inner, max_size=3),
            "items": inner,
            "anyOf": st.lists(inner, min_size=1, max_size=2),
            "required": st.lists(st.sampled_from(NAMES), unique=True),
        },
    ),
    max_leaves=8,
)
tables = st.dictionaries(st.sampled_from(NAMES), st.sampled_from(["fetch_order", "code", "x"]))


def _expected(schema: Any, table: dict[str, str]) -> Any:
    """What the rewrite means: prose under ``description``/``title`` rewritten, the rest kept
    (property names, enums and ``required`` are names and values, not prose)."""
    if isinstance(schema, dict):
        out = {}
        for key, value in schema.items():
            if key in ("description", "title") and isinstance(value, str):
                out[key] = replace_identifiers(value, table)
            elif key == "properties":
                out[key] = {k: _expected(v, table) for k, v in value.items()}
            elif key in ("enum", "required"):
                out[key] = value
            else:
                out[key] = _expected(value, table)
        return out
    if isinstance(schema, list):
        return [_expected(v, table) for v in schema]
    return schema


def _objects(value: Any) -> list[Any]:
    """Every dict and list inside ``value`` (itself included)."""
    if isinstance(value, dict):
        return [value, *(o for v in value.values() for o in _objects(v))]
    if isinstance(value, list):
        return [value, *(o for v in value for o in _objects(v))]
    return []


@settings(max_examples=200, deadline=None)
@given(schemas, tables)
def test_prose_is_rewritten_and_what_is_left_is_shared(schema: dict, table: dict) -> None:
    before = copy.deepcopy(schema)
    out = replace_in_schema(schema, table)
    assert json.dumps(out) == json.dumps(_expected(before, table))  # key order included
    assert schema == before  # never changed in place
    if out == schema:
        assert out is schema  # nothing to rewrite: the schema itself
    # a part of the input is either shared whole (unchanged) or not in the output at all
    mine = {id(o) for o in _objects(out)}
    for part in _objects(schema):
        if id(part) in mine:
            assert part == _expected(part, table)


#: schemas whose parts a name -> schema map or a kept keyword holds in unusual places too
_ODD = st.recursive(
    st.one_of(leaf, st.sampled_from([True, 1, "find", None])),
    lambda inner: st.one_of(
        schemas,
        st.lists(inner, max_size=2),
        st.dictionaries(
            st.sampled_from(["properties", "$defs", "description", "enum", "not", "find"]),
            inner,
            max_size=3,
        ),
    ),
    max_leaves=8,
)


@settings(max_examples=80, deadline=None, derandomize=True)
@given(_ODD, tables)
def test_a_schema_past_the_recursion_is_rewritten_as_one_within_it(schema, table) -> None:
    from hsa.augment.free_text import _replaced, _replaced_by_levels

    out = _replaced(schema, table, frozenset())
    by_levels = _replaced_by_levels(schema, table, frozenset())
    assert json.dumps(by_levels) == json.dumps(out)
    # the same parts of the input shared, the same made anew
    given = {id(o) for o in _objects(schema)}
    assert {id(o) for o in _objects(by_levels)} & given == {id(o) for o in _objects(out)} & given


def test_a_schema_nested_past_the_recursion_limit_is_rewritten() -> None:
    schema: dict = {"type": "string", "description": "Calls `find` first."}
    for _ in range(1500):
        schema = {"type": "object", "properties": {"a": schema}}
    out = replace_in_schema(schema, {"find": "search"})
    for _ in range(1500):
        out = out["properties"]["a"]
    assert out == {"type": "string", "description": "Calls `search` first."}


def test_a_tool_that_mentions_no_name_is_the_same_tool() -> None:
    tool = Tool("lookup", "Look an item up.", {"type": "object", "properties": {}})
    assert replace_in_tool(tool, {"find": "search"}) is tool
    assert replace_in_tool(tool, {"lookup": "find_item"}) is tool  # not a token of the text
    renamed = replace_in_tool(
        Tool("t", "Calls `find` first.", {"type": "object", "properties": {}}), {"find": "seek"}
    )
    assert renamed.description == "Calls `seek` first."


def test_python_calls_do_not_take_an_argument_name_they_would_write_as_a_splat() -> None:
    # hsa reads its own **{'from': 1} back, but vLLM's pythonic parser and BFCL's decoder do not
    python = Protocol("text", "python", False, "json")
    assert format_accepts(python, "search_mail", ["query", "limit"])
    for name in ("from", "max-results", "class", "__debug__", "\ufb01"):
        assert not format_accepts(python, "search_mail", ["query", name]), name
        assert format_accepts(Protocol("text", "hermes", True, "json"), "search_mail", [name])
        assert format_accepts(Protocol("text", "json", True, "json"), "search_mail", [name])
