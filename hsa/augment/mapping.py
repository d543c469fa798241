"""Mappings: the declarative canonical -> surface renaming that a rewrite applies to trajectories.

A ``RewriteMapping`` says how identifiers in canonical events appear under a rewritten harness: tool
names, argument structure (a sequence of ``Step``s per tool: moves of subtrees between paths,
enum value renames, optional-parameter insertions, object creation/removal), skill ids and hook
ids. Rules produce mappings and never touch trajectories; the engine applies them in bulk.
Mappings compose (``a.then(b)``) and invert (``m.inverse()``): applying a mapping and then its
inverse gives back the canonical events exactly, the order of argument keys included (rows
store arguments as JSON text), but where the surface keeps no trace of that order
(``apply_steps`` says where).

Argument paths are tuples of keys in the *instance* (not the schema); ``"[]"`` stands for every
item of an array, and source and destination of a move carry the same number of ``"[]"``.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator, Sequence
from collections.abc import Mapping as MappingABC
from dataclasses import dataclass, field
from typing import Any

from hsa.errors import RuleError
from hsa.harness.events import Event, HookFired, SkillLoad, ToolCall
from hsa.harness.model import Harness
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

    - ``move``: move the value at ``path`` to ``dst`` (absent values are left alone), where
      its neighbours in the input were (``apply_steps``);
    - ``enum``: replace values at ``path`` by ``values`` (pairs canonical -> surface; a rule
      closes them with ``one_to_one``);
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


class ArgumentClash(RuleError):
    """A step would put a value where the call holds one already (a parameter its schema
    declares, or an argument it does not declare, named as a parameter a rule made): the
    value there would be lost, and the inverse steps could not give the call back.

    Raised where the schema is not at hand, it names both; ``against(schema)`` says which."""

    def __init__(
        self,
        message: str,
        *,
        where: str | None = None,
        step: Step | None = None,
        at: Sequence[Any] = (),
    ):
        super().__init__(message, where=where)
        self.step, self.at = step, tuple(at)

    def against(self, schema: Any) -> ArgumentClash:
        """This clash as ``schema`` (the parameters of the call's tool) tells it: a parameter
        it declares is in the way, or an argument it does not declare."""
        if self.step is None:
            return self
        return _clash(self.step, self.at, _declares(schema, self.at), where=self.where)


def _clash(
    step: Step, at: Sequence[Any], declared: bool | None = None, *, where: str | None = None
) -> ArgumentClash:
    """``declared``: whether the schema declares what is at ``at`` (None: not known here)."""
    shown = ".".join(str(k) for k in at)
    what = {
        "move": f"moving {'.'.join(step.path)} to {'.'.join(step.dst or ())}",
        "ensure": f"making the object {'.'.join(step.path)}",
        "add": f"adding the parameter {'.'.join(step.path)}",
    }[step.kind]
    if declared:
        said = (
            f"{what} would overwrite the call's value at {shown!r}, a parameter the schema "
            "declares, and lose it (a rule must not move a value onto another parameter's, "
            "nor make a parameter where one is: move that one away first, or choose a name "
            "the schema does not use)"
        )
    elif declared is None:
        said = (
            f"{what} would overwrite the call's value at {shown!r} and lose it (a rule must "
            "not move a value onto another parameter's, and a parameter it makes must miss "
            "the names calls use that their schema does not declare: "
            "hsa.augment.Context.arguments)"
        )
    else:
        said = (
            f"{what} would overwrite the call's value at {shown!r}, an argument the schema "
            "does not declare, and lose it (a rule that makes a parameter must miss the "
            "names calls use: hsa.augment.Context.arguments)"
        )
    return ArgumentClash(said, where=where or f"arguments.{shown}", step=step, at=at)


def _declares(schema: Any, at: Sequence[Any]) -> bool | None:
    """Whether the parameters ``schema`` declare the argument at ``at`` (keys, and indexes
    into arrays); None where the schema cannot tell (a ``$ref``, ``anyOf`` and the like)."""
    node = schema
    for key in at:
        if not isinstance(node, dict):
            return None
        if isinstance(key, int):
            node = node.get("items")
            continue
        properties = node.get("properties")
        if isinstance(properties, dict) and key in properties:
            node = properties[key]
        elif any(k in node for k in ("$ref", "anyOf", "oneOf", "allOf", "if")):
            return None
        else:
            return False
    return True


def _place(root: dict, step: Step, indexes: Sequence[int], value: Any) -> None:
    """Put ``value`` at ``step.dst`` (with ``indexes`` for its ``[]``), making the objects on
    the way; an ``ArgumentClash`` where a value is in the way."""
    path = step.dst or ()
    node: Any = root
    idx = iter(indexes)
    at: list[Any] = []
    for position, key in enumerate(path):
        last = position == len(path) - 1
        if key == EACH:
            i = next(idx)
            at.append(i)
            if last:
                node[i] = value
                return
            node = node[i]
            continue
        at.append(key)
        if not isinstance(node, dict) or (last and key in node):
            raise _clash(step, at if isinstance(node, dict) else at[:-1])
        if last:
            node[key] = value
            return
        want = dict if path[position + 1] != EACH else list
        if key not in node:
            node[key] = want()
        elif not isinstance(node[key], want):
            raise _clash(step, at)
        node = node[key]


def apply_steps(args: MappingABC[str, Any], steps: Sequence[Step]) -> dict[str, Any]:
    """``args`` rewritten by ``steps`` (a deep copy; the input is not modified).

    Key order is data, and steps keep it: a value moved elsewhere takes the place its
    surroundings had in the input, not the end of its new object. Each object's keys end in
    the order of the input's values they hold, by the first of them in document order (a
    scalar, or a container left empty), and an object made empty (``ensure``) stays last. So
    a wrap puts the wrapper where the wrapped arguments were, in their order, and a flatten
    puts the fields where the object was; the inverse steps put them back, which makes
    mapping and then inverse-mapping give back the input's JSON text exactly, key order
    included, wherever the moved keys were next to each other (arguments a schema does not
    declare left between wrapped ones, and an empty object flattened away before other
    keys, leave no trace of where they were on the surface).

    A step that would overwrite a value the call holds (a move onto a key it has, an
    ``ensure`` or a path through a key holding no object, an ``add`` where it has a value)
    raises ``ArgumentClash``, naming the path: the value would be lost, silently.
    """
    out = json.loads(json.dumps(args))  # deep copy, JSON types only
    if not any(step.kind == "move" and not _is_rename(step.path, step.dst or ()) for step in steps):
        _apply(out, steps, boxed=False)  # renames keep each key's place: nothing to reorder
        return out
    anchors: dict[int, tuple[float, Any]] = {}
    tree = _boxed(out, anchors, [0])
    _apply(tree, steps, boxed=True)
    return _settled(tree, anchors)[1]


def _apply(out: dict[str, Any], steps: Sequence[Step], *, boxed: bool) -> None:
    """``steps`` applied to ``out`` in place; ``boxed``: its scalars are ``_Leaf``s."""
    respell = _respelled_at if boxed else respelled
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
                _place(out, step, indexes, value)
        elif step.kind == "enum":
            table = [(a, b) for a, b in step.values]
            for _, (parent, key) in list(_matches(out, step.path)):
                parent[key] = respell(table, parent[key])
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
                [((), out)]
                if not parent_path
                else [
                    (i, p[k]) for i, (p, k) in _matches(out, parent_path) if isinstance(p[k], dict)
                ]
            )
            for indexes, parent in parents:
                if not isinstance(parent.setdefault(key, {}), dict):
                    raise _clash(step, _concrete(step.path, indexes))
        elif step.kind == "add":
            # nothing to do going forward, but a value there would read as the new
            # parameter's, and the inverse (``drop``) would remove it
            found = list(_matches(out, step.path))
            if found:
                raise _clash(step, _concrete(step.path, found[0][0]))


def _concrete(path: ArgPath, indexes: Sequence[int]) -> list[Any]:
    """``path`` with its ``[]`` replaced by ``indexes``."""
    idx = iter(indexes)
    return [next(idx) if key == EACH else key for key in path]


@dataclass(slots=True)
class _Leaf:
    """A scalar of the input (or a value an ``enum`` step respelled) and its place in the
    input's document order, while ``apply_steps`` moves it."""

    anchor: float
    value: Any


_LAST = float("inf")  # the anchor of an object the steps made, holding nothing of the input


def _boxed(node: Any, anchors: dict[int, tuple[float, Any]], counter: list[int]) -> Any:
    """``node`` with its scalars boxed as ``_Leaf``s numbered in document order; the number
    of each container (kept for those left empty) goes into ``anchors`` by id, with the
    container, which keeps the id from going to one the steps make."""
    at = counter[0]
    counter[0] += 1
    if isinstance(node, dict):
        anchors[id(node)] = (at, node)
        for key, value in node.items():
            node[key] = _boxed(value, anchors, counter)
        return node
    if isinstance(node, list):
        anchors[id(node)] = (at, node)
        node[:] = [_boxed(value, anchors, counter) for value in node]
        return node
    return _Leaf(at, node)


def _settled(node: Any, anchors: dict[int, tuple[float, Any]]) -> tuple[float, Any]:
    """``node`` unboxed, each object's keys in the order of their anchors, and its anchor:
    its first value's in document order (a container's own where it holds none)."""
    if isinstance(node, _Leaf):
        return node.anchor, node.value
    if isinstance(node, dict):
        items = [(key, *_settled(value, anchors)) for key, value in node.items()]
        items.sort(key=lambda item: item[1])  # stable: ties (objects made empty) keep order
        first = items[0][1] if items else anchors.get(id(node), (_LAST,))[0]
        return first, {key: value for key, _, value in items}
    if isinstance(node, list):
        settled = [_settled(value, anchors) for value in node]
        first = min((a for a, _ in settled), default=anchors.get(id(node), (_LAST,))[0])
        return first, [value for _, value in settled]
    return _LAST, node


def _respelled_at(table: Sequence[tuple[Any, Any]], node: Any) -> Any:
    """``respelled`` of a value as ``apply_steps`` holds it boxed (``_boxed``)."""
    if isinstance(node, _Leaf):
        return _Leaf(node.anchor, respelled(table, node.value))
    if not isinstance(node, dict | list) or not any(isinstance(a, dict | list) for a, _ in table):
        return respelled(table, node)
    plain = _unboxed(node)  # an enum of objects or arrays (no rule makes one)
    new = respelled(table, plain)
    return node if new is plain else _Leaf(_settled(node, {})[0], new)


def _unboxed(node: Any) -> Any:
    if isinstance(node, _Leaf):
        return node.value
    if isinstance(node, dict):
        return {key: _unboxed(value) for key, value in node.items()}
    if isinstance(node, list):
        return [_unboxed(value) for value in node]
    return node


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
    surface = respelling(table, value, _MISSING)
    if surface is _MISSING:
        return value  # (itself: a value no pair respells stays the object it was)
    # (an object or array of the table's is copied: steps after may change it)
    return copy.deepcopy(surface) if isinstance(surface, dict | list) else surface


_MISSING = object()


def respelling(table: Sequence[tuple[Any, Any]], value: Any, missing: Any) -> Any:
    """The surface value of the first pair of ``table`` whose canonical value is ``value``,
    compared with its type (True must not match 1, 1 must not match "1" nor 1.0), or
    ``missing``. A long table (a tuple: a step's) is looked up through an index made once
    (an enum of thousands of values is respelled value by value)."""
    if (
        type(table) is tuple
        and len(table) >= _INDEXED
        and type(value) in _HASHED
        and value == value
    ):
        # a scalar (NaN aside, which equals nothing) matches only a scalar of its type: all
        # of the table's are in the index, the first of equal ones kept
        return _index(table).get((type(value), value), missing)
    for canonical, surface in table:
        if type(canonical) is type(value) and canonical == value:
            return surface
    return missing


#: how long a table is for ``respelling`` to index it, and the types it indexes
_INDEXED = 64
_HASHED = frozenset((str, int, float, bool, type(None)))
#: the indexes of the tables ``respelling`` looked up last, by the table's ``id`` (the entry
#: holds the table, so no other takes its ``id`` while it is there)
_INDEXES: dict[int, tuple[Sequence[tuple[Any, Any]], dict[tuple[type, Any], Any]]] = {}


def _index(table: Sequence[tuple[Any, Any]]) -> dict[tuple[type, Any], Any]:
    entry = _INDEXES.get(id(table))
    if entry is not None and entry[0] is table:
        return entry[1]
    index: dict[tuple[type, Any], Any] = {}
    for canonical, surface in table:
        if type(canonical) in _HASHED and canonical == canonical:
            index.setdefault((type(canonical), canonical), surface)
    if len(_INDEXES) >= 64:
        _INDEXES.clear()
    _INDEXES[id(table)] = (table, index)
    return index


def one_to_one(pairs: Sequence[tuple[Any, Any]]) -> tuple[tuple[Any, Any], ...]:
    """An ``enum`` step's ``pairs`` (canonical -> surface, one-to-one) closed into a
    permutation of the values they name: each surface value that is no canonical one is
    respelled back to the canonical value that starts its chain (``fast -> FAST`` gains
    ``FAST -> fast``). A call holding a surface spelling off its canonical enum (a model's
    ``FAST`` where the enum says ``fast``) then stays off the surface enum, and reads back as
    itself: without the closing pairs it would stay ``FAST``, valid on the surface, and read
    back as ``fast``. Pairs that are not one-to-one, or hold values that cannot be told
    apart by hashing, are returned as they are."""
    try:
        forward = {_typed(a): b for a, b in pairs}
        canonical = set(forward)
        surface = {_typed(b) for _, b in pairs}
    except TypeError:  # an object or array value
        return tuple(pairs)
    if len(forward) != len(pairs) or len(surface) != len(pairs):
        return tuple(pairs)
    closing = []
    for start, first in pairs:
        if _typed(start) in surface:
            continue  # inside a chain: it starts none
        end = first
        while _typed(end) in canonical:
            end = forward[_typed(end)]
        closing.append((end, start))
    return (*pairs, *closing)


def _typed(value: Any) -> tuple[type, Any]:
    """``value`` as ``respelled`` compares it: with its type."""
    return type(value), value


def map_events(
    events: Sequence[Event], mapping: RewriteMapping, harness: Harness | None = None
) -> list[Event]:
    """Events with canonical identifiers replaced by ``mapping``'s surface identifiers.

    ``harness``: the one the events' calls are under, whose schemas an ``ArgumentClash``
    is said against (``ArgumentClash.against``); without it, it names both causes."""
    if mapping.is_identity:
        return list(events)
    out: list[Event] = []
    for event in events:
        if isinstance(event, ToolCall):
            tool = mapping.tools.get(event.tool)
            if tool is not None:
                try:
                    args = apply_steps(event.args, tool.steps)
                except ArgumentClash as exc:
                    found = harness.tool(event.tool) if harness is not None else None
                    if found is not None:
                        exc = exc.against(found.parameters)
                    where = f"tool {event.tool!r} (call {event.call_id!r}): {exc.where}"
                    raise ArgumentClash(exc.message, where=where) from None
                event = ToolCall(event.call_id, tool.name, args)
        elif isinstance(event, SkillLoad):
            event = SkillLoad(mapping.skills.get(event.skill_id, event.skill_id))
        elif isinstance(event, HookFired):
            event = HookFired(
                mapping.hooks.get(event.hook_id, event.hook_id), event.event, event.payload
            )
        out.append(event)
    return out
