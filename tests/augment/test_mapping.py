"""Mappings: application, inverse, composition and JSON form (hsa/augment/mapping.py)."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from hsa.augment.mapping import (
    EACH,
    IDENTITY,
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
