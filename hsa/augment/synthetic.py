"""A synthetic canonical trajectory for any harness: valid calls of every tool (its required
arguments, then all it declares), a skill load, a firing per hook. Used to preview and check
rules on a harness with no recorded data."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from hsa.harness.arguments import checker_of
from hsa.harness.events import (
    AssistantMessage,
    Event,
    HookFired,
    SkillLoad,
    ToolCall,
    ToolResult,
    Trajectory,
    UserMessage,
    normalize_call_ids,
)
from hsa.harness.jsonvalues import resolve_pointer
from hsa.harness.model import Harness
from hsa.harness.sandbox import message_fields

_DEPTH = 8


def example_value(
    schema: Mapping[str, Any], root: Mapping[str, Any], depth: int = 0, *, every: bool = False
) -> Any:
    """A value valid against ``schema`` (best effort: enums, types, bounds, required fields;
    ``every``: each object with every property it declares, optional ones too)."""
    if depth > _DEPTH or not isinstance(schema, Mapping):
        return "x"
    if isinstance(schema.get("$ref"), str):
        target = resolve_pointer(root, schema["$ref"])
        if isinstance(target, Mapping):
            return example_value(
                {**target, **{k: v for k, v in schema.items() if k != "$ref"}},
                root,
                depth + 1,
                every=every,
            )
    if "const" in schema:
        return schema["const"]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    if "default" in schema:
        return schema["default"]
    for key in ("anyOf", "oneOf"):
        if isinstance(schema.get(key), list) and schema[key]:
            return example_value(schema[key][0], root, depth + 1, every=every)
    if isinstance(schema.get("allOf"), list) and schema["allOf"]:
        # the schema's own keywords with its parts': their properties and required names
        # added up (a part naming a keyword the schema has, other than those, wins)
        merged = {k: v for k, v in schema.items() if k != "allOf"}
        for part in schema["allOf"]:
            if not isinstance(part, Mapping):
                continue
            for key, value in part.items():
                if key == "properties" and isinstance(value, Mapping):
                    merged[key] = {**(merged.get(key) or {}), **value}
                elif key == "required" and isinstance(value, list):
                    had = list(merged.get(key) or [])
                    merged[key] = had + [name for name in value if name not in had]
                else:
                    merged[key] = value
        return example_value(merged, root, depth + 1, every=every)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), kind[0] if kind else "string")
    if kind == "object" or (kind is None and "properties" in schema):
        props = schema.get("properties") or {}
        named = list(props) if every else schema.get("required") or list(props)[:1]
        return {
            k: example_value(props[k], root, depth + 1, every=every) for k in named if k in props
        }
    if kind == "array":
        count = max(1, int(schema.get("minItems", 1)))
        items = schema.get("items")
        items = items if isinstance(items, Mapping) else {}
        return [example_value(items, root, depth + 1, every=every) for _ in range(count)]
    if kind == "integer":
        return int(schema.get("minimum", 1))
    if kind == "number":
        return float(schema.get("minimum", 1.5))
    if kind == "boolean":
        return True
    if kind == "null":
        return None
    text = "example"
    if isinstance(schema.get("minLength"), int) and schema["minLength"] > len(text):
        text = text * (schema["minLength"] // len(text) + 1)
    return text


def sample_trajectory(harness: Harness) -> Trajectory:
    """One trajectory that touches every tool, skill and hook of ``harness``."""
    events: list[Event] = []

    def fire(event: str, tool: str | None = None) -> None:
        for hook in harness.hooks:
            if hook.event != event:
                continue
            pattern = hook.matcher.tool
            if pattern is not None and (tool is None or not re.fullmatch(pattern, tool)):
                continue
            fields = message_fields(hook.message)
            events.append(HookFired(hook.id, hook.event, {f: f"{f}-value" for f in fields}))
            return

    fire("session_start")
    events.append(UserMessage("Please help me with my request."))
    fire("user_prompt_submit")
    if harness.skills and harness.skill_tool is not None:
        events.append(AssistantMessage("Loading the relevant skill first."))
        events.append(SkillLoad(harness.skills[0].id))
    calls = []
    checker = checker_of(harness)
    for tool in harness.tools:
        # the required arguments, then (when the tool has others) every one it declares: a
        # rule that renames an optional parameter without its step fails the checks too
        least = example_value(tool.parameters, tool.parameters)
        most = example_value(tool.parameters, tool.parameters, every=True)
        calls.append((tool.name, least))
        # (only a valid one: a canonical call its schema refuses makes the schema check skip)
        if most != least and isinstance(most, dict) and checker.problem(tool.name, most) is None:
            calls.append((tool.name, most))
    for n, (name, args) in enumerate(calls):
        call_id = f"call_{n}"
        events.append(AssistantMessage(f"Calling {name}."))
        fire("pre_tool_use", name)
        events.append(ToolCall(call_id, name, args if isinstance(args, dict) else {}))
        events.append(ToolResult(call_id, json.dumps({"ok": True, "tool": name})))
        fire("post_tool_use", name)
    events.append(AssistantMessage("All done."))
    fire("stop")
    # Skill loads take call ids too: number calls the way parsing does.
    events = normalize_call_ids(events)
    return Trajectory("sample", tuple(events), task_id="sample", harness_id=harness.id)
