"""Canonical trajectories: a harness-neutral event log, and its Arrow form.

Every identifier in an event (tool names, argument names, skill ids, hook ids) is canonical,
as the source harness spells it. ``render`` turns events into what a model sees under a given
harness; ``parse`` turns that back into events.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import pyarrow as pa

from hsa.errors import HsaError
from hsa.harness.jsonvalues import may_be_unwritable, unwritable
from hsa.harness.model import compact_json


@dataclass(frozen=True, slots=True)
class UserMessage:
    text: str
    kind: ClassVar[str] = "user"


@dataclass(frozen=True, slots=True)
class AssistantMessage:
    """Assistant text; immediately following calls belong to the same model turn."""

    text: str
    reasoning: str | None = None
    kind: ClassVar[str] = "assistant"


@dataclass(frozen=True, slots=True)
class ToolCall:
    call_id: str
    tool: str
    args: Mapping[str, Any] = field(default_factory=dict)
    kind: ClassVar[str] = "tool_call"


@dataclass(frozen=True, slots=True)
class ToolResult:
    call_id: str
    content: str
    is_error: bool = False
    kind: ClassVar[str] = "tool_result"


@dataclass(frozen=True, slots=True)
class HookFired:
    """A hook firing; ``payload`` holds the values its message template was rendered with."""

    hook_id: str
    event: str
    payload: Mapping[str, str] = field(default_factory=dict)
    kind: ClassVar[str] = "hook"


@dataclass(frozen=True, slots=True)
class SkillLoad:
    """The model loaded a skill's content through the harness's skill tool."""

    skill_id: str
    kind: ClassVar[str] = "skill_load"


Event = UserMessage | AssistantMessage | ToolCall | ToolResult | HookFired | SkillLoad
CALL_KINDS = (ToolCall, SkillLoad)

EVENT_STRUCT = pa.struct(
    [
        pa.field("kind", pa.string(), nullable=False),
        pa.field("text", pa.string()),
        pa.field("reasoning", pa.string()),
        pa.field("call_id", pa.string()),
        pa.field("tool", pa.string()),
        pa.field("args", pa.string()),  # JSON object, key order kept
        pa.field("content", pa.string()),
        pa.field("is_error", pa.bool_()),
        pa.field("hook_id", pa.string()),
        pa.field("hook_event", pa.string()),
        pa.field("payload", pa.string()),  # JSON object of strings
        pa.field("skill_id", pa.string()),
    ]
)
EVENTS_TYPE = pa.list_(EVENT_STRUCT)

TRAJECTORY_SCHEMA = pa.schema(
    [
        pa.field("id", pa.string(), nullable=False),
        pa.field("task_id", pa.string()),
        pa.field("harness_id", pa.string()),
        pa.field("source", pa.string()),
        pa.field("events", EVENTS_TYPE, nullable=False),
        pa.field("metadata", pa.string()),  # JSON object
    ]
)


#: compact JSON with key order and Unicode kept: the form hsa stores arguments in
dumps_json = compact_json


def event_to_row(event: Event) -> dict[str, Any]:
    """One event as a dict matching ``EVENT_STRUCT`` (absent fields are None)."""
    row: dict[str, Any] = dict.fromkeys(EVENT_STRUCT.names)
    row["kind"] = event.kind
    match event:
        case UserMessage(text=text):
            row["text"] = text
        case AssistantMessage(text=text, reasoning=reasoning):
            row["text"], row["reasoning"] = text, reasoning
        case ToolCall(call_id=call_id, tool=tool, args=args):
            row["call_id"], row["tool"], row["args"] = call_id, tool, dumps_json(args)
        case ToolResult(call_id=call_id, content=content, is_error=is_error):
            row["call_id"], row["content"], row["is_error"] = call_id, content, is_error
        case HookFired(hook_id=hook_id, event=hook_event, payload=payload):
            row["hook_id"], row["hook_event"] = hook_id, hook_event
            row["payload"] = dumps_json(payload)
        case SkillLoad(skill_id=skill_id):
            row["skill_id"] = skill_id
    return row


def _string(row: Mapping[str, Any], key: str) -> str:
    value = row.get(key)
    if not isinstance(value, str):
        raise ValueError(f"field {key!r} must be a string, not {type(value).__name__}")
    return value


def _json_object(row: Mapping[str, Any], key: str) -> dict[str, Any]:
    raw = row.get(key)
    if raw is None or raw == "":
        return {}
    try:
        value = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError as exc:
        raise ValueError(f"field {key!r} is not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise ValueError(f"field {key!r} must hold a JSON object")
    if isinstance(raw, str) and may_be_unwritable(raw):
        # Python's reader takes NaN and lone surrogate escapes, which no row can hold, and
        # arguments become a `json` feature, whose reader refuses integers past 64 bits
        bad = unwritable(value, key, wide=key == "args")
        if bad is not None:
            raise ValueError(f"field {bad[0]}: {bad[1]}")
    return value


def event_from_row(row: Mapping[str, Any], *, where: str = "event") -> Event:
    """The event a row of ``EVENT_STRUCT`` describes; ``HsaError`` naming ``where`` if malformed."""
    if not isinstance(row, Mapping):
        raise HsaError(f"an event must be a struct, not {type(row).__name__}", where=where)
    kind = row.get("kind")
    try:
        if kind == "user":
            return UserMessage(_string(row, "text"))
        if kind == "assistant":
            reasoning = row.get("reasoning")
            if reasoning is not None and not isinstance(reasoning, str):
                raise ValueError("field 'reasoning' must be a string or null")
            return AssistantMessage(_string(row, "text"), reasoning)
        if kind == "tool_call":
            args = _json_object(row, "args")
            return ToolCall(_string(row, "call_id"), _string(row, "tool"), args)
        if kind == "tool_result":
            return ToolResult(
                _string(row, "call_id"), _string(row, "content"), bool(row.get("is_error"))
            )
        if kind == "hook":
            payload = _json_object(row, "payload")
            if not all(isinstance(v, str) for v in payload.values()):
                raise ValueError("field 'payload' must map names to strings")
            return HookFired(_string(row, "hook_id"), _string(row, "hook_event"), payload)
        if kind == "skill_load":
            return SkillLoad(_string(row, "skill_id"))
    except ValueError as exc:  # json.JSONDecodeError included
        raise HsaError(f"malformed {kind} event: {exc}", where=where) from None
    raise HsaError(
        f"unknown event kind {kind!r}; expected one of user, assistant, tool_call, "
        "tool_result, hook, skill_load",
        where=where,
    )


def events_to_rows(events: Iterable[Event]) -> list[dict[str, Any]]:
    """Events as rows of ``EVENT_STRUCT``; ``HsaError`` naming the event whose arguments or
    payload no row can hold (NaN, a lone surrogate, an integer past 64 bits: the readers of
    the rows refuse them, and a row written with them could never be read back)."""
    rows = [event_to_row(e) for e in events]
    for i, row in enumerate(rows):
        for key in ("args", "payload"):
            text = row[key]
            if text is not None and may_be_unwritable(text):
                bad = unwritable(json.loads(text), key, wide=key == "args")
                if bad is not None:
                    raise HsaError(f"{bad[0]}: {bad[1]}", where=f"events[{i}]")
    return rows


def events_from_rows(rows: Iterable[Mapping[str, Any]], *, where: str = "events") -> list[Event]:
    return [event_from_row(r, where=f"{where}[{i}]") for i, r in enumerate(rows)]


@dataclass(frozen=True, slots=True)
class Trajectory:
    """A canonical trajectory: the events of one episode of one task under one harness."""

    id: str
    events: tuple[Event, ...]
    task_id: str | None = None
    harness_id: str | None = None
    source: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def to_row(self) -> dict[str, Any]:
        """The row of ``TRAJECTORY_SCHEMA``; ``HsaError`` when its events (``events_to_rows``)
        or its metadata hold a value no row can hold (in metadata, NaN, Infinity or a lone
        surrogate: the row could never be read back)."""
        events = events_to_rows(self.events)
        metadata = dict(self.metadata)
        bad = unwritable(metadata, "metadata", wide=False)
        if bad is not None:
            raise HsaError(f"{bad[0]}: {bad[1]}", where=f"trajectory {self.id!r}")
        return {
            "id": self.id,
            "task_id": self.task_id,
            "harness_id": self.harness_id,
            "source": self.source,
            "events": events,
            "metadata": dumps_json(metadata),
        }

    @classmethod
    def from_row(cls, row: Mapping[str, Any], *, where: str = "row") -> Trajectory:
        """The trajectory a row of ``TRAJECTORY_SCHEMA`` describes; ``HsaError`` if malformed."""
        if not isinstance(row.get("id"), str):
            raise HsaError("a trajectory needs a string id", where=f"{where}.id")
        events = row.get("events")
        if not isinstance(events, list):
            raise HsaError("a trajectory needs a list of events", where=f"{where}.events")
        for key in ("task_id", "harness_id", "source"):
            if row.get(key) is not None and not isinstance(row[key], str):
                raise HsaError("must be a string or null", where=f"{where}.{key}")
        try:
            metadata = _json_object(row, "metadata")
        except ValueError as exc:
            raise HsaError(f"malformed metadata: {exc}", where=f"{where}.metadata") from None
        return cls(
            id=row["id"],
            events=tuple(events_from_rows(events, where=f"{where}.events")),
            task_id=row.get("task_id"),
            harness_id=row.get("harness_id"),
            source=row.get("source"),
            metadata=metadata,
        )


def trajectories_to_table(trajectories: Sequence[Trajectory]) -> pa.Table:
    """Trajectories as an Arrow table of ``TRAJECTORY_SCHEMA``."""
    return pa.Table.from_pylist([t.to_row() for t in trajectories], schema=TRAJECTORY_SCHEMA)


def trajectories_from_table(table: pa.Table) -> list[Trajectory]:
    """The trajectories of an Arrow table of ``TRAJECTORY_SCHEMA`` (``row N`` names bad rows)."""
    return [Trajectory.from_row(r, where=f"row {i}") for i, r in enumerate(table.to_pylist())]


def results_in_call_order(events: Sequence[Event]) -> tuple[list[Event], bool]:
    """``events`` with each run of consecutive tool results in the order of the calls they
    answer, and whether any moved.

    An API answers parallel calls by call id, in any order; text protocols, and chat templates
    that show no call ids, pair a result with its call by position. In call order both read
    the same. A result moves with the hook firings that follow it (a hook the result fired);
    any other event ends the run, so nothing moves past one."""
    position = {e.call_id: i for i, e in enumerate(events) if isinstance(e, ToolCall)}
    out: list[Event] = []
    run: list[list[Event]] = []  # each result with the hook firings after it
    moved = False

    def answered(unit: list[Event]) -> int:
        first = unit[0]
        return position.get(first.call_id, len(events)) if isinstance(first, ToolResult) else 0

    def flush() -> None:
        nonlocal moved
        ordered = sorted(run, key=answered)
        moved = moved or ordered != run
        out.extend(event for unit in ordered for event in unit)
        run.clear()

    for event in events:
        if isinstance(event, ToolResult):
            run.append([event])
        elif isinstance(event, HookFired) and run:
            run[-1].append(event)
        else:
            flush()
            out.append(event)
    flush()
    return out, moved


def normalize_call_ids(events: Sequence[Event]) -> list[Event]:
    """Rename call ids to ``call_0``, ``call_1``, ... in call order (skill loads count).

    Text protocols do not show call ids to the model, so parsing them regenerates ids in this
    normal form; importers normalise so that every protocol round-trips.
    """
    mapping: dict[str, str] = {}
    out: list[Event] = []
    counter = 0
    for event in events:
        if isinstance(event, ToolCall):
            mapping[event.call_id] = f"call_{counter}"
            out.append(ToolCall(f"call_{counter}", event.tool, event.args))
            counter += 1
        elif isinstance(event, SkillLoad):
            out.append(event)
            counter += 1
        elif isinstance(event, ToolResult):
            out.append(
                ToolResult(mapping.get(event.call_id, event.call_id), event.content, event.is_error)
            )
        else:
            out.append(event)
    return out
