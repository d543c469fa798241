"""Mappings: application, inverse, composition and JSON form (hsa/augment/mapping.py)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hsa.augment.mapping import (
    EACH,
    IDENTITY,
    ArgumentClash,
    RewriteMapping,
    Step,
    ToolMap,
    apply_steps,
    map_events,
)
from hsa.harness.events import HookFired, SkillLoad, ToolCall, ToolResult, UserMessage

KEYS = st.text(alphabet="abcdefgh_", min_size=1, max_size=6)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**12), 10**12),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
)


@st.composite
def args_and_steps(draw, base=None):
    """An argument object and a chain of steps built from its own structure."""
    if base is None:
        top = draw(st.dictionaries(KEYS, SCALARS, min_size=1, max_size=5))
        items = draw(st.lists(st.dictionaries(KEYS, SCALARS, min_size=1, max_size=3), max_size=3))
        args = {**top, "items": items}
    else:
        args = base
        top = {k: v for k, v in base.items() if not isinstance(v, dict | list)} or {}
        items = base.get("items", [])
        if not top:
            return args, ()
    steps: list[Step] = []
    taken = set(args)
    for key in draw(st.lists(st.sampled_from(sorted(top)), unique=True, max_size=3)):
        kind = draw(st.sampled_from(["rename", "wrap", "enum"]))
        fresh = draw(KEYS.map(lambda k: f"n_{k}").filter(lambda k: k not in taken))
        taken.add(fresh)
        if kind == "rename":
            steps.append(Step("move", (key,), (fresh,)))
        elif kind == "wrap":
            steps += [Step("add", (fresh,)), Step("move", (key,), (fresh, key))]
        else:
            value = args[key]
            surface = draw(SCALARS.filter(lambda v, value=value: type(v) is not type(value)))
            steps.append(Step("enum", (key,), values=((value, surface),)))
    inner = sorted({k for item in items for k in item})
    if inner:
        key = draw(st.sampled_from(inner))
        steps.append(Step("move", ("items", EACH, key), ("items", EACH, f"{key}_x")))
    return args, tuple(steps)


@settings(max_examples=300, derandomize=True)
@given(args_and_steps())
def test_inverse_gives_back_the_arguments(case):
    args, steps = case
    mapping = RewriteMapping(tools={"t": ToolMap("u", steps)})
    events = [UserMessage("x"), ToolCall("call_0", "t", args), ToolResult("call_0", "{}")]
    surface = map_events(events, mapping)
    assert surface[1].tool == "u"
    back = map_events(surface, mapping.inverse())
    assert back == events
    if all(s.kind in ("move", "enum") and len(s.path) == len(s.dst or s.path) for s in steps):
        # renames keep a key's position, so the inverse restores the canonical key order
        assert json.dumps(back[1].args) == json.dumps(args)
    assert surface[2] == events[2]  # tool results are data and never rewritten


@st.composite
def steps_for(draw, args):
    """A chain of steps valid for ``args`` (the surface of an earlier mapping)."""
    return draw(args_and_steps(base=args))[1]


@settings(max_examples=200, derandomize=True)
@given(st.data())
def test_composition_is_applying_one_after_the_other(data):
    args, steps = data.draw(args_and_steps())
    more = data.draw(steps_for(apply_steps(args, steps)))
    a = RewriteMapping(tools={"t": ToolMap("u", steps)}, skills={"s": "s1"})
    b = RewriteMapping(tools={"u": ToolMap("v", more)}, skills={"s1": "s2"}, hooks={"h": "h2"})
    events = [ToolCall("call_0", "t", args), SkillLoad("s"), HookFired("h", "stop", {})]
    assert map_events(events, a.then(b)) == map_events(map_events(events, a), b)
    assert map_events(map_events(events, a.then(b)), a.then(b).inverse()) == events
    assert RewriteMapping.from_json(a.then(b).to_json()) == a.then(b)


def test_flatten_of_a_required_object_round_trips_even_when_empty():
    steps = (Step("move", ("f", "a"), ("f_a",)), Step("prune", ("f",)))
    for args in ({"f": {"a": 1}, "q": 2}, {"f": {}, "q": 2}):
        surface = apply_steps(args, steps)
        assert "f" not in surface
        assert apply_steps(surface, tuple(s.inverse() for s in reversed(steps))) == args


def test_enum_values_compare_with_their_type():
    step = Step("enum", ("x",), values=((1, "one"),))
    assert apply_steps({"x": 1}, (step,)) == {"x": "one"}
    assert apply_steps({"x": True}, (step,)) == {"x": True}
    assert apply_steps({"x": "1"}, (step,)) == {"x": "1"}


def test_identity_leaves_events_alone():
    events = [ToolCall("call_0", "t", {"a": 1})]
    assert IDENTITY.is_identity and map_events(events, IDENTITY) == events


# --- key order: what the built-in rules' steps do to calls drawn from their schemas ---

ORDER_NAMES = ["city", "q", "limit", "address", "mode", "x_y", "page", "zip"]
ORDER_ENUMS = [["fast", "slow"], ["low", "high"], ["on", "off", "auto"]]
ORDER_RULES = ["tools.wrap_args", "tools.flatten_args", "tools.rename_params", "tools.enum_values"]


def _order_schema(draw, depth: int) -> dict:
    """An object schema: scalar, enum, array and (down to ``depth``) object properties."""
    props: dict = {}
    for name in draw(st.lists(st.sampled_from(ORDER_NAMES), min_size=1, max_size=4, unique=True)):
        kinds = ["string", "integer", "enum", "array", "object"]
        kind = draw(st.sampled_from(kinds if depth else kinds[:-1]))
        if kind == "enum":
            props[name] = {"type": "string", "enum": draw(st.sampled_from(ORDER_ENUMS))}
        elif kind == "array":
            props[name] = {"type": "array", "items": {"type": "string"}}
        elif kind == "object":
            props[name] = _order_schema(draw, depth - 1)
        else:
            props[name] = {"type": kind}
    required = [k for k in props if draw(st.booleans())]
    return {"type": "object", "properties": props, "required": required}


def _order_value(draw, schema: dict):
    """A value of ``schema`` with its keys in a drawn order; an object holds one key at least
    (an empty object flattened away leaves no trace of its place: see the test below), and an
    enum's value may be one of another enum's spellings (a teacher's mistake)."""
    if "enum" in schema:
        return draw(st.sampled_from([*schema["enum"], *(v.upper() for v in schema["enum"])]))
    kind = schema["type"]
    if kind == "string":
        return draw(st.sampled_from(["", "a", "é😀"]))
    if kind == "integer":
        return draw(st.integers(-3, 3))
    if kind == "array":
        return draw(st.lists(st.sampled_from(["x", "y"]), max_size=2))
    props = schema["properties"]
    keys = [k for k in props if k in schema["required"] or draw(st.booleans())] or list(props)[:1]
    keys = draw(st.permutations(keys))
    return {k: _order_value(draw, props[k]) for k in keys}


@st.composite
def rule_chains(draw):
    """A harness of one drawn tool, a chain of the argument rules, a seed, and calls."""
    from hsa.harness import Harness, Tool

    schema = _order_schema(draw, 2)
    harness = Harness(id="h", tools=(Tool("t", "A tool.", schema),))
    chain = draw(st.lists(st.sampled_from(ORDER_RULES), min_size=1, max_size=3))
    calls = [_order_value(draw, schema) for _ in range(3)]
    # keys the schema does not declare, before or after the declared ones (left where they
    # are; between wrapped arguments they would leave no trace of their place)
    calls.append({"zz_extra": 1, **calls[0]})
    calls.append({**calls[1], "zz_extra": [True]})
    return harness, chain, draw(st.integers(0, 2**16)), calls


@settings(max_examples=150, derandomize=True, deadline=None)
@given(rule_chains())
def test_the_argument_rules_round_trip_key_order_exactly(case):
    from hsa.augment import apply_chain, get_rule

    harness, chain, seed, calls = case
    rewrite, _ = apply_chain(harness, [(get_rule(name), {}) for name in chain], seed=seed)
    mapping = rewrite.mapping
    events = [ToolCall(f"call_{i}", "t", args) for i, args in enumerate(calls)]
    surface = map_events(events, mapping)
    back = map_events(surface, mapping.inverse())
    for event, there, got in zip(events, surface, back, strict=True):
        assert json.dumps(got.args) == json.dumps(event.args), (chain, there.args)


def test_a_wrap_keeps_the_order_of_the_calls_arguments_both_ways():
    steps = (
        Step("ensure", ("w",)),
        *(Step("move", (k,), ("w", k)) for k in ("a", "b", "c")),  # the schema's order
    )
    inverse = tuple(s.inverse() for s in reversed(steps))
    for args in ({"a": 1, "b": 2, "c": 3}, {"c": 3, "a": 1}, {"x": 0, "b": 2, "a": 1, "y": 9}):
        surface = apply_steps(args, steps)
        # the wrapper where the arguments were, holding them in the call's order
        assert list(surface) == [k for k in ("x", "w", "y") if k in surface]
        assert list(surface["w"]) == [k for k in args if k in "abc"]
        assert json.dumps(apply_steps(surface, inverse)) == json.dumps(args)


def test_a_flatten_puts_the_fields_where_the_object_was_and_back():
    steps = (
        Step("move", ("o", "f"), ("o_f",)),
        Step("move", ("o", "g"), ("o_g",)),
        Step("prune", ("o",)),
    )
    inverse = tuple(s.inverse() for s in reversed(steps))
    for args in (
        {"x": 1, "o": {"g": 2, "f": 3}, "y": 4},
        {"o": {"f": 1, "z": 0, "g": 2}, "y": 4},  # a key the object's schema does not declare
        {"o": {"f": 1, "g": 2, "z": 0}},
    ):
        surface = apply_steps(args, steps)
        assert json.dumps(apply_steps(surface, inverse)) == json.dumps(args)
    assert list(apply_steps({"x": 1, "o": {"g": 2, "f": 3}, "y": 4}, steps)) == [
        "x",
        "o_g",
        "o_f",
        "y",
    ]
    # what leaves no trace: an empty object flattened away comes back last
    assert list(apply_steps(apply_steps({"o": {}, "y": 4}, steps), inverse)) == ["y", "o"]


def test_an_enum_respelling_keeps_a_surface_spelling_apart_from_the_value_it_respells():
    from hsa.augment.mapping import one_to_one

    pairs = one_to_one((("fast", "FAST"), ("slow", "SLOW")))
    assert pairs == (("fast", "FAST"), ("slow", "SLOW"), ("FAST", "fast"), ("SLOW", "slow"))
    # a chain (a value respelled into another value's spelling) closes into one cycle
    assert one_to_one((("a", "b"), ("b", "c"))) == (("a", "b"), ("b", "c"), ("c", "a"))
    mapping = RewriteMapping(tools={"ship": ToolMap("ship", (Step("enum", ("s",), values=pairs),))})
    for value, shown in (("fast", "FAST"), ("FAST", "fast"), ("Fast", "Fast")):
        surface = map_events([ToolCall("call_0", "ship", {"s": value})], mapping)
        assert surface[0].args == {"s": shown}
        assert map_events(surface, mapping.inverse())[0].args == {"s": value}


def test_an_enum_value_respelled_to_an_object_and_then_again_is_a_plain_value():
    # an enum of objects (JSON Schema allows one): two steps at one path, the second
    # respelling what the first made, with and without a move among the steps
    steps = [
        Step("enum", ("a",), values=((False, {"a": 1}),)),
        Step("enum", ("a",), values=(({"a": 1}, None),)),
    ]
    assert apply_steps({"a": False}, steps) == {"a": None}
    moved = [*steps, Step("move", ("a",), dst=("w", "a"))]
    assert apply_steps({"a": False, "b": 1}, moved) == {"w": {"a": None}, "b": 1}


@pytest.mark.parametrize(
    ("steps", "args", "at"),
    [
        # a wrap into a name the call holds a scalar under
        (
            (Step("ensure", ("args",)), Step("move", ("city",), ("args", "city"))),
            {"args": 7},
            "args",
        ),
        # a move (a rename, a flatten) onto a key the call has
        ((Step("move", ("city",), ("town",)),), {"town": "Lyon"}, "town"),
        ((Step("move", ("a", "city"), ("a_city",)),), {"a": {"city": 2}, "a_city": 1}, "a_city"),
        # a path through a key that holds no object
        ((Step("move", ("city",), ("w", "city")),), {"w": [1]}, "w"),
        # a parameter added where the call has a value: the inverse would drop it
        ((Step("add", ("trace_id",)),), {"trace_id": "abc"}, "trace_id"),
        ((Step("move", ("xs", EACH, "a"), ("xs", EACH, "b")),), {"xs": [{"b": 0}]}, "xs.0.b"),
    ],
)
def test_a_step_that_would_overwrite_a_value_is_refused(steps, args, at):
    call = {"city": "Paris", **args} if "xs" not in args else {"xs": [{"a": 1, "b": 0}]}
    mapping = RewriteMapping(tools={"t": ToolMap("u", steps)})
    with pytest.raises(ArgumentClash) as caught:
        map_events([ToolCall("call_0", "t", call)], mapping)
    assert caught.value.where == f"tool 't' (call 'call_0'): arguments.{at}"
    assert "would overwrite the call's value" in caught.value.message


def _find_user(extra: dict | None = None):
    from hsa.harness import Harness, Tool

    names = {"first_name": {"type": "string"}, "last_name": {"type": "string"}}
    schema = {"type": "object", "properties": names, **(extra or {})}
    return Harness(id="h", tools=[Tool("find_user", "Find a user.", schema)])


def test_a_move_onto_a_declared_parameter_is_not_said_to_be_undeclared():
    # the clash named an argument "the schema does not declare" and sent the author to
    # Context.arguments, where the parameter in the way was the schema's own
    onto = RewriteMapping(
        tools={"find_user": ToolMap("find_user", (Step("move", ("first_name",), ("last_name",)),))}
    )
    call = ToolCall("c1", "find_user", {"first_name": "Yusuf", "last_name": "Rossi"})
    with pytest.raises(ArgumentClash) as caught:
        map_events([call], onto, _find_user())
    said = caught.value.message
    assert "at 'last_name', a parameter the schema declares" in said
    assert "does not declare" not in said and "Context.arguments" not in said
    assert caught.value.where == "tool 'find_user' (call 'c1'): arguments.last_name"


def test_a_clash_with_an_undeclared_argument_says_so_and_without_a_schema_names_both():
    made = RewriteMapping(
        tools={"find_user": ToolMap("find_user", (Step("move", ("first_name",), ("name",)),))}
    )
    call = ToolCall("c1", "find_user", {"first_name": "Yusuf", "name": "Y. Rossi"})
    with pytest.raises(ArgumentClash) as caught:
        map_events([call], made, _find_user())
    said = caught.value.message
    assert "at 'name', an argument the schema does not declare" in said
    assert "hsa.augment.Context.arguments" in said
    # a schema that cannot tell (a combinator), and no schema at all: neither is claimed
    for harness in (_find_user({"anyOf": [{"required": ["name"]}]}), None):
        with pytest.raises(ArgumentClash) as caught:
            map_events([call], made, harness)
        said = caught.value.message
        assert "schema declares" not in said and "does not declare, and" not in said
        assert "onto another parameter's" in said and "Context.arguments" in said


def test_a_wrap_into_an_object_the_call_has_merges_and_round_trips():
    steps = (Step("ensure", ("w",)), Step("move", ("city",), ("w", "city")))
    mapping = RewriteMapping(tools={"t": ToolMap("t", steps)})
    events = [ToolCall("call_0", "t", {"city": "Paris", "w": {"x": 1}})]
    surface = map_events(events, mapping)
    assert surface[0].args == {"w": {"x": 1, "city": "Paris"}}
    assert map_events(surface, mapping.inverse()) == events


@settings(max_examples=150, derandomize=True)
@given(st.data())
def test_no_step_loses_a_value_silently(data):
    args, steps = data.draw(args_and_steps())
    made = sorted({k for s in steps for k in (*s.path, *(s.dst or ())) if k.startswith("n_")})
    if made:  # the call also holds, undeclared, names the steps make
        extra = data.draw(st.lists(st.sampled_from(made), unique=True, min_size=1))
        args = {**args, **{k: data.draw(SCALARS) for k in extra}}
    mapping = RewriteMapping(tools={"t": ToolMap("u", steps)})
    events = [ToolCall("call_0", "t", args)]
    try:
        surface = map_events(events, mapping)
    except ArgumentClash:
        return  # refused, not lost
    assert map_events(surface, mapping.inverse()) == events


# --- long enum tables: looked up through an index, as the pairs are scanned ---

_ENUM_VALUES = st.one_of(
    st.sampled_from([0, 1, 1.0, -0.0, True, False, None, "1", "a", float("nan")]),
    st.integers(-3, 3),
    st.dictionaries(st.sampled_from("ab"), st.sampled_from([1, 1.0, True]), max_size=1),
    st.lists(st.sampled_from([1, True]), max_size=1),
)


def _scanned(table, value):
    for canonical, surface in table:
        if type(canonical) is type(value) and canonical == value:
            return surface
    return value


@settings(max_examples=80, deadline=None, derandomize=True)
@given(
    pairs=st.lists(st.tuples(_ENUM_VALUES, st.integers()), max_size=8),
    padding=st.integers(0, 80),
    value=_ENUM_VALUES,
)
def test_a_long_enum_table_respells_as_its_pairs_scanned_in_order(pairs, padding, value):
    from hsa.augment.mapping import respelling

    table = (*pairs, *((f"pad{i}", i) for i in range(padding)))
    assert repr(respelling(table, value, value)) == repr(_scanned(table, value))
    assert repr(respelling(list(table), value, value)) == repr(_scanned(table, value))


def test_a_value_no_enum_pair_respells_keeps_its_place_among_its_neighbours() -> None:
    # an array no pair matches was given back as a copy, which apply_steps put back at the
    # end of the call's keys: the engine's rows (which keep the order) no longer equaled it
    steps = [
        Step("enum", ("limit",), values=(("celsius", "Celsius"), ("fahrenheit", "Fahrenheit"))),
        Step("ensure", ("params",)),
        Step("move", ("limit",), ("params", "limit")),
    ]
    args = {"limit": [], "city": None}
    assert list(apply_steps(args, steps)) == ["params", "city"]
    assert apply_steps({"limit": "celsius", "city": None}, steps[:1]) == {
        "limit": "Celsius",
        "city": None,
    }
