"""Mappings: the declarative canonical -> surface renaming that a rewrite applies to trajectories.

A ``RewriteMapping`` says how identifiers in canonical events appear under a rewritten harness: tool
names, argument structure (a sequence of ``Step``s per tool: moves of subtrees between paths,
enum value renames, optional-parameter insertions, object creation/removal), skill ids and hook
ids. Rules produce mappings and never touch trajectories; the engine applies them in bulk.
Mappings compose (``a.then(b)``) and invert (``m.inverse()``): applying a mapping and then its
inverse gives back the canonical events exactly.

Argument paths are tuples of keys in the *instance* (not the schema); ``"[]"`` stands for every
item of an array, and source and destination of a move carry the same number of ``"[]"``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from collections.abc import Mapping as MappingABC
from dataclasses import dataclass, field
from typing import Any

from hsa.errors import RuleError
from hsa.harness.events import Event, HookFired, SkillLoad, ToolCall
from hsa.harness.pickling import by_fields

ArgPath = tuple[str, ...]
EACH = "[]"
STEP_KINDS = ("move", "enum", "add", "drop", "prune", "ensure")
_INVERSE_KIND = {
    "move": "move",
    "enum": "enum",
    "add": "drop",
    "drop": "add",
    "prune": "ensure",
    "ensure": "prune",
}


@by_fields
@dataclass(frozen=True, slots=True)
class Step:
    """One argument rewrite.

    - ``move``: move the value at ``path`` to ``dst`` (absent values are left alone);
    - ``enum``: replace values at ``path`` by ``values`` (pairs canonical -> surface);
    - ``add``: a surface-only optional argument at ``path`` (nothing to do going forward);
    - ``drop``: remove the value at ``path`` (the inverse of ``add``);
    - ``prune``: remove the object at ``path`` if it is empty; ``ensure``: create it if absent.
    """

    kind: str
    path: ArgPath
    dst: ArgPath | None = None
    values: tuple[tuple[Any, Any], ...] = ()

    def inverse(self) -> Step:
        if self.kind == "move":
            return Step("move", self.dst or (), self.path)
        if self.kind == "enum":
            return Step("enum", self.path, values=tuple((b, a) for a, b in self.values))
        return Step(_INVERSE_KIND[self.kind], self.path)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "path": list(self.path)}
        if self.dst is not None:
            out["dst"] = list(self.dst)
        if self.values:
            out["values"] = [list(pair) for pair in self.values]
        return out

    @classmethod
    def from_dict(cls, data: MappingABC[str, Any]) -> Step:
        if data.get("kind") not in STEP_KINDS:
            raise RuleError(f"unknown mapping step kind {data.get('kind')!r}")
        dst = data.get("dst")
        return cls(
            kind=data["kind"],
            path=tuple(data["path"]),
            dst=None if dst is None else tuple(dst),
            values=tuple((a, b) for a, b in data.get("values", ())),
        )


@by_fields
@dataclass(frozen=True, slots=True)
class ToolMap:
    """How one canonical tool appears on the surface: its name and its argument steps."""

    name: str
    steps: tuple[Step, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "steps": [s.to_dict() for s in self.steps]}

    @classmethod
    def from_dict(cls, data: MappingABC[str, Any]) -> ToolMap:
        return cls(data["name"], tuple(Step.from_dict(s) for s in data.get("steps", ())))


@by_fields
@dataclass(frozen=True, slots=True)
class RewriteMapping:
    """Canonical -> surface identifiers. Names absent from a table map to themselves.

    ``text`` lists identifier replacements (canonical, surface) that rules applied to the
    harness's free text (descriptions, prompt, skill bodies); trajectory text is data and is
    never rewritten.
    """

    tools: MappingABC[str, ToolMap] = field(default_factory=dict)
    skills: MappingABC[str, str] = field(default_factory=dict)
    hooks: MappingABC[str, str] = field(default_factory=dict)
    text: tuple[tuple[str, str], ...] = ()

    @property
    def is_identity(self) -> bool:
        return (
            all(t.name == k and not t.steps for k, t in self.tools.items())
            and all(k == v for k, v in self.skills.items())
            and all(k == v for k, v in self.hooks.items())
        )

    def tool_name(self, canonical: str) -> str:
        tool = self.tools.get(canonical)
        return canonical if tool is None else tool.name

    def then(self, other: RewriteMapping) -> RewriteMapping:
        """This mapping followed by ``other`` (whose canonical names are this one's surface)."""
        tools: dict[str, ToolMap] = {}
        surfaced = set()
        for canonical, first in self.tools.items():
            second = other.tools.get(first.name)
            surfaced.add(first.name)
            if second is None:
                tools[canonical] = first
            else:
                tools[canonical] = ToolMap(second.name, first.steps + second.steps)
        for name, second in other.tools.items():
            if name not in surfaced and name not in self.tools:
                tools[name] = second
        return RewriteMapping(
            tools=tools,
            skills=_compose_names(self.skills, other.skills),
            hooks=_compose_names(self.hooks, other.hooks),
            text=self.text + other.text,
        )

    def inverse(self) -> RewriteMapping:
        """The surface -> canonical mapping."""
        tools = {
            t.name: ToolMap(canonical, tuple(s.inverse() for s in reversed(t.steps)))
            for canonical, t in self.tools.items()
        }
        return RewriteMapping(
            tools=tools,
            skills={v: k for k, v in self.skills.items()},
            hooks={v: k for k, v in self.hooks.items()},
            text=tuple((b, a) for a, b in reversed(self.text)),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "tools": {k: v.to_dict() for k, v in self.tools.items()},
            "skills": dict(self.skills),
            "hooks": dict(self.hooks),
            "text": [list(pair) for pair in self.text],
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def from_dict(cls, data: MappingABC[str, Any]) -> RewriteMapping:
        return cls(
            tools={k: ToolMap.from_dict(v) for k, v in (data.get("tools") or {}).items()},
            skills=dict(data.get("skills") or {}),
            hooks=dict(data.get("hooks") or {}),
            text=tuple((a, b) for a, b in data.get("text", ())),
        )

    @classmethod
    def from_json(cls, text: str) -> RewriteMapping:
        return cls.from_dict(json.loads(text))


IDENTITY = RewriteMapping()


def _compose_names(first: MappingABC[str, str], second: MappingABC[str, str]) -> dict[str, str]:
    out = {k: second.get(v, v) for k, v in first.items()}
    for k, v in second.items():
        if k not in out and k not in first.values():
            out[k] = v
    return out


# --- applying steps to one argument object (the reference semantics the engine must match) ---


def _matches(node: Any, path: ArgPath, prefix: tuple = ()) -> Iterator[tuple[tuple, Any]]:
    """Concrete (indexes, parent, key) for every place ``path`` names in ``node``."""
    if not path:
        return
    head, rest = path[0], path[1:]
    if head == EACH:
        if isinstance(node, list):
            for i, item in enumerate(node):
                if rest:
                    yield from _matches(item, rest, (*prefix, i))
                else:
                    yield (*prefix, i), (node, i)
        return
    if not isinstance(node, dict) or head not in node:
        return
    if rest:
        yield from _matches(node[head], rest, prefix)
    else:
        yield prefix, (node, head)


def _place(root: dict, path: ArgPath, indexes: Sequence[int], value: Any) -> None:
    node: Any = root
    idx = iter(indexes)
    for position, key in enumerate(path):
        last = position == len(path) - 1
        if key == EACH:
            i = next(idx)
            if last:
                node[i] = value
                return
            node = node[i]
            continue
        if last:
            node[key] = value
            return
        if key not in node or not isinstance(node[key], dict | list):
            node[key] = {} if path[position + 1] != EACH else []
        node = node[key]


def apply_steps(args: MappingABC[str, Any], steps: Sequence[Step]) -> dict[str, Any]:
    """``args`` rewritten by ``steps`` (a deep copy; the input is not modified)."""
    out = json.loads(json.dumps(args))  # deep copy, JSON types only
    for step in steps:
        if step.kind == "move":
            dst = step.dst or ()
            found = list(_matches(out, step.path))
            renames = _is_rename(step.path, dst)
            for indexes, (parent, key) in found:
                if renames and dst[-1] not in parent:
                    _rename_in_place(parent, key, dst[-1])
                    continue
                value = parent[key]
                del parent[key]
                _place(out, dst, indexes, value)
        elif step.kind == "enum":
            table = [(a, b) for a, b in step.values]
            for _, (parent, key) in list(_matches(out, step.path)):
                parent[key] = respelled(table, parent[key])
        elif step.kind == "drop":
            for _, (parent, key) in list(_matches(out, step.path)):
                del parent[key]
        elif step.kind == "prune":
            for _, (parent, key) in list(_matches(out, step.path)):
                if parent[key] == {}:
                    del parent[key]
        elif step.kind == "ensure":
            parent_path, key = step.path[:-1], step.path[-1]
            parents = (
                [out]
                if not parent_path
                else [p[k] for _, (p, k) in _matches(out, parent_path) if isinstance(p[k], dict)]
            )
            for parent in parents:
                parent.setdefault(key, {})
    return out


def _is_rename(src: ArgPath, dst: ArgPath) -> bool:
    """A move that only changes the last key, within the same object."""
    return (
        bool(src)
        and len(src) == len(dst)
        and src[:-1] == dst[:-1]
        and EACH
        not in (
            src[-1],
            dst[-1],
        )
    )


def _rename_in_place(parent: dict, key: str, new: str) -> None:
    # A rename keeps the key's position, so that the inverse rename restores the canonical key
    # order exactly (a plain delete-and-insert would move the key to the end, both ways).
    items = list(parent.items())
    parent.clear()
    parent.update((new if k == key else k, v) for k, v in items)


def respelled(table: Sequence[tuple[Any, Any]], value: Any) -> Any:
    """``value`` as an ``enum`` step's ``table`` (canonical -> surface pairs) respells it
    (matched with its type: True is not 1, 1 is not 1.0), or as it is."""
    for canonical, surface in table:
        # Compare with type: True must not match 1, 1 must not match "1".
        if type(canonical) is type(value) and canonical == value:
            return surface
    return value


def map_events(events: Sequence[Event], mapping: RewriteMapping) -> list[Event]:
    """Events with canonical identifiers replaced by ``mapping``'s surface identifiers."""
    if mapping.is_identity:
        return list(events)
    out: list[Event] = []
    for event in events:
        if isinstance(event, ToolCall):
            tool = mapping.tools.get(event.tool)
            if tool is not None:
                event = ToolCall(event.call_id, tool.name, apply_steps(event.args, tool.steps))
        elif isinstance(event, SkillLoad):
            event = SkillLoad(mapping.skills.get(event.skill_id, event.skill_id))
        elif isinstance(event, HookFired):
            event = HookFired(
                mapping.hooks.get(event.hook_id, event.hook_id), event.event, event.payload
            )
        out.append(event)
    return out
