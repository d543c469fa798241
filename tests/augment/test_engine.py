"""The columnar engine renders exactly what ``render(map_events(events, mapping), harness)`` does.

Every test compares the engine, row for row, with the reference on the same (trajectory,
variant) pairs: adversarial drawn harnesses and events under variants planned from every
built-in rule, the rule-rich support harness under every protocol, the livestream oracle's
trajectories, and argument JSON that only the exact path can take (explicit nulls, floats
Python writes in exponent form, escapes, duplicate keys, NaN). Rows with one defect each (bad
ids, metadata, arguments, payloads, kinds, fields, unknown skills and hooks) are refused by the
engine exactly when the reference refuses them, naming the same row, place and problem.
"""

from __future__ import annotations

import copy
import json
from dataclasses import replace

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hsa.augment import Context, Recipe, canonical_variant, map_events, plan
from hsa.augment.engine import Engine
from hsa.augment.mapping import RewriteMapping, Step, ToolMap
from hsa.augment.planner import Variant
from hsa.augment.registry import all_rules
from hsa.datasets.schema import chat_messages
from hsa.errors import DatasetError, HsaError
from hsa.harness import (
    TRAJECTORY_SCHEMA,
    AssistantMessage,
    Harness,
    HookFired,
    Protocol,
    SkillLoad,
    ToolCall,
    ToolResult,
    Trajectory,
    UserMessage,
    render,
    trajectories_to_table,
)
from hsa.harness.events import EVENT_STRUCT, dumps_json
from hsa.harness.protocols import CALL_FORMATS
from tests.augment.conftest import make_events, make_harness
from tests.harness.strategies import arg_names, harnesses, json_values
from tests.harness.strategies import events as event_lists
from tests.harness.strategies import texts as text_values

PROTOCOLS = [Protocol()] + [
    Protocol("text", fmt, tag, doc)
    for fmt in sorted(CALL_FORMATS)
    for tag, doc in ((False, "json"), (True, "python"))
]


def everything(variants: int = 6, seed: int = 0) -> Recipe:
    """A recipe drawing from every built-in rule."""
    names = [r.name for r in all_rules() if r.fn.__module__.startswith("hsa.augment.rules")]
    return Recipe.from_dict(
        {
            "seed": seed,
            "variants_per_harness": variants,
            "variants_per_trajectory": 1,
            "include_canonical": True,
            "min_rules": 2,
            "max_rules": 12,
            "rules": [{"rule": name, "probability": 0.4} for name in names],
        }
    )


def reference(trajectory: Trajectory, variant: Variant):
    """What render gives for one pair, or the error it raises."""
    try:
        return render(map_events(trajectory.events, variant.mapping), variant.harness)
    except HsaError as exc:
        return exc


def check(trajectories: list[Trajectory], variants: list[Variant]) -> Engine:
    """Render every (trajectory, variant) pair with the engine and compare with render."""
    return check_table(trajectories_to_table(trajectories), variants)


def reference_row(row: dict, name: str, variant: Variant):
    """What the reference gives for one table row, or its error, naming the row as the engine
    does (``row 3 (id 'x')``, then ``.events[i]``, ``.metadata`` or ``.id``)."""
    try:
        trajectory = Trajectory.from_row(row, where=name)
    except HsaError as exc:
        return exc
    got = reference(trajectory, variant)
    if isinstance(got, HsaError):
        got.where = f"{name}.{got.where}" if got.where else name
    return got


def check_table(table: pa.Table, variants: list[Variant]) -> Engine:
    """The engine on every (row, variant) pair equals the reference, or refuses as it does:
    with an error naming a row and place where the reference fails, with the same message."""
    engine = Engine(variants)
    rows = table.to_pylist()
    names = [f"row {i} (id {row['id']!r})" for i, row in enumerate(rows)]
    out_traj = np.repeat(np.arange(len(rows)), len(variants))
    out_var = np.tile(np.arange(len(variants)), len(rows))
    expected = [
        reference_row(rows[t], names[t], variants[v])
        for t, v in zip(out_traj, out_var, strict=True)
    ]
    failed = {(e.where, e.message) for e in expected if isinstance(e, HsaError)}
    if failed:
        with pytest.raises(DatasetError) as refused:
            engine.render(table, out_traj, out_var)
        assert (refused.value.where, refused.value.message) in failed
        return engine
    messages = engine.render(table, out_traj, out_var).to_pylist()
    tools = engine.tools_column(out_var).to_pylist()
    protocols = engine.protocol_column(out_var).to_pylist()
    for i, conv in enumerate(expected):
        variant = variants[out_var[i]]
        assert chat_messages(messages[i]) == conv.messages, (i, variant.harness.protocol.label)
        assert (json.loads(tools[i]) if tools[i] is not None else []) == conv.tools
        assert (tools[i] is None) == (not conv.tools)  # no tools sent: null
        assert protocols[i] == variant.harness.protocol.label
    return engine


def planned(harness: Harness, trajectories: list[Trajectory], seed: int, n: int = 6):
    context = Context.union(Context.of(t.events) for t in trajectories)
    return plan(harness, everything(n, seed), seed=seed, context=context)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_matches_render_on_drawn_harnesses_and_events(data: st.DataObject) -> None:
    harness = data.draw(harnesses())
    trajectories = [
        Trajectory(f"t{i}", tuple(data.draw(event_lists(harness))))
        for i in range(data.draw(st.integers(1, 3)))
    ]
    seed = data.draw(st.integers(0, 2**16))
    check(trajectories, planned(harness, trajectories, seed, n=4))


@pytest.mark.parametrize("protocol", PROTOCOLS, ids=lambda p: p.label)
def test_matches_render_on_every_protocol(protocol: Protocol) -> None:
    harness = make_harness(protocol)
    events = make_events()
    trajectories = [
        Trajectory("a", events),
        Trajectory("b", events[:7]),
        Trajectory("c", tuple(e for e in events if not isinstance(e, HookFired))),
    ]
    variants = [canonical_variant(harness)]
    for seed in range(2):
        variants += planned(harness, trajectories, seed)[1:]
    engine = check(trajectories, variants)
    assert engine.stats.calls_exact == 0
    assert engine.stats.rows_exact == 0


def with_notes_among_results() -> tuple:
    """``make_events`` with hooks fired among the results of its two parallel calls (call_3,
    call_4): before the first, after it (twice), and after the last."""
    events = list(make_events())
    audit = events[8]
    greet = replace(events[0], payload={"tier": "silver"})
    events[13:15] = [audit, events[13], audit, greet, events[14], audit, greet]
    return tuple(events)


@pytest.mark.parametrize("protocol", PROTOCOLS, ids=lambda p: p.label)
def test_notes_among_parallel_results_match_render(protocol: Protocol) -> None:
    # a note fired among the results of one message's calls is shown after the last of them
    # (OpenAI's API refuses one between them), in the engine as in render; the audit hook
    # as each variant injects it
    harness = make_harness(protocol)
    events = with_notes_among_results()
    trajectories = [Trajectory("a", events), Trajectory("b", make_events())]
    variants = [canonical_variant(harness)] + [
        canonical_variant(
            harness.replace(
                hooks=tuple(
                    h if h.id != "audit" else replace(h, inject=inject) for h in harness.hooks
                )
            )
        )
        for inject in ("system", "user")
    ]
    variants += planned(harness, trajectories, 0)[1:]
    engine = check(trajectories, variants)
    assert engine.stats.rows_exact == 0
    for variant in variants[:3]:
        messages = render(events, variant.harness).messages
        roles = [m["role"] for m in messages]
        results = [i for i, r in enumerate(roles) if r == "tool" and i > roles.index("tool") + 2]
        # the two parallel results stand together, the notes after them in firing order
        last = results[-1]
        assert results[-2:] == [last - 1, last], roles
        silver = [i for i, m in enumerate(messages) if "silver" in (m["content"] or "")]
        assert len(silver) == 2 and silver[0] > last, roles


@pytest.mark.parametrize("protocol", PROTOCOLS, ids=lambda p: p.label)
def test_empty_text_before_calls_matches_render(protocol: Protocol) -> None:
    # reasoning and no text before calls (and before a skill load): one message with the calls
    events = list(make_events())
    events[3] = AssistantMessage("", "the policy first")
    events[5] = AssistantMessage("", "then the order")
    harness = make_harness(protocol)
    trajectories = [Trajectory("a", tuple(events))]
    check(trajectories, [canonical_variant(harness), *planned(harness, trajectories, 0)[1:]])
    messages = render(trajectories[0].events, harness).messages
    if not protocol.is_api:
        assert all(m["content"] for m in messages if m["role"] == "assistant")
    else:  # null beside the calls, as a turn without reasoning has it (it was "")
        reasoned = [m for m in messages if m.get("reasoning_content")]
        assert len(reasoned) == 2 and all(m["content"] is None for m in reasoned)


def test_matches_render_on_livestream_oracle() -> None:
    from hsa.envs import get_env
    from hsa.envs.livestream import solve

    env = get_env("livestream")
    tasks = env.tasks()[::60]
    trajectories = [solve(env, task).trajectory for task in tasks]
    harness = env.harness()
    variants = planned(harness, trajectories, 7, n=6)
    variants += [
        replace(v, variant_id=v.variant_id + "-t", harness=v.harness.replace(protocol=p))
        for v, p in zip(variants[1:], PROTOCOLS[1:], strict=False)
    ]
    engine = check(trajectories, variants)
    assert engine.stats.calls_exact == 0
    assert engine.stats.hooks_exact == 0


#: not JSON, but Python reads it (the python call format then refuses it, as render does)
#: refused as from_row refuses them: no row can hold NaN or an infinity (1e400 reads as one),
#: nor arguments with an integer past 64 bits
EXOTIC_ARGS = [
    '{"query":NaN}',
    '{"query":"x","limit":1e400}',
    '{"query":"\\ud800"}',
    '{"query":"x","limit":123456789012345678901234567890}',  # past what datasets reads
]
EXACT_ARGS = [
    '{"query":null}',  # an explicit null
    '{"query":"x","limit":1e-07}',  # Python writes small floats in exponent form
    '{"query":"x","limit":1E5}',  # not how Python writes it
    '{"query": "spaced" , "limit" : 2}',  # whitespace outside strings
    '{"query":"\\u00e9\\/"}',  # escapes Python does not write
    '{"query":"a","query":"b"}',  # duplicate keys
    '{"query":"x","limit":-0}',
    '{"query":"\\ud83d\\ude00 tab\\t"}',
]


@pytest.mark.parametrize("protocol", PROTOCOLS, ids=lambda p: p.label)
def test_unusual_argument_json_matches_render(protocol: Protocol) -> None:
    harness = make_harness(protocol)
    rename = RewriteMapping(
        tools={
            "search": ToolMap(
                "find",
                (
                    Step("move", ("query",), ("q",)),
                    Step("enum", ("sort",), values=(("price", "cost"),)),
                ),
            )
        }
    )
    tools = [replace(t, name="find") if t.name == "search" else t for t in harness.tools]
    variants = [
        canonical_variant(harness),
        Variant(
            "v1", harness.id, (("test.rename", "1", {}),), harness.replace(tools=tools), rename
        ),
    ]
    for texts in (EXACT_ARGS, *([text] for text in EXOTIC_ARGS)):
        trajectories = [
            Trajectory(
                f"x{i}",
                (UserMessage("go"), ToolCall("call_0", "search", {}), ToolResult("call_0", "ok")),
            )
            for i in range(len(texts))
        ]
        # store the argument texts as written, not as Python would write them
        rows = trajectories_to_table(trajectories).to_pylist()
        for row, text in zip(rows, texts, strict=True):
            row["events"][1]["args"] = text
        engine = check_table(pa.Table.from_pylist(rows, schema=TRAJECTORY_SCHEMA), variants)
        if texts is EXACT_ARGS:  # duplicate keys at least need the exact path
            assert engine.stats.calls_exact >= 2


def test_bad_arguments_name_the_row() -> None:
    harness = make_harness()
    trajectory = Trajectory("bad", (UserMessage("go"), ToolCall("call_0", "search", {})))
    table = trajectories_to_table([trajectory])
    rows = table.to_pylist()
    rows[0]["events"][1]["args"] = '{"query": '
    table = pa.Table.from_pylist(rows, schema=table.schema)
    engine = Engine([canonical_variant(harness)])
    with pytest.raises(DatasetError, match=r"row 0 \(id 'bad'\)\.events\[1\]"):
        engine.render(table, np.array([0]), np.array([0]))


def test_a_move_onto_a_declared_parameter_is_said_so_by_the_engine() -> None:
    # hsa augment said "an argument the schema does not declare" of a parameter it declares
    from hsa.harness import Tool

    names = {"first_name": {"type": "string"}, "last_name": {"type": "string"}}
    harness = make_harness().replace(
        tools=[Tool("find_user", "Find.", {"type": "object", "properties": names})]
    )
    steps = (Step("move", ("first_name",), ("last_name",)),)
    variant = replace(
        canonical_variant(harness),
        variant_id="onto",
        mapping=RewriteMapping(tools={"find_user": ToolMap("find_user", steps)}),
    )
    call = ToolCall("call_0", "find_user", {"first_name": "Yusuf", "last_name": "Rossi"})
    table = trajectories_to_table([Trajectory("t", (UserMessage("hi"), call))])
    engine = Engine()
    engine.add(variant, harness)
    with pytest.raises(DatasetError) as caught:
        engine.render(table, np.array([0]), np.array([0]))
    said = str(caught.value)
    assert "at 'last_name', a parameter the schema declares" in said, said
    assert "does not declare" not in said and "Context.arguments" not in said


def test_unknown_hook_and_skill_name_the_row() -> None:
    harness = make_harness()
    engine = Engine([canonical_variant(harness)])
    for event in (HookFired("nope", "stop", {}), SkillLoad("nope")):
        table = trajectories_to_table([Trajectory("t", (UserMessage("hi"), event))])
        with pytest.raises(DatasetError, match=r"nope.*|events\[1\]"):
            engine.render(table, np.array([0]), np.array([0]))


def test_empty_batch_and_row_order() -> None:
    harness = make_harness()
    variants = [canonical_variant(harness)]
    trajectories = [Trajectory(f"t{i}", make_events()[: i + 2]) for i in range(5)]
    engine = Engine(variants)
    table = trajectories_to_table(trajectories)
    assert engine.render(table, np.zeros(0, int), np.zeros(0, int)).to_pylist() == []
    order = np.array([4, 0, 3, 3, 1])
    messages = engine.render(table, order, np.zeros(5, int)).to_pylist()
    for i, t in enumerate(order):
        assert chat_messages(messages[i]) == reference(trajectories[t], variants[0]).messages


# --- invalid rows: the engine refuses exactly what the reference refuses ------------------

#: JSON texts at the edges of what Python's json reads: some objects, some not, some not JSON
EDGE_JSON = (
    "",
    " ",
    "{}",
    "[]",
    "null",
    "5",
    '"x"',
    "true",
    "{",
    "{bad",
    '{"a":"x"} {"b":"y"}',
    '{"a":"x",}',
    '{"a" "x"}',
    '{"a":1 2}',
    '{"a":1e5 2}',
    '{"a":"x"}x',
    '{"a":"\\q"}',
    '{"\\q":"x"}',
    '{"a":"\\u00e9\\ud800"}',
    '{"a":"\\u00zz"}',
    '{"a":NaN}',
    '{"a":Infinity}',
    '{"a":-0,"b":1E5}',
    '{"a":1,"a":"x"}',
    '{"a":"x","a":1}',
    ' {"a" : "x" , "b" : [1, {"c": null}]} ',
    '{"a":"tab\tinside"}',
    '{"a":{"b":"x"}}',
    '{"a":["x"]}',
    '{"a":null}',
    '{"a":false}',
)
REQUIRED_FIELDS = {
    "user": ("text",),
    "assistant": ("text",),
    "tool_call": ("call_id", "tool"),
    "tool_result": ("call_id", "content"),
    "hook": ("hook_id", "hook_event"),
    "skill_load": ("skill_id",),
}
DEFECTS = (
    "id",
    "events",
    "metadata",
    "null_event",
    "kind",
    "field",
    "args",
    "payload",
    "skill",
    "hook",
    "tool",
    "result",
)


def json_texts() -> st.SearchStrategy[str]:
    """Texts for a JSON-object field: edge cases, random text, and any JSON value written out
    (objects whose values are all strings included, the one payload form that is valid)."""
    return st.one_of(
        st.sampled_from(EDGE_JSON),
        st.text(max_size=12),
        json_values().map(dumps_json),
        st.dictionaries(arg_names(), text_values(), max_size=3).map(dumps_json),
    )


def new_event(kind: str, **fields) -> dict:
    return {**dict.fromkeys(EVENT_STRUCT.names), "kind": kind, **fields}


def with_defect(draw: st.DrawFn, row: dict, harness: Harness, defect: str) -> dict:
    """``row`` with one ``defect`` (which the reference may or may not refuse)."""
    row = copy.deepcopy(row)
    events = row["events"]
    at = draw(st.integers(0, len(events)))  # where a new event goes, or which one changes
    hook_ids = [h.id for h in harness.hooks] or ["greet"]
    if defect == "id":
        row["id"] = None
    elif defect == "events":
        row["events"] = None
    elif defect == "metadata":
        row["metadata"] = draw(json_texts())
    elif defect in ("null_event", "kind", "field") and at < len(events):
        if defect == "null_event":
            events[at] = None
        elif defect == "kind":
            events[at]["kind"] = draw(st.none() | st.text(max_size=10))
        else:
            events[at][draw(st.sampled_from(REQUIRED_FIELDS[events[at]["kind"]]))] = None
    elif defect == "args":
        tool = draw(st.sampled_from([t.name for t in harness.tools] or ["search"]))
        events.insert(at, new_event("tool_call", call_id="cx", tool=tool, args=draw(json_texts())))
    elif defect == "payload":
        hook_id = draw(st.sampled_from(hook_ids))
        events.insert(
            at, new_event("hook", hook_id=hook_id, hook_event="stop", payload=draw(json_texts()))
        )
    elif defect == "skill":
        skill_ids = [s.id for s in harness.skills] + ["no-such-skill"]
        events.insert(at, new_event("skill_load", skill_id=draw(st.sampled_from(skill_ids))))
    elif defect == "hook":
        events.insert(at, new_event("hook", hook_id=draw(st.text(max_size=6)), hook_event="stop"))
    elif defect == "tool":  # any name, called with no arguments
        events.insert(at, new_event("tool_call", call_id="cx", tool=draw(st.text(max_size=8))))
    else:  # a result whose call id matches no call, or a null-kind event
        events.insert(at, new_event("tool_result", call_id=draw(st.text(max_size=4)), content=""))
    return row


@pytest.mark.parametrize("defect", DEFECTS)
@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_refuses_exactly_what_render_refuses(defect: str, data: st.DataObject) -> None:
    """One row of a batch has one defect: the engine refuses iff the reference does, naming
    the same row, place and problem; otherwise it renders every row as the reference does."""
    harness = data.draw(harnesses())
    trajectories = [
        Trajectory(f"t{i}", tuple(data.draw(event_lists(harness, max_steps=4))))
        for i in range(data.draw(st.integers(1, 3)))
    ]
    variants = planned(harness, trajectories, data.draw(st.integers(0, 2**16)), n=2)
    rows = trajectories_to_table(trajectories).to_pylist()
    bad = data.draw(st.integers(0, len(rows) - 1))
    rows[bad] = with_defect(data.draw, rows[bad], harness, defect)
    check_table(pa.Table.from_pylist(rows, schema=TRAJECTORY_SCHEMA), variants)
