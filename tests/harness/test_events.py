"""Canonical events: the Arrow schema round-trips through Parquet; malformed rows name the row."""

from __future__ import annotations

import io
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hsa.errors import HsaError
from hsa.harness import (
    TRAJECTORY_SCHEMA,
    AssistantMessage,
    HookFired,
    SkillLoad,
    ToolCall,
    ToolResult,
    Trajectory,
    UserMessage,
    normalize_call_ids,
    trajectories_from_table,
    trajectories_to_table,
)
from hsa.harness.events import event_from_row, event_to_row, events_to_rows
from tests.harness.strategies import events, harnesses, same_events, trajectories


def _through_parquet(table: pa.Table) -> pa.Table:
    buffer = io.BytesIO()
    pq.write_table(table, buffer)
    buffer.seek(0)
    return pq.read_table(buffer)


def _same(a: list[Trajectory], b: list[Trajectory]) -> bool:
    return a == b and all(
        same_events(x.events, y.events)
        and json.dumps(x.metadata) == json.dumps(y.metadata)  # 1 vs 1.0 vs True, key order
        for x, y in zip(a, b, strict=True)
    )


@settings(max_examples=80, derandomize=True, deadline=None)
@given(st.lists(trajectories(), max_size=3))
def test_parquet_round_trip(trajs: list[Trajectory]) -> None:
    table = trajectories_to_table(trajs)
    assert table.schema == TRAJECTORY_SCHEMA
    assert _same(trajectories_from_table(_through_parquet(table)), trajs)


@settings(max_examples=30, derandomize=True, deadline=None)
@given(data=st.data())
def test_parquet_round_trip_of_harness_trajectories(data: st.DataObject) -> None:
    harness = data.draw(harnesses())
    trajs = [data.draw(trajectories(harness)) for _ in range(2)]
    assert _same(trajectories_from_table(_through_parquet(trajectories_to_table(trajs))), trajs)


def test_event_rows_keep_key_order_and_types() -> None:
    call = ToolCall("call_0", "f", {"b": 1, "a": 1.0, "c": True, "d": None, "e": [{"z": 0}]})
    row = event_to_row(call)
    assert row["args"] == '{"b":1,"a":1.0,"c":true,"d":null,"e":[{"z":0}]}'
    assert row["kind"] == "tool_call" and row["text"] is None
    back = event_from_row(row)
    assert list(back.args) == ["b", "a", "c", "d", "e"]
    assert same_events([back], [call])


def test_every_event_kind_round_trips() -> None:
    evs = [
        UserMessage("hi"),
        AssistantMessage("", reasoning="think"),
        ToolCall("call_0", "f", {}),
        ToolResult("call_0", "", is_error=True),
        HookFired("h", "stop", {"reason": "x"}),
        SkillLoad("s"),
    ]
    assert [event_from_row(r) for r in events_to_rows(evs)] == evs


def _row(**fields) -> dict:
    return {**Trajectory("t1", ()).to_row(), **fields}


_EVENT_FIELDS = TRAJECTORY_SCHEMA.field("events").type.value_type.names


def _event(**fields) -> dict:
    return {**dict.fromkeys(_EVENT_FIELDS), **fields}


@pytest.mark.parametrize(
    ("row", "where", "message"),
    [
        (_row(metadata="{nope"), "row 1.metadata", "malformed metadata"),
        (_row(metadata="[1]"), "row 1.metadata", "JSON object"),
        (_row(events=[_event(kind="robot")]), "row 1.events[0]", "unknown event kind 'robot'"),
        (_row(events=[_event(kind="user")]), "row 1.events[0]", "'text' must be a string"),
        (
            _row(events=[_event(kind="user", text="x"), _event(kind="tool_call", tool="f")]),
            "row 1.events[1]",
            "'call_id' must be a string",
        ),
        (
            _row(events=[_event(kind="tool_call", call_id="c", tool="f", args="{bad")]),
            "row 1.events[0]",
            "malformed tool_call event",
        ),
        (
            _row(events=[_event(kind="tool_call", call_id="c", tool="f", args="[1, 2]")]),
            "row 1.events[0]",
            "must hold a JSON object",
        ),
        (
            _row(events=[_event(kind="hook", hook_id="h", hook_event="stop", payload='{"a": 1}')]),
            "row 1.events[0]",
            "map names to strings",
        ),
    ],
)
def test_malformed_rows_in_a_table_name_the_row(row: dict, where: str, message: str) -> None:
    good = Trajectory("t0", (UserMessage("ok"),)).to_row()
    table = pa.Table.from_pylist([good, row], schema=TRAJECTORY_SCHEMA.remove_metadata())
    with pytest.raises(HsaError, match=message) as err:
        trajectories_from_table(_through_parquet(table))
    assert err.value.where == where
    assert str(err.value).startswith(f"{where}: ")


@pytest.mark.parametrize(
    ("row", "where", "message"),
    [
        (_row(id=None), "row 2.id", "string id"),
        (_row(events=None), "row 2.events", "list of events"),
        (_row(source=3), "row 2.source", "string or null"),
        (_row(events=["not a struct"]), "row 2.events[0]", "must be a struct"),
        (
            _row(events=[_event(kind="assistant", text="x", reasoning=5)]),
            "row 2.events[0]",
            "'reasoning' must be a string or null",
        ),
    ],
)
def test_malformed_rows_from_other_sources_name_the_row(
    row: dict, where: str, message: str
) -> None:
    with pytest.raises(HsaError, match=message) as err:
        Trajectory.from_row(row, where="row 2")
    assert err.value.where == where


def test_normalize_call_ids() -> None:
    evs = [
        ToolCall("x", "f", {}),
        SkillLoad("s"),
        ToolCall("y", "g", {}),
        ToolResult("y", "1"),
        ToolResult("x", "2"),
        ToolResult("unknown", "3"),
    ]
    assert normalize_call_ids(evs) == [
        ToolCall("call_0", "f", {}),
        SkillLoad("s"),
        ToolCall("call_2", "g", {}),
        ToolResult("call_2", "1"),
        ToolResult("call_0", "2"),
        ToolResult("unknown", "3"),
    ]


@settings(max_examples=50, derandomize=True, deadline=None)
@given(events(normalized=False))
def test_normalize_call_ids_is_idempotent(evs: list) -> None:
    once = normalize_call_ids(evs)
    assert normalize_call_ids(once) == once
    assert len(once) == len(evs)


def test_a_lone_surrogate_escape_is_refused_and_a_pair_is_kept() -> None:
    base = {"kind": "tool_call", "call_id": "c0", "tool": "find"}
    # a pair is one character (U+1F600); alone, half of it cannot be written as UTF-8
    pair = event_from_row({**base, "args": '{"q":"\\ud83d\\ude00"}'})
    assert pair.args == {"q": "\U0001f600"}
    with pytest.raises(HsaError, match="lone surrogate"):
        event_from_row({**base, "args": '{"q":"\\u00e9\\ud800"}'})
    with pytest.raises(HsaError, match="lone surrogate"):
        event_from_row(
            {"kind": "hook", "hook_id": "h", "hook_event": "stop", "payload": '{"a":"\\udfff"}'}
        )


def test_events_no_row_can_hold_are_refused_as_they_are_written() -> None:
    # the readers refuse them: a row written with them could never be read back
    nan = Trajectory("t", (UserMessage("hi"), ToolCall("c0", "search", {"q": float("nan")})))
    with pytest.raises(HsaError, match=r"args\.q: NaN or Infinity") as caught:
        nan.to_row()
    assert caught.value.where == "events[1]"
    wide = Trajectory("t", (ToolCall("c0", "search", {"n": 2**70}),))
    with pytest.raises(HsaError, match=r"args\.n: an integer beyond 64 bits"):
        wide.to_row()


@pytest.mark.parametrize("value", [float("nan"), float("-inf"), "\ud800"])
def test_metadata_no_row_can_hold_is_refused_naming_the_trajectory(value) -> None:
    # written, NaN became the non-JSON text NaN and a lone surrogate failed in the encoder
    trajectory = Trajectory("t7", (UserMessage("hi"),), metadata={"run": {"score": value}})
    with pytest.raises(HsaError, match=r"metadata\.run\.score: ") as caught:
        trajectories_to_table([trajectory])
    assert caught.value.where == "trajectory 't7'"
    wide = Trajectory("t8", (UserMessage("hi"),), metadata={"n": 2**70})  # JSON text holds it
    assert trajectories_from_table(trajectories_to_table([wide]))[0].metadata == {"n": 2**70}


def test_results_go_in_call_order_each_with_the_hooks_it_fired():
    from hsa.harness.events import (
        HookFired,
        ToolCall,
        ToolResult,
        UserMessage,
        results_in_call_order,
    )

    a, b = ToolCall("a", "f", {"city": "Paris"}), ToolCall("b", "f", {"city": "Tokyo"})
    fired = HookFired("audit", "tool_result", {"tool": "f"})
    events = [UserMessage("?"), a, b, ToolResult("b", "20C"), fired, ToolResult("a", "15C")]
    ordered, moved = results_in_call_order(events)
    assert moved and ordered == [
        UserMessage("?"),
        a,
        b,
        ToolResult("a", "15C"),
        ToolResult("b", "20C"),
        fired,
    ]
    assert results_in_call_order(ordered) == (ordered, False)
    # any other event ends a run: nothing moves past a user turn
    split = [a, b, ToolResult("b", "20C"), UserMessage("more"), ToolResult("a", "15C")]
    assert results_in_call_order(split) == (split, False)
