"""Undeclared arguments: found in calls, carried through mappings, missed by the rules that make
parameter names (hsa/augment/arguments.py, Context.arguments)."""

from __future__ import annotations

import dataclasses
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hsa.augment import Context, Rewrite, RewriteMapping, Rule, Step, ToolMap, apply_chain, get_rule
from hsa.augment import arguments as undeclared
from hsa.augment.mapping import map_events
from hsa.errors import RuleError
from hsa.harness import Harness, Tool
from hsa.harness.events import ToolCall

CITY = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
ADDRESS = {
    "type": "object",
    "properties": {
        "address": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "zip": {"type": "string"}},
        },
        "tags": {"type": "array", "items": {"type": "object", "properties": {"k": {}}}},
    },
    "required": ["address"],
}
#: the rules that make a parameter name, with parameters that make the name known
MAKERS = [
    ("tools.wrap_args", {"wrapper": "args"}),
    ("tools.add_optional", {"names": ["trace_id"]}),
    ("tools.flatten_args", {"join": "_"}),
    ("tools.rename_params", {}),
]


def _harness(schema: dict) -> Harness:
    return Harness(id="h", tools=(Tool("lookup", "Look up.", schema),))


def _round_trip(harness: Harness, chain, args: dict, seed: int = 0) -> tuple[dict, dict]:
    """The call's surface arguments and what the inverse gives back, the chain planned with
    the call's context."""
    events = [ToolCall("call_0", "lookup", args)]
    rewrite, _ = apply_chain(harness, chain, seed=seed, context=Context.of(events, harness))
    surface = map_events(events, rewrite.mapping)
    back = map_events(surface, rewrite.mapping.inverse())
    return dict(surface[0].args), dict(back[0].args)


def _made_names(harness: Harness, chain, seed: int) -> set[str]:
    """The parameter names ``chain`` makes on ``harness`` without a context."""
    rewrite, _ = apply_chain(harness, chain, seed=seed)
    before = _names(harness.tools[0].parameters)
    return _names(rewrite.harness.tools[0].parameters) - before


def _names(schema) -> set[str]:
    out: set[str] = set()
    if isinstance(schema, dict):
        out |= set(schema.get("properties") or {})
        for value in schema.values():
            out |= _names(value)
    elif isinstance(schema, list):
        for value in schema:
            out |= _names(value)
    return out


def test_undeclared_paths_stop_at_the_first_undeclared_key_and_skip_declared_names():
    tool = Tool("lookup", "Look up.", ADDRESS)
    args = {
        "address": {"city": "Paris", "street": {"no": 1}},
        "tags": [{"k": 1, "v": 2}],
        "zip": "75001",  # declared inside address: no rule makes it a new name
        "extra": {"deep": 1},
    }
    assert sorted(undeclared.undeclared(tool, args)) == [
        ("address", "street"),
        ("extra",),
        ("tags", "[]", "v"),
    ]


@settings(max_examples=100, derandomize=True, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(["address", "tags", "city", "zip", "extra", 'q"x', "k"]),
        st.one_of(st.integers(), st.dictionaries(st.sampled_from(["city", "no", "k"]), st.none())),
        max_size=5,
    )
)
def test_the_texts_a_row_holds_give_what_the_calls_give(args):
    harness = _harness(ADDRESS)
    text = json.dumps(args)
    assert undeclared.of_texts(harness, [("lookup", text)]) == undeclared.of_calls(
        harness, [ToolCall("c", "lookup", args)]
    )


@pytest.mark.parametrize(("name", "params"), MAKERS)
def test_a_rule_misses_a_name_the_call_uses_undeclared(name, params):
    schema = ADDRESS if name == "tools.flatten_args" else CITY
    harness = _harness(schema)
    chain = [(get_rule(name), params)]
    made = sorted(_made_names(harness, chain, seed=0))
    assert made  # the rule makes a name here: the call below uses it
    canonical = {**({"address": {"city": "Paris"}} if schema is ADDRESS else {"city": "Paris"})}
    canonical[made[0]] = 7
    surface, back = _round_trip(harness, chain, canonical)
    assert back == canonical
    assert surface[made[0]] == 7  # the undeclared argument is left as it is


@settings(max_examples=60, derandomize=True, deadline=None)
@given(
    chain=st.lists(st.sampled_from(MAKERS), min_size=1, max_size=3),
    seed=st.integers(0, 2**16),
    data=st.data(),
)
def test_chains_of_the_rules_never_lose_an_undeclared_argument(chain, seed, data):
    harness = _harness(ADDRESS)
    rules = [(get_rule(name), params) for name, params in chain]
    made = sorted(_made_names(harness, rules, seed))
    extra = data.draw(st.lists(st.sampled_from(made), unique=True)) if made else []
    canonical = {"address": {"city": "Paris", "zip": "1"}, **{k: [k] for k in extra}}
    # a key left in the flattened object, which stays where it was on the surface
    canonical["address"]["street"] = "Rue"
    _, back = _round_trip(harness, rules, canonical, seed)
    assert back == canonical


def test_paths_follow_the_mapping_and_tools_their_new_names():
    harness = _harness(ADDRESS)
    rewrite, _ = apply_chain(
        harness, [(get_rule("tools.wrap_args"), {"wrapper": "params"})], seed=0
    )
    found = undeclared.packed({"lookup": [("address", "street"), ("other",)]})
    assert undeclared.through(found, rewrite.mapping) == (
        ("lookup", (("other",), ("params", "address", "street"))),
    )


def test_the_context_key_and_what_a_rule_sees():
    none = Context(frozenset({"lookup"}), frozenset())
    some = Context(frozenset({"lookup"}), frozenset(), (("lookup", (("x",),)),))
    assert none.key() == {"used_tools": ["lookup"], "used_skills": []}  # as before
    assert some.key()["arguments"] == [["lookup", [["x"]]]]
    assert get_rule("tools.wrap_args").sees(some).arguments == some.arguments
    assert Context.union([some, none]).arguments == some.arguments
    assert some.without_arguments() == none


def _careless_wrap(harness, rng, params, context):
    """Wrap every argument into ``args``, whatever the calls use."""
    tool = harness.tools[0]
    schema = {"type": "object", "properties": {"args": dict(tool.parameters)}}
    steps = (Step("ensure", ("args",)), Step("move", ("city",), ("args", "city")))
    rewritten = harness.replace(tools=(dataclasses.replace(tool, parameters=schema),))
    return Rewrite(rewritten, RewriteMapping(tools={tool.name: ToolMap(tool.name, steps)}))


def test_a_rule_that_names_a_parameter_as_an_undeclared_argument_is_refused_by_name():
    careless = Rule("fake.careless_wrap", "1", _careless_wrap, doc="Wrap into args.")
    harness = _harness(CITY)
    context = Context.of([ToolCall("c", "lookup", {"city": "Paris", "args": 7})], harness)
    apply_chain(harness, [(careless, {})], seed=0)  # no calls known: nothing to miss
    with pytest.raises(RuleError) as caught:
        apply_chain(harness, [(careless, {})], seed=0, context=context)
    assert caught.value.where == "rule 'fake.careless_wrap'"
    assert "where calls hold args, an argument the schema does not declare" in str(caught.value)
