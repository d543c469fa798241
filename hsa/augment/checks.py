"""Task-preservation checks: does a rewrite keep a canonical trajectory's task intact?

For a rewrite ``(h', m)`` of harness ``h`` and canonical events ``e``:

- ``harness``: ``h'`` is a valid harness document, every parameter name it brings is legal
  in every call format (``PARAM_NAME``, no Python keyword), its system prompt renders (where
  ``h``'s does), and under a text protocol it shows the tool docs and the call instructions
  (where ``h``'s did, or ``h`` is under ``api``);
- ``schema`` (a): every surface call in ``map_events(e, m)`` names a tool of ``h'`` and its
  arguments validate against that tool's schema (JSON Schema 2020-12, local ``$ref``s
  resolved), which still declares every argument the call passes (where the original schema
  declared the canonical call's); every skill load names a skill of ``h'``;
- ``values``: argument values are data and stay as they are, except values respelled from an
  ``enum`` the original schema declares into one the new schema declares, one-to-one (and a
  value of the new one, off the original's, respelled back: ``mapping.one_to_one``), never
  into another value of the original enum; no value moves onto another canonical parameter
  that the new schema declares as the original did (a swap of two values);
- ``hooks``: every hook of ``h`` is in ``h'`` (under its mapped id) with the same event,
  effect and payload function, and its matcher selects exactly the renamed tools
  (and turns) it selected before; a hook ``h'`` adds may only add context;
- ``names``: no free text of ``h'`` (prompt, descriptions, skill contents, hook messages) still
  names a tool or skill by a canonical name the rewrite renamed, where ``replace_in_harness``
  would have replaced it; no tool of ``h'``, under the name the mapping gives a canonical
  tool, has another canonical tool's description and parameters instead of its own (a swap
  of names the mapping does not record);
- ``skills``: every skill of ``h`` is in ``h'`` (under its mapped id) and says what it said:
  its content, read as blocks whatever their markup (``skill_blocks``) with the mapping's
  declared text replacements read as one name, is the same but for the order of its parts
  between headings; its description holds the original's text. A skill may be missing only
  where ``h`` has a skill tool and ``e`` never loads it;
- ``roundtrip`` (b): ``parse(render(map_events(e, m), h'), h') == map_events(e, m)`` (in the
  order render shows the events: ``as_shown``, a hook's note among the results of one
  message's calls after the last of them), and the inverse mapping gives ``e`` back; events
  are compared as the rows that store them, arguments as JSON text (key order is data);
- ``replay`` (c): the calls recovered from the surface conversation, mapped back with
  ``m.inverse()``, give the same tool results and the same score. With an ``Environment`` and
  its ``Task`` the calls are executed and scored; without one (imported corpora with recorded
  results only) the recording is the environment: each recovered call must be exactly the
  recorded one, and then returns the recorded result.

A check the canonical trajectory fails on its own harness (an invalid reference call, a
conversation the harness cannot round-trip, calls that do not replay) is *skipped*, not
blamed on the rule; so is the round trip under a protocol that cannot write the trajectory
(``hsa.augment.planner.cannot_write``: an argument nested deeper than Python literals hold,
assistant text the protocol would read as calls), which ``hsa augment`` never writes it
under.
"""

from __future__ import annotations

import contextlib
import json
import keyword
import re
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence, Set
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from hsa.augment.free_text import replace_in_harness
from hsa.augment.mapping import ArgumentClash, RewriteMapping, ToolMap, apply_steps, map_events
from hsa.augment.markdown import skill_blocks
from hsa.augment.names import PARAM_NAME, restyled_into
from hsa.augment.param_schemas import all_property_names, reached
from hsa.augment.planner import cannot_write, hazard_of, swapped_parameter, swapped_with
from hsa.augment.rule import Rewrite
from hsa.augment.rules.protocol import unshown
from hsa.augment.rules.tool_names import ALLOWED_TOOLS, allowed_tool_names, rename_allowed_tools
from hsa.envs.base import Environment, Task
from hsa.envs.hook_runtime import HookContext, matches
from hsa.errors import HsaError
from hsa.harness.arguments import checker_of, schema_problem
from hsa.harness.events import (
    Event,
    HookFired,
    SkillLoad,
    ToolCall,
    ToolResult,
    event_to_row,
    normalize_call_ids,
)
from hsa.harness.identifiers import in_path
from hsa.harness.model import Harness, Hook, Skill, Tool
from hsa.harness.parse import parse
from hsa.harness.prompt import system_prompt
from hsa.harness.render import as_shown, render, shown_order
from hsa.harness.validate import declared_properties, document_problems, pattern_matches

CHECKS = ("harness", "schema", "values", "hooks", "names", "skills", "roundtrip", "replay")
PASS, FAIL, SKIP = "pass", "fail", "skip"


@dataclass(frozen=True, slots=True)
class Failure:
    """One failed check: which, where (event index, call id, message index) and why."""

    check: str
    where: str
    message: str
    #: the traceback when the rule raised, down to where its code went wrong (``hsa --debug
    #: rules check`` prints it); kept as text, so a report holds no frames
    trace: str = field(default="", compare=False, repr=False)

    def __str__(self) -> str:
        return f"{self.check}: {self.where}: {self.message}"


@dataclass(frozen=True, slots=True)
class CheckReport:
    """The outcome of every check for one rewrite and one trajectory."""

    trajectory_id: str
    outcomes: dict[str, str]
    failures: tuple[Failure, ...] = ()
    label: str = ""
    #: whether the rewrite changed the harness or its mapping (a rewrite that changed
    #: nothing passes every check without testing anything)
    changed: bool = True

    @property
    def ok(self) -> bool:
        return all(v != FAIL for v in self.outcomes.values())


@dataclass(frozen=True, slots=True)
class Replay:
    """How check (c) executes calls: an environment and task, or the recording itself."""

    env: Environment | None = None
    task: Task | None = None
    #: the canonical harness whose hooks run during the replay (the env's own when None)
    harness: Harness | None = None


RECORDED = Replay()


# --- (a) schema ---


def _call_problems(harness: Harness, event: Event) -> str | None:
    if isinstance(event, ToolCall):
        return checker_of(harness).problem(event.tool, event.args)
    if isinstance(event, SkillLoad):
        if harness.skill(event.skill_id) is None:
            return f"loads skill {event.skill_id!r}, which is not a skill of the harness"
        if harness.skill_tool is not None and harness.skill_arg is not None:
            # A skill load reaches the model as a call to the skill tool: checked as one.
            return schema_problem(harness.skill_tool, {harness.skill_arg: event.skill_id})
    return None


def undeclared(
    schema: Any, value: Any, path: str = "", root: Mapping[str, Any] | None = None
) -> list[str]:
    """The argument paths in ``value`` that ``schema`` (a sub-schema of ``root``, itself by
    default) does not declare: keys of an object that neither its ``properties`` nor the
    schemas that apply to the same object (``allOf``, ``$ref``, ...; ``declared_properties``)
    name or match, through nested objects and array items. A schema that declares no
    properties (free-form) is not judged."""
    if not isinstance(schema, Mapping):
        return []
    root = schema if root is None else root
    found: list[str] = []
    if isinstance(value, Mapping):
        own = schema.get("properties")
        declared = None  # what the schemas applying to this object declare, when needed
        if not isinstance(own, Mapping):
            declared = declared_properties(root, schema)
            if declared == (set(), []):
                return found  # free-form
            own = {}
        for key, inner in value.items():
            at = f"{path}.{key}" if path else str(key)
            if key in own:
                found += undeclared(own[key], inner, at, root)
                continue
            if declared is None:  # (rare: most arguments are the schema's own properties)
                declared = declared_properties(root, schema)
            names, patterns = declared
            if key not in names and not any(pattern_matches(p, key) for p in patterns):
                found.append(at)
    elif isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        for i, inner in enumerate(value):
            found += undeclared(schema["items"], inner, f"{path}[{i}]", root)
    return found


def declared_problems(
    original: Harness, harness: Harness, events: Sequence[Event], surface: Sequence[Event]
) -> list[tuple[int, str]]:
    """``(event index, reason)`` for every surface call passing an argument its tool no
    longer declares, where the canonical call passes only declared ones: a schema that
    allows any extra property would accept the call while no longer telling a model about
    the argument."""
    out = []
    for i, (event, shown) in enumerate(zip(events, surface, strict=True)):
        if not (isinstance(event, ToolCall) and isinstance(shown, ToolCall)):
            continue
        before, after = original.tool(event.tool), harness.tool(shown.tool)
        if before is None or after is None or undeclared(before.parameters, dict(event.args)):
            continue
        missing = undeclared(after.parameters, dict(shown.args))
        if missing:
            out.append(
                (
                    i,
                    f"{shown.tool} is called with {', '.join(missing)}, which its schema no "
                    "longer declares",
                )
            )
    return out


def call_problems(harness: Harness, events: Sequence[Event]) -> list[tuple[int, str]]:
    """``(event index, reason)`` for every call or skill load ``harness`` does not accept."""
    out = []
    for i, event in enumerate(events):
        reason = _call_problems(harness, event)
        if reason is not None:
            out.append((i, reason))
    return out


# --- values ---


def _enum_values(tool: Tool | None, path: tuple | None = None) -> list[Any]:
    """Enum values declared in ``tool``'s schema (at ``path`` when given, anywhere if None)."""
    if tool is None:
        return []
    schema = dict(tool.parameters)
    out: list[Any] = []
    for r in reached(schema):
        if path is not None and (r.path is None or not _path_matches(r.path, path)):
            continue
        values = r.node.get("enum")
        if isinstance(values, list):
            out.extend(values)
        if "const" in r.node:
            out.append(r.node["const"])
    return out


def _path_matches(schema_path: tuple, value_path: tuple) -> bool:
    return len(schema_path) == len(value_path) and all(
        s == v or (s == "[]" and isinstance(v, int))
        for s, v in zip(schema_path, value_path, strict=True)
    )


def _typed_in(value: Any, values: Iterable[Any]) -> bool:
    return any(type(v) is type(value) and v == value for v in values)


def _leaves(value: Any, path: tuple = ()) -> Iterable[tuple[tuple, Any]]:
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _leaves(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _leaves(v, (*path, i))
    else:
        yield path, value


def _get(value: Any, path: tuple) -> tuple[bool, Any]:
    for key in path:
        if (isinstance(value, dict) and isinstance(key, str) and key in value) or (
            isinstance(value, list) and isinstance(key, int) and key < len(value)
        ):
            value = value[key]  # type: ignore[index]  # the test above matched key to value
        else:
            return False, None
    return True, value


def value_problems(
    original: Harness, rewritten: Harness, mapping: RewriteMapping, events: Sequence[Event]
) -> list[tuple[int, str]]:
    """Calls whose argument values changed other than by a declared enum respelling."""
    out = []
    for i, event in enumerate(events):
        if not isinstance(event, ToolCall):
            continue
        tool_map = mapping.tools.get(event.tool) or ToolMap(event.tool)
        shape_only = tuple(s for s in tool_map.steps if s.kind != "enum")
        expected = apply_steps(event.args, shape_only)
        surface = apply_steps(event.args, tool_map.steps)
        old_tool = original.tool(event.tool)
        new_tool = rewritten.tool(tool_map.name)
        old_enums = _enum_values(old_tool)
        moves = any(s.kind == "move" for s in shape_only)
        origins = _origins(event.args, shape_only) if moves else {}
        if moves and old_tool is not None and new_tool is not None:
            out += [(i, why) for why in _carried_problems(old_tool, new_tool, surface, origins)]
        for path, value in _leaves(surface):
            found, before = _get(expected, path)
            if found and type(before) is type(value) and before == value:
                continue
            if not found:
                out.append((i, f"argument at {list(path)} appeared from nowhere: {value!r}"))
                continue
            # a respelling into another value of the same canonical enum says something else,
            # in that value's spelling or in another style (a swap hidden by a change of case)
            at = origins.get(path, path)
            canonical = _enum_values(old_tool, at)
            if _typed_in(before, canonical):
                other = (
                    value if _typed_in(value, canonical) else _restyled(before, value, canonical)
                )
                if other is not None:
                    styled = "" if other == value else f" ({other!r}) in another style"
                    out.append(
                        (
                            i,
                            f"argument value at {list(path)} of tool {tool_map.name!r} respelled "
                            f"from {before!r} to {value!r}, another value of the same enum"
                            f"{styled}: the call would say something else (a respelling takes "
                            "a spelling no value of the enum has)",
                        )
                    )
                    continue
            new_enums = _enum_values(new_tool, path)
            if _typed_in(before, old_enums) and _typed_in(value, new_enums):
                continue
            if _typed_in(before, new_enums) and _typed_in(value, old_enums):
                continue  # a surface spelling off the old enum, respelled back (one_to_one)
            out.append(
                (
                    i,
                    f"argument value at {list(path)} rewritten from {before!r} to {value!r}; "
                    "values are data, only declared enum values may be respelled",
                )
            )
        # Moving arguments around must keep every value: compare the multisets of leaves.
        before_leaves = Counter(_canonical_json(v) for _, v in _leaves(dict(event.args)))
        after_leaves = Counter(_canonical_json(v) for _, v in _leaves(expected))
        for key in sorted((before_leaves - after_leaves).keys()):
            out.append((i, f"argument value {json.loads(key)[1]!r} was lost by the mapping"))
        for key in sorted((after_leaves - before_leaves).keys()):
            out.append((i, f"argument value {json.loads(key)[1]!r} appeared from nowhere"))
    return out


def _restyled(before: Any, value: Any, values: Sequence[Any]) -> str | None:
    """The value of ``values`` other than ``before`` that ``value`` spells in another style
    (``restyled_into``), or None."""
    if not (isinstance(before, str) and isinstance(value, str)):
        return None
    return restyled_into(before, value, values)


#: what each value of a call is replaced with to follow it through the steps (every scalar
#: is, so any string in the result is a tag)
_TAG = "origin:"


def _origins(args: Mapping[str, Any], steps: Sequence[Any]) -> dict[tuple, tuple]:
    """Where the steps move each scalar value of ``args``: its path in the result -> its path
    in ``args`` (each value tagged with its path, then moved as calls are)."""
    paths: list[tuple] = []

    def tagged(value: Any, path: tuple) -> Any:
        if isinstance(value, dict):
            return {k: tagged(v, (*path, k)) for k, v in value.items()}
        if isinstance(value, list):
            return [tagged(v, (*path, n)) for n, v in enumerate(value)]
        paths.append(path)
        return f"{_TAG}{len(paths) - 1}"

    moved = apply_steps(tagged(dict(args), ()), steps)
    return {
        at: paths[int(tag[len(_TAG) :])]
        for at, tag in _leaves(moved)
        if isinstance(tag, str) and tag.startswith(_TAG)
    }


def _carried_problems(
    old: Tool, new: Tool, surface: Mapping[str, Any], origins: Mapping[tuple, tuple]
) -> list[str]:
    """The parameters of ``new`` that carry another canonical parameter's value while their
    schema is the one they had in ``old`` (a value moved onto a parameter the rewrite left as it
    was, as a swap of two values is): the call puts the value under the other parameter's
    description. One reason per parameter."""
    out: list[str] = []
    seen: set[tuple] = set()
    for at, origin in origins.items():
        if at == origin:
            continue
        # the parameter where the paths part (a whole nested object moved shows once)
        k = next(n for n in range(max(len(at), len(origin))) if at[n : n + 1] != origin[n : n + 1])
        there, came = at[: k + 1], origin[: k + 1]
        if there in seen:
            continue
        kept = _schemas_at(old, there)
        if not kept or kept != _schemas_at(new, there) or kept == _schemas_at(old, came):
            continue
        seen.add(there)
        _, value = _get(surface, at)
        said = next((s["description"] for s in kept if isinstance(s.get("description"), str)), "")
        described = f" ({_clip(said)!r})" if said else ""
        out.append(
            f"argument value {value!r} of canonical {list(came)} moved to {list(there)} of tool "
            f"{new.name!r}, whose schema there is the original's{described}: a parameter the "
            "rewrite kept now carries another one's value (values were swapped, not names)"
        )
    return out


def _schemas_at(tool: Tool, path: tuple) -> list[Any]:
    """The sub-schemas of ``tool``'s parameters at the argument path ``path``."""
    return [
        r.node
        for r in reached(dict(tool.parameters))
        if r.path is not None and _path_matches(r.path, path)
    ]


def enum_step_problems(mapping: RewriteMapping) -> list[tuple[str, str]]:
    """Enum respellings that are not one-to-one: two canonical values spelled alike (the
    call's value cannot be told back, whichever the trajectories hold), or one value spelled
    two ways. Read from the mapping alone, so no trajectory needs to hold both values."""
    out = []
    for tool, tool_map in sorted(mapping.tools.items()):
        for step in tool_map.steps:
            if step.kind != "enum":
                continue
            forward: dict[str, Any] = {}
            backward: dict[str, Any] = {}
            for old, new in step.values:
                for seen, key, value, what in (
                    (forward, old, new, "respelled both"),
                    (backward, new, old, "is the respelling of both"),
                ):
                    typed = _canonical_json(key)
                    if typed in seen and _canonical_json(seen[typed]) != _canonical_json(value):
                        out.append(
                            (
                                f"tool {tool!r} at {list(step.path)}",
                                f"enum value {key!r} {what} {seen[typed]!r} and {value!r}: "
                                "a respelling must be one-to-one",
                            )
                        )
                    seen.setdefault(typed, value)
    return out


# --- (b) round trip ---


def hook_problems(original: Harness, h2: Harness, m: RewriteMapping) -> list[tuple[str, str]]:
    """How the hooks of ``h2`` fire or act otherwise than ``original``'s (check ``hooks``)."""
    problems: list[tuple[str, str]] = []
    # each tool of the original that h2 keeps, and its name there (a dropped tool is called
    # nowhere, so a hook need not fire on it; the skill tool follows the harnesses: a mapping
    # leaves it out, since calls to it are skill loads)
    kept = {t.name for t in h2.tools}
    names = {t.name: m.tool_name(t.name) for t in original.tools}
    names = {old: new for old, new in names.items() if new in kept}
    if original.skill_tool is not None:
        names[original.skill_tool.name] = (
            h2.skill_tool.name if h2.skill_tool is not None else original.skill_tool.name
        )
    added = [t.name for t in h2.tools if t.name not in set(names.values())]
    mapped = set()
    for hook in original.hooks:
        new_id = m.hooks.get(hook.id, hook.id)
        mapped.add(new_id)
        new = h2.hook(new_id)
        where = f"hook {hook.id!r}"
        if new is None:
            problems.append((where, f"missing from the rewritten harness (as {new_id!r})"))
            continue
        # (its parameters name tool arguments, which a rule may rename with the tool's)
        before = (hook.event, hook.effect, hook.payload_fn)
        if before != (new.event, new.effect, new.payload_fn):
            problems.append((where, "its event, effect or payload function changed"))
            continue
        turns = _turns(hook, new)
        pairs = [(None, None), *names.items()]
        if new.matcher.tool is not None:  # a hook on every tool fires on an added one too
            pairs += [(None, name) for name in added]
        for tool, surface in pairs:
            for turn in turns:
                was = tool is not None or surface is None  # an added tool: it never fired there
                was = was and matches(hook.matcher, HookContext(hook.event, turn=turn, tool=tool))
                now = matches(new.matcher, HookContext(new.event, turn=turn, tool=surface))
                if was != now:
                    if tool is None and surface is not None:
                        on = f"tool {surface!r}, which the rewrite added"
                    elif tool is None:
                        on = "no tool"
                    elif tool == surface:
                        on = f"tool {tool!r}"
                    else:
                        on = f"tool {tool!r} (now {surface!r})"
                    fires = "fires" if now else "no longer fires"
                    problems.append((where, f"{fires} on {on} at turn {turn}"))
                    break
            else:
                continue
            break
    for hook in h2.hooks:
        if hook.id not in mapped and hook.effect != "add_context":
            problems.append(
                (f"hook {hook.id!r}", f"added with effect {hook.effect!r} (may only add context)")
            )
    return problems


def _turns(*hooks: Hook) -> list[int]:
    """The turns at which to compare hooks' matchers: the first eight, and every turn or
    multiple of a turn count their matchers name."""
    turns = set(range(8))
    for hook in hooks:
        if hook.matcher.turn is not None:
            turns |= {hook.matcher.turn, hook.matcher.turn + 1}
        if hook.matcher.every_n_turns:
            n = hook.matcher.every_n_turns
            turns |= {n - 1, n, n + 1, 2 * n}
    return sorted(t for t in turns if t >= 0)


def stale_name_problems(h2: Harness, m: RewriteMapping) -> list[tuple[str, str]]:
    """Free text of ``h2`` that still names a renamed tool or skill by its old name (check
    ``names``): what ``replace_in_harness`` with the rewrite's renames would still change, and
    a skill's ``allowed-tools`` that lists an old name. An old name that is the new name of
    another tool or skill (a swap) is not stale; one a tool the rewrite added took is."""
    images = {tool.name for tool in m.tools.values()} | set(m.skills.values())
    table = {old: tool.name for old, tool in m.tools.items() if tool.name != old}
    table |= {old: new for old, new in m.skills.items() if new != old}
    table = {old: new for old, new in table.items() if old not in images}
    found: dict[str, list[str]] = {}
    # a name no free text holds cannot be replaced in any: looked for in all of them at once
    # (two passes over the harness per renamed name made a check quadratic in its tools)
    texts = "\0".join(text for _, text, _ in _free_texts(h2, h2))
    for name, renamed in sorted(table.items()):
        if name not in texts:
            continue
        # the new name may hold the old one (a namespace): hide it, then look for the old
        hidden = {renamed: "\x00"}
        # a skill id may read as a phrase ("the after-sales team"), as skill_ids.rename reads it
        phrases = {name} if name in m.skills else set()
        masked = replace_in_harness(h2, hidden)
        fixed = replace_in_harness(h2, {**hidden, name: renamed}, phrases)
        for where, text, replaced in _free_texts(masked, fixed):
            if text != replaced:
                found.setdefault(where, []).append(name)
    for skill in h2.skills:
        for key in ALLOWED_TOOLS:
            listed = allowed_tool_names(skill.extra.get(key))
            stale = sorted({v for v in listed if v in table})
            if stale:
                found.setdefault(f"skill {skill.id!r} {key}", []).extend(stale)
    return [(where, f"still names {', '.join(names)}, renamed") for where, names in found.items()]


def swapped_tool_problems(
    original: Harness, h2: Harness, m: RewriteMapping
) -> list[tuple[str, str]]:
    """The tools of ``original`` whose surface tool (under the name the mapping gives it) has
    the description and parameters of another canonical tool, not its own (check ``names``;
    ``planner.swapped_with``): names swapped without the renames in the mapping, so a call
    reaches a tool that says it does something else."""
    surface: dict[str, Tool] = {}
    for tool in h2.tools:
        surface.setdefault(tool.name, tool)
    out = []
    for tool in original.tools:
        new = surface.get(m.tool_name(tool.name))
        if new is None or new is tool:
            continue
        name = (
            repr(new.name) if new.name == tool.name else f"{new.name!r} (canonical {tool.name!r})"
        )
        other = swapped_with(original, tool, new)
        if other is not None:
            out.append(
                (
                    f"tool {name}",
                    f"has the description and parameters of canonical tool {other!r} "
                    f"({_clip(new.description)!r}), not its own: tools swapped without the "
                    "renames in the mapping (its calls would reach a tool that does something "
                    "else)",
                )
            )
            continue
        swapped = swapped_parameter(tool, new, m.tools.get(tool.name))
        if swapped is not None:
            path, end, other_path, whole = swapped
            said = [s.get("description") for s in _schemas_at(tool, other_path)]
            what = "schema" if whole else "description"
            out.append(
                (
                    f"tool {name} parameter {list(end)}",
                    f"has the {what} of canonical {list(other_path)} ({_clip(str(said[0]))!r}), "
                    f"not that of canonical {list(path)}, which the mapping puts there: two "
                    f"parameters' {what}s swapped, names kept (a call's value would read "
                    "under another parameter's description)",
                )
            )
    return out


#: the hooks and names problems of recent rewrites: they depend on the harnesses alone, and
#: one rewrite is checked on many trajectories
_HARNESS_LEVEL: OrderedDict[str, tuple[list, list, tuple]] = OrderedDict()


def _harness_level(
    original: Harness, h2: Harness, m: RewriteMapping
) -> tuple[list[tuple[str, str]], list[tuple[str, str]], tuple[list[tuple[str, str]], list[str]]]:
    """``(hook_problems, stale_name_problems, skill_problems)`` of a rewrite, remembered for
    the last few."""
    key = "\0".join((original.to_json(), h2.to_json(), json.dumps(m.to_dict(), sort_keys=True)))
    found = _HARNESS_LEVEL.get(key)
    if found is None:
        found = _HARNESS_LEVEL[key] = (
            hook_problems(original, h2, m),
            [*stale_name_problems(h2, m), *swapped_tool_problems(original, h2, m)],
            skill_problems(original, h2, m),
        )
        while len(_HARNESS_LEVEL) > 64:
            _HARNESS_LEVEL.popitem(last=False)
    return found


def _free_texts(a: Harness, b: Harness) -> Iterable[tuple[str, str, str]]:
    """``(where, text of a, text of b)`` for the free text of two harnesses of the same shape."""
    for sa, sb in zip(a.prompt.sections, b.prompt.sections, strict=True):
        yield f"prompt section {sa.id!r}", f"{sa.title}\n{sa.body}", f"{sb.title}\n{sb.body}"
    yield "prompt template", a.prompt.template or "", b.prompt.template or ""
    pairs = list(zip(a.tools, b.tools, strict=True))
    if a.skill_tool is not None and b.skill_tool is not None:
        pairs.append((a.skill_tool, b.skill_tool))
    for x, y in pairs:
        yield f"tool {x.name!r}", x.to_json(), y.to_json()
    for sx, sy in zip(a.skills, b.skills, strict=True):
        yield (
            f"skill {sx.id!r}",
            f"{sx.description}\n{sx.content}",
            f"{sy.description}\n{sy.content}",
        )
    for hx, hy in zip(a.hooks, b.hooks, strict=True):
        yield f"hook {hx.id!r}", hx.message, hy.message


# --- skills ---

_NAME_BOUNDARY = "A-Za-z0-9_-"  # as hsa.harness.identifiers reads a whole token


def _rename_mask(m: RewriteMapping) -> Callable[[str], str]:
    """A function that writes every name the mapping's text replacements (``m.text``) turn
    into one another as one of them, wherever it stands as a whole token: text that differs
    only by declared renames (applied or, where a rule leaves a word alone, not) reads the
    same through it, both ways of a swap and every step of a chain too."""
    parent: dict[str, str] = {}

    def root(name: str) -> str:
        while parent.setdefault(name, name) != name:
            name = parent[name]
        return name

    for old, new in m.text:
        if old and new and old != new:
            parent[root(old)] = root(new)
    if not parent:
        return _unmasked
    shown = {name: root(name) for name in parent}
    return _mask_with(tuple(sorted(shown.items())))


def _unmasked(text: str) -> str:
    return text


@lru_cache(maxsize=256)
def _mask_with(shown: tuple[tuple[str, str], ...]) -> Callable[[str], str]:
    table = dict(shown)
    alternation = "|".join(re.escape(n) for n in sorted(table, key=lambda n: (-len(n), n)))
    regex = re.compile(f"(?<![{_NAME_BOUNDARY}])(?:{alternation})(?![{_NAME_BOUNDARY}])")

    def shown_as(found: re.Match[str]) -> str:
        # a name in a path, file name or URL names a file or place, which no rename
        # replaces (``replace_identifiers``): one renamed there is a change
        if in_path(found.string, found.start(), found.end()):
            return found.group()
        return table[found.group()]

    return lambda text: regex.sub(shown_as, text)


@lru_cache(maxsize=1024)
def _blocks_of(content: str, mask: Callable[[str], str]) -> Counter:
    # the original's skills are read again for every rewrite of them (the mask is cached
    # per rename table, so it is a fair key)
    return Counter(skill_blocks(mask(content)))


def _content_change(before: Counter, after: Counter) -> str:
    """How a skill's content (its parts, ``_blocks_of``) changed: the first block it lost (of
    the parts it no longer has), else the first it gained (of its new parts), else the first
    part whose blocks stand in another order."""
    had = Counter(block for part in before.elements() for block in part)
    has = Counter(block for part in after.elements() for block in part)
    lost, added = before - after, after - before
    for parts, more, fewer, what in ((lost, had, has, "lost"), (added, has, had, "gained")):
        for part in parts:
            for kind, text in part:
                if more[(kind, text)] > fewer[(kind, text)]:
                    again = " once more" if fewer[(kind, text)] else ""
                    return f"{what} {kind} {_clip(text)!r}{again}"
    first = next(iter(lost or added))
    return f"lost the part that begins {_clip(first[0][1])!r}, its blocks in another order"


def _clip(text: str, width: int = 80) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def skill_problems(
    original: Harness, h2: Harness, m: RewriteMapping
) -> tuple[list[tuple[str, str]], list[str]]:
    """``(problems, missing)`` for check ``skills``: the skills of ``original`` whose content
    ``h2`` changed other than by markup (``skill_blocks``), by reordering its parts or by the
    mapping's declared renames, or whose description no longer holds the original's text;
    and the ids of those ``h2`` does not have (under their mapped ids), for the trajectory to
    judge."""
    problems: list[tuple[str, str]] = []
    missing: list[str] = []
    mask: Callable[[str], str] | None = None  # made when a skill changed
    # the tools renamed (the skill tool too), which a skill's allowed-tools follows
    tool_names = {old: tool.name for old, tool in m.tools.items() if tool.name != old}
    loader, loader_now = original.skill_tool, h2.skill_tool
    if loader is not None and loader_now is not None and loader.name != loader_now.name:
        tool_names[loader.name] = loader_now.name
    now_by_id = {s.id: s for s in h2.skills}
    for skill in original.skills:
        new = now_by_id.get(m.skills.get(skill.id, skill.id))
        if new is None:
            missing.append(skill.id)
            continue
        if (new.content, new.description, new.extra) == (
            skill.content,
            skill.description,
            skill.extra,
        ):
            continue  # (most rules touch no skill)
        if mask is None:
            mask = _rename_mask(m)
        where = f"skill {skill.id!r}"
        if new.content != skill.content:
            before, after = _blocks_of(skill.content, mask), _blocks_of(new.content, mask)
            if before != after:
                problems.append((where, f"its content {_content_change(before, after)}"))
        changed = _front_matter_change(skill, new, tool_names)
        if changed is not None:
            problems.append((where, changed))
        said = " ".join(mask(skill.description).split())
        if said and new.description != skill.description:
            now = " ".join(mask(new.description).split())
            if said not in now and said[:1].lower() + said[1:] not in now:
                problems.append((where, f"its description no longer says {_clip(said)!r}"))
    return problems, missing


def _front_matter_change(skill: Skill, new: Skill, tool_names: dict[str, str]) -> str | None:
    """How ``new``'s other front matter (``extra``: license, allowed-tools, metadata, ...)
    differs from ``skill``'s, its allowed-tools renamed with the tools, or None."""
    expected = rename_allowed_tools(skill, tool_names).extra
    if new.extra == expected:
        return None
    for key in (*expected, *(k for k in new.extra if k not in expected)):
        if key not in new.extra:
            return f"its front matter lost {key!r}"
        if key not in expected:
            return f"its front matter gained {key!r}"
        if new.extra[key] != expected[key]:
            return f"its front matter {key!r} changed: {_clip(repr(new.extra[key]))}"
    return None


def dropped_skill_problems(
    original: Harness, missing: Sequence[str], events: Sequence[Event]
) -> list[tuple[str, str]]:
    """The skills a rewrite dropped (``missing``) that it may not: one the trajectory loads,
    or any where ``original`` has no skill tool (every skill is then shown in full, and a
    trajectory may follow one without loading it)."""
    loaded = {e.skill_id for e in events if isinstance(e, SkillLoad)}
    out = []
    for skill_id in missing:
        if skill_id in loaded:
            out.append((f"skill {skill_id!r}", "dropped, and the trajectory loads it"))
        elif original.skill_tool is None:
            out.append(
                (
                    f"skill {skill_id!r}",
                    "dropped from a harness without a skill tool, which shows every skill in "
                    "full (a trajectory may follow it without loading it)",
                )
            )
    return out


def _only_at(a: Sequence[Event], b: Sequence[Event], at: Set[int]) -> bool:
    """Whether ``a`` differs from ``b`` nowhere but at the events ``at`` (calls their own
    schema refuses, none when empty) and at the results of those calls."""
    a, b = normalize_call_ids(a), normalize_call_ids(b)
    if not at or len(a) != len(b):
        return False
    calls = {e.call_id for i, e in enumerate(b) if i in at and isinstance(e, ToolCall)}
    texts_a, texts_b = _texts(a), _texts(b)
    return all(
        i in at or (isinstance(y, ToolResult) and y.call_id in calls)
        for i, y in enumerate(b)
        if texts_a[i] != texts_b[i]
    )


def _same(a: Sequence[Event], b: Sequence[Event]) -> bool:
    return _texts(normalize_call_ids(a)) == _texts(normalize_call_ids(b))


def _texts(events: Sequence[Event]) -> list[dict[str, Any]]:
    """Events as the rows that store them, arguments as JSON text: key order is data (``==``
    on the events would take ``{"a": 1, "b": 2}`` for ``{"b": 2, "a": 1}``, and 1 for
    ``True``). A hook's payload is compared by its values (JSON text with sorted keys): the
    message shows no order of its own, and parse gives the placeholders in template order."""
    rows = [event_to_row(e) for e in events]
    for event, row in zip(events, rows, strict=True):
        if isinstance(event, HookFired):
            row["payload"] = json.dumps(event.payload, sort_keys=True, ensure_ascii=False)
    return rows


def _first_difference(a: Sequence[Event], b: Sequence[Event]) -> str:
    a, b = normalize_call_ids(a), normalize_call_ids(b)
    for i, (x, y, tx, ty) in enumerate(zip(a, b, _texts(a), _texts(b), strict=False)):
        if tx != ty:
            if x == y:  # equal as dicts: the same but for the order of keys (or a type)
                field = next(k for k in ty if tx[k] != ty[k])
                return (
                    f"event {i}: {field} {tx[field]} where {ty[field]} was expected (the same "
                    "but for the order of keys, which is data, or a value's type)"
                )
            return f"event {i}: expected {y!r}, got {x!r}"
    return f"expected {len(b)} events, got {len(a)}"


def roundtrip(events: Sequence[Event], harness: Harness) -> list[Event]:
    """``parse(render(events, harness), harness)``."""
    return parse(render(events, harness), harness)


# --- (c) replay ---


def _calls(events: Sequence[Event]) -> list[ToolCall]:
    return [e for e in events if isinstance(e, ToolCall)]


def _results(events: Sequence[Event]) -> dict[str, ToolResult]:
    return {e.call_id: e for e in events if isinstance(e, ToolResult)}


# The canonical replay of a trajectory is the same for every rule and seed checked on it.
_BASELINES: OrderedDict[tuple, Any] = OrderedDict()


def _events_key(events: Sequence[Event]) -> str:
    from hsa.harness.events import events_to_rows

    return json.dumps(events_to_rows(events), sort_keys=True, ensure_ascii=False)


class CanonicalReplayError(HsaError):
    """The canonical trajectory itself does not replay on its own harness: no evidence about
    a rule."""


def replay_problems(
    canonical: Sequence[Event], recovered: Sequence[Event], replay: Replay
) -> list[str]:
    """Why replaying the recovered (inverse-mapped) calls differs from the canonical episode;
    ``CanonicalReplayError`` when the canonical calls themselves do not replay."""
    if replay.env is None:
        problems = []
        want, got = _calls(canonical), _calls(recovered)
        if len(want) != len(got):
            return [f"{len(got)} calls recovered, {len(want)} recorded"]
        for n, (w, g) in enumerate(zip(want, got, strict=True)):
            if w.tool != g.tool or _canonical_json(w.args) != _canonical_json(g.args):
                problems.append(
                    f"call {n}: recovered {g.tool}({_canonical_json(g.args)}), "
                    f"recorded {w.tool}({_canonical_json(w.args)})"
                )
        recorded, recovered_results = _results(canonical), _results(recovered)
        for n, (w, g) in enumerate(zip(want, got, strict=True)):
            a, b = recorded.get(w.call_id), recovered_results.get(g.call_id)
            same = (a is None and b is None) or (
                a is not None
                and b is not None
                and (a.content, a.is_error) == (b.content, b.is_error)
            )
            if not same:
                problems.append(f"call {n}: its result differs from the recorded one")
        return problems
    if replay.task is None:
        return ["an environment replay needs the trajectory's task"]
    from hsa.envs.episode import replay as rerun

    harness = replay.harness
    key = (
        replay.env,
        replay.task.id,
        _events_key(canonical),
        None if harness is None else harness.to_json(),
    )
    base = _BASELINES.get(key)
    if base is None:
        try:
            base = rerun(replay.env, replay.task, canonical, harness=harness)
        except HsaError as exc:  # kept too, so each rule and seed is not a rerun of it
            base = f"the canonical trajectory does not replay on its own harness: {exc}"
        _BASELINES[key] = base
        while len(_BASELINES) > 256:
            _BASELINES.popitem(last=False)
    if isinstance(base, str):
        raise CanonicalReplayError(base)
    episode = rerun(replay.env, replay.task, recovered, harness=harness)
    problems = []
    want_results = [(r.content, r.is_error) for r in base.events if isinstance(r, ToolResult)]
    got_results = [(r.content, r.is_error) for r in episode.events if isinstance(r, ToolResult)]
    if len(got_results) != len(want_results):
        problems.append(
            f"{len(got_results)} tool results, {len(want_results)} in the canonical run"
        )
    for n, (mine, theirs) in enumerate(zip(got_results, want_results, strict=False)):
        if mine != theirs:
            problems.append(f"tool result {n} differs from the canonical run: {mine[0][:80]!r}")
    if not _same(episode.events, base.events):
        problems.append(
            "the replayed episode differs: " + _first_difference(episode.events, base.events)
        )
    score = replay.env.score(replay.task, episode.state, episode.events).score
    base_score = replay.env.score(replay.task, base.state, base.events).score
    if score != base_score:
        problems.append(f"score {score} differs from the canonical {base_score}")
    return problems


def _canonical_json(value: Any) -> str:
    # Exact comparison: key order aside, types matter (1 is not 1.0, True is not 1).
    return json.dumps(_typed(value), sort_keys=True, ensure_ascii=False)


def _typed(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _typed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_typed(v) for v in value]
    return [type(value).__name__, value]


# --- harness ---


_UNSHOWN = {
    "tools": "the tool docs, so the model does not see its tools",
    "output_format": "the call instructions, so the model is not told how to write calls",
}


def prompt_problems(original: Harness, h2: Harness) -> list[tuple[str, str]]:
    """What is wrong with ``h2``'s system prompt (check ``harness``): it does not render where
    ``original``'s does (planning drops such a draw: ``PromptUnrendered``), or it does not
    show what a model under ``h2``'s text protocol needs: the tool docs, the call
    instructions (a prompt template that leaves out its sections shows neither). What
    ``original``'s own prompt does not render or show either is its author's choice, not the
    rule's."""
    try:
        system_prompt(h2)
    except HsaError as exc:
        try:
            system_prompt(original)
        except HsaError:
            return []
        return [("system prompt", f"does not render, where the original's does: {exc}")]
    try:
        missing = unshown(h2)
        if missing and not original.protocol.is_api:
            missing = [kind for kind in missing if kind not in unshown(original)]
    except HsaError:  # (the original's prompt does not render)
        return []
    return [
        ("system prompt", f"under {h2.protocol.label} it does not show {_UNSHOWN[kind]}")
        for kind in missing
    ]


def param_name_problems(original: Harness, h2: Harness) -> list[tuple[str, str]]:
    """The parameter names ``h2`` brings that are not legal in every call format (check
    ``harness``): a property name no tool of ``original`` has must match ``PARAM_NAME`` and
    not be a Python keyword (a call written as Python passes arguments by keyword). Names
    ``original`` has already are its corpus's, not the rule's, and pass whatever they are."""
    had: set[str] = set()
    for tool in original.tools:
        had |= all_property_names(dict(tool.parameters))
    problems = []
    for tool in h2.tools:
        for name in sorted(all_property_names(dict(tool.parameters)) - had):
            if keyword.iskeyword(name):
                why = "a Python keyword, which a call written as Python cannot pass"
            elif not PARAM_NAME.match(name):
                why = (
                    "not legal in every call format: letters, digits and _, not starting "
                    "with a digit, at most 64"
                )
            else:
                continue
            problems.append((f"tool {tool.name!r}", f"parameter {name!r} is {why}"))
    return problems


# --- all checks ---


@lru_cache(maxsize=256)
def _harness_problems(harness_json: str) -> tuple[tuple[str, str], ...]:
    # One rewrite is checked on many trajectories; validating it once is enough.
    problems = document_problems(json.loads(harness_json))
    return tuple((p.where or "$", p.message) for p in problems)


def check_rewrite(
    original: Harness,
    rewrite: Rewrite,
    events: Sequence[Event],
    *,
    replay: Replay = RECORDED,
    trajectory_id: str = "",
    label: str = "",
) -> CheckReport:
    """Run every check for one rewrite of ``original`` on one canonical trajectory.

    ``events`` are ``hsa.harness`` events (``Trajectory.events``; rows read from Parquet become
    trajectories through ``hsa.harness.trajectories_from_table``); anything else is a
    ``TypeError``, since a check of values it cannot read would pass them.
    """
    strays = [e for e in events if not isinstance(e, Event)]
    if strays:
        raise TypeError(
            f"check_rewrite takes hsa.harness events, not {type(strays[0]).__name__}: read "
            "Parquet rows with hsa.harness.trajectories_from_table"
        )
    h2, m = rewrite.harness, rewrite.mapping
    outcomes: dict[str, str] = {}
    failures: list[Failure] = []

    def record(check: str, problems: Sequence[tuple[str, str]], skip: bool = False) -> None:
        outcomes[check] = SKIP if skip else (FAIL if problems else PASS)
        if not skip:  # a skipped check's problems are the canonical trajectory's, not the rule's
            failures.extend(Failure(check, where, msg) for where, msg in problems)

    record(
        "harness",
        [
            *_harness_problems(h2.to_json()),
            *prompt_problems(original, h2),
            *param_name_problems(original, h2),
        ],
    )

    try:
        surface = map_events(events, m, original)
    except ArgumentClash as exc:
        # the mapping would overwrite an argument a call carries: no surface to check
        record("values", [(exc.where or "mapping", exc.message)])
        for check in ("schema", "roundtrip", "replay"):
            record(check, [], skip=True)
        hooks, names, (skills, missing) = _harness_level(original, h2, m)
        record("hooks", hooks)
        record("names", names)
        record("skills", [*skills, *dropped_skill_problems(original, missing, events)])
        return CheckReport(trajectory_id, outcomes, tuple(failures), label, True)
    baseline_calls = call_problems(original, events)
    found = call_problems(h2, surface) or declared_problems(original, h2, events, surface)
    # a canonical call its own schema refuses (as corpora hold some: BFCL's "horror" for the
    # enum's "Horror") is no evidence about the rule: the checks skip what goes wrong there
    off_schema = {i for i, _ in baseline_calls}
    record("schema", [(f"event {i}", msg) for i, msg in found], skip=bool(off_schema))
    values = [(f"event {i}", msg) for i, msg in value_problems(original, h2, m, events)]
    record("values", enum_step_problems(m) + values)
    hooks, names, (skills, missing) = _harness_level(original, h2, m)
    record("hooks", hooks)
    record("names", names)
    record("skills", [*skills, *dropped_skill_problems(original, missing, events)])

    recovered: list[Event] | None = None
    try:
        baseline_ok = _same(roundtrip(events, original), as_shown(events, original))
    except HsaError:
        baseline_ok = False
    # a trajectory h2's protocol cannot write (an argument nested deeper than its call format
    # writes, text it reads as calls) is never written under it: the augment job passes over
    # such a variant for it
    unwritten = cannot_write(hazard_of(events), h2, m)
    try:
        parsed = roundtrip(surface, h2)
        recovered = map_events(parsed, m.inverse())
        rt: list[tuple[str, str]] = []
        # read back in the order render shows them (notes moved only among results, so the
        # calls, and the indices in off_schema, stay where they are)
        order = shown_order(surface, h2)
        shown, shown_events = [surface[i] for i in order], [events[i] for i in order]
        if not _same(parsed, shown):
            rt.append(("parse(render)", _first_difference(parsed, shown)))
        elif not _same(recovered, shown_events):
            rt.append(("inverse mapping", _first_difference(recovered, shown_events)))
        there = _only_at(parsed, shown, off_schema) and _only_at(
            recovered, shown_events, off_schema
        )
        record("roundtrip", rt, skip=(not baseline_ok or there or unwritten) and bool(rt))
    except HsaError as exc:
        record("roundtrip", [("render/parse", str(exc))], skip=not baseline_ok or unwritten)
    compared = events
    if recovered is None:
        recovered = map_events(surface, m.inverse())
    else:  # read back by parse: in the order render shows them (the calls' indices hold)
        with contextlib.suppress(HsaError):
            compared = [events[i] for i in shown_order(surface, h2)]
    there = _only_at(recovered, compared, off_schema)
    try:
        rp = replay_problems(events, recovered, replay)
        record("replay", [("replay", p) for p in rp], skip=there and bool(rp))
    except CanonicalReplayError:
        record("replay", [], skip=True)
    except HsaError as exc:
        record("replay", [("replay", str(exc))], skip=there)
    changed = not (m.is_identity and h2.to_json() == original.to_json())
    return CheckReport(trajectory_id, outcomes, tuple(failures), label, changed)


@dataclass(slots=True)
class Tally:
    """Counts of pass/fail/skip per check, for a rule or any other group of reports, and how
    many of the reports' rewrites changed something."""

    counts: dict[str, dict[str, int]] = field(default_factory=dict)
    failures: list[tuple[str, Failure]] = field(default_factory=list)
    changed: int = 0

    def add(self, report: CheckReport) -> None:
        for check, outcome in report.outcomes.items():
            per = self.counts.setdefault(check, {PASS: 0, FAIL: 0, SKIP: 0})
            per[outcome] += 1
        self.failures.extend((report.trajectory_id, f) for f in report.failures)
        self.changed += report.changed

    @property
    def ok(self) -> bool:
        return all(c[FAIL] == 0 for c in self.counts.values())


def tally(reports: Iterable[CheckReport], key: Callable[[CheckReport], str]) -> dict[str, Tally]:
    """Reports grouped by ``key`` and counted."""
    out: dict[str, Tally] = {}
    for report in reports:
        out.setdefault(key(report), Tally()).add(report)
    return out
