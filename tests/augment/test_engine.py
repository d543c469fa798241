"""The columnar engine renders exactly what ``render(map_events(events, mapping), harness)`` does.

Every test compares the engine, row for row, with the reference on the same (trajectory,
variant) pairs: adversarial drawn harnesses and events under variants planned from every
built-in rule, the rule-rich support harness under every protocol, the livestream oracle's
trajectories, and argument JSON that only the exact path can take (explicit nulls, floats
Python writes in exponent form, escapes, duplicate keys, NaN).
"""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hsa.augment import Context, Recipe, canonical_variant, map_events, plan
from hsa.augment.engine import Engine
from hsa.augment.mapping import Mapping, Step, ToolMap
from hsa.augment.planner import Variant
from hsa.augment.registry import all_rules
from hsa.datasets.schema import chat_messages
from hsa.errors import DatasetError, HsaError
from hsa.harness import (
    TRAJECTORY_SCHEMA,
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
from hsa.harness.protocols import CALL_FORMATS
from tests.augment.conftest import make_events, make_harness
from tests.harness.strategies import events as event_lists
from tests.harness.strategies import harnesses

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


def check_table(table: pa.Table, variants: list[Variant]) -> Engine:
    engine = Engine(variants)
    trajectories = [Trajectory.from_row(row) for row in table.to_pylist()]
    out_traj = np.repeat(np.arange(len(trajectories)), len(variants))
    out_var = np.tile(np.arange(len(variants)), len(trajectories))
    expected = [
        reference(trajectories[t], variants[v]) for t, v in zip(out_traj, out_var, strict=True)
    ]
    if any(isinstance(e, HsaError) for e in expected):
        with pytest.raises(DatasetError):
            engine.render(table, out_traj, out_var)
        return engine
    messages = engine.render(table, out_traj, out_var).to_pylist()
    tools = engine.tools_column(out_var).to_pylist()
    protocols = engine.protocol_column(out_var).to_pylist()
    for i, conv in enumerate(expected):
        variant = variants[out_var[i]]
        assert chat_messages(messages[i]) == conv.messages, (i, variant.harness.protocol.label)
        assert json.loads(tools[i]) == conv.tools
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


def test_matches_render_on_livestream_oracle() -> None:
    from hsa.envs import get
    from hsa.envs.livestream import solve

    env = get("livestream")
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
EXOTIC_ARGS = '{"query":NaN}'
EXACT_ARGS = [
    '{"query":null}',  # an explicit null
    '{"query":"x","limit":1e-07}',  # Python writes small floats in exponent form
    '{"query":"x","limit":1E5}',  # not how Python writes it
    '{"query": "spaced" , "limit" : 2}',  # whitespace outside strings
    '{"query":"\\u00e9\\/"}',  # escapes Python does not write
    '{"query":"a","query":"b"}',  # duplicate keys
    '{"query":"x","limit":-0}',
    '{"query":"\\ud83d\\ude00 tab\\t"}',
    '{"query":"x","limit":123456789012345678901234567890}',
    '{"query":"x","limit":1e400}',  # infinite in Python: each format writes it its own way
]


@pytest.mark.parametrize("protocol", PROTOCOLS, ids=lambda p: p.label)
def test_unusual_argument_json_matches_render(protocol: Protocol) -> None:
    harness = make_harness(protocol)
    rename = Mapping(
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
    for texts in (EXACT_ARGS, [EXOTIC_ARGS]):
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
