"""The variant planner: from a harness and a recipe, the harness variants to render under.

Planning is small and deterministic (same harness, recipe, seed and context give the same
variants, ids included); the engine then applies each variant's mapping to trajectories in
bulk. A recipe with a trajectory-dependent rule (``Recipe.needs``) is planned per trajectory
(or per group of trajectories with the same ``Context``): without a context such rules are
left out of the draw's application, never guessed.

Each variant is planned on its own (``plan_variant``), so a job may plan only the variants it
uses (``LazyPlan``). Which variants a trajectory is rendered under is decided here too, by
hashing its id: ``pick_order`` gives each id its order over the variant slots, and ``walk``
takes slots in that order, passing over rewrites that change nothing and repeats; ``pick``
does it for one trajectory over planned variants, the augment job for a column of ids over
lazily planned ones, so ``plan`` then ``pick`` predicts exactly what ``hsa augment`` writes.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import json
import operator
import sys
from collections.abc import Callable, Iterable, Sequence, Set
from collections.abc import Mapping as MappingABC
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa

from hsa.augment import arguments as undeclared
from hsa.augment.mapping import EACH, RewriteMapping, Step, ToolMap, apply_steps, respelled
from hsa.augment.names import restyled_into
from hsa.augment.param_schemas import copy_json, reached
from hsa.augment.recipe import Recipe, RecipeRule
from hsa.augment.registry import get
from hsa.augment.rule import NO_CONTEXT, Context, Rewrite, Rule
from hsa.augment.seeded import derive_seed, fnv1a, generator, id_array, splitmix64
from hsa.errors import HarnessError, HsaError, PlanError, RuleError, refuse_kind
from hsa.harness.events import AssistantMessage, Event, HookFired, SkillLoad, ToolCall
from hsa.harness.model import Harness, Section, Tool
from hsa.harness.parse import alike_hooks, call_like, reads_as_calls
from hsa.harness.pickling import by_fields
from hsa.harness.prompt import system_prompt
from hsa.harness.protocols import CALL_FORMATS
from hsa.harness.protocols.literals import nesting
from hsa.harness.render import tools_json
from hsa.harness.validate import harness_problems

_REDRAWS = 4  # attempts at a variant that changes something
#: the version of how variants are planned and picked: the same recipe and seed give other
#: variants under another version, so a dataset records it and a rerun under another refuses
#: (5: a draw that makes two hooks' messages read alike is drawn again, ``HooksAlike``; 6: a
#: tool_result hook's joined to its tool message reads as no user or system hook's, so a draw
#: giving it their wording and wrapper is kept; 7: a rule whose changes no row under the
#: variant can show, as skills of a harness that neither lists nor loads them, is left out
#: of it: ``_unshown_steps``; and each rule's generator is seeded by its position among the
#: rules applied before it, not among those drawn, so one variant id names one harness; 8:
#: a rule whose changes are all to tools a later rule drops is left out too, as
#: ``tools.add_optional`` on tools ``tools.drop_unused`` then drops: ``_shows_tools``; and
#: draws planning now refuses that 7 took, which a rule of one's own may make: an enum swap
#: hidden by a case change, a drop step, two parameters' schemas or descriptions swapped, a
#: section deletion taken for no change, nested required names, bounds narrowed. A refusal
#: that changes what any recipe draws is a new version: a dataset of the old one would
#: otherwise be taken for finished, or resumed with both in it)
PLAN_VERSION = 8
#: the version of how the augment job picks each trajectory's variants among the planned ones
#: (2: passing over those its rows would show as the canonical one, or as one already taken,
#: shows them: ``shown_key``; 3: a mapping entry for a tool the variant dropped shows
#: nothing), recorded by the datasets it writes
PICK_VERSION = 3


@by_fields
@dataclass(frozen=True, slots=True)
class Variant:
    """One planned harness variant: the rules applied, the rewritten harness and its mapping.

    ``rules`` holds ``(name, version, params)`` with the parameters the rule ran with (defaults
    filled in). ``variant_id`` is a stable hash of the harness id and version, the rules, their
    parameters, the variant's seed and, for trajectory-dependent rules, the context: what
    makes the variant's harness (``apply_chain`` of its rules from its seed gives it again),
    so one id names one harness, whatever else its draw held that changed nothing.
    """

    variant_id: str
    harness_id: str
    rules: tuple[tuple[str, str, MappingABC[str, Any]], ...]
    harness: Harness
    mapping: RewriteMapping
    seed: int = 0
    index: int = 0
    #: ``content_key(harness, mapping)`` when planning made it (empty: made when asked)
    content: bytes = field(default=b"", compare=False, repr=False)
    #: ``mapping.to_json()`` when planning made it (empty: made when asked)
    mapping_text: str = field(default="", compare=False, repr=False)
    #: the draws of its slot planning dropped because the harness's prompt did not render
    #: under their rules (``PromptUnrendered``), each as the line saying why
    dropped: tuple[str, ...] = field(default=(), compare=False, repr=False)
    #: whether the undeclared arguments of its context changed it (``_plan_slot``): planned
    #: without them, its slot's variant would be another
    argued: bool = field(default=False, compare=False, repr=False)

    def __hash__(self) -> int:
        return hash(self.variant_id)  # equal variants have one id

    def __repr__(self) -> str:
        rules = [name for name, _, _ in self.rules]
        return (
            f"Variant(variant_id={self.variant_id!r}, harness_id={self.harness_id!r}, "
            f"rules={rules!r}, seed={self.seed}, index={self.index})"
        )

    def key(self) -> bytes:
        """What the variant is, as a digest (``content_key``)."""
        return self.content or content_key(self.harness, self.mapping)

    def mapping_json(self) -> str:
        """The mapping as JSON (``RewriteMapping.to_json``)."""
        return self.mapping_text or self.mapping.to_json()

    @property
    def is_canonical(self) -> bool:
        return not self.rules

    def lineage(self) -> dict[str, Any]:
        """What a dataset row records about the variant it was rendered under."""
        return {
            "variant_id": self.variant_id,
            "harness_id": self.harness_id,
            "seed": self.seed,
            "rules": [{"name": n, "version": v, "params": dict(p)} for n, v, p in self.rules],
        }


def context_through(context: Context, mapping: RewriteMapping) -> Context:
    """``context`` with canonical names turned into ``mapping``'s surface names (and the
    undeclared arguments' paths into where its steps take them)."""
    tools = context.used_tools
    skills = context.used_skills
    arguments = context.arguments
    return Context(
        None if tools is None else frozenset(mapping.tool_name(t) for t in tools),
        None if skills is None else frozenset(mapping.skills.get(s, s) for s in skills),
        arguments
        if not arguments or mapping.is_identity
        else undeclared.through(arguments, mapping),
    )


def apply_chain(
    harness: Harness,
    chain: Sequence[tuple[Rule, MappingABC[str, Any]]],
    *,
    seed: int,
    context: Context = NO_CONTEXT,
    strict: bool | None = None,
    fired: Iterable[str] | None = None,
) -> tuple[Rewrite, tuple[tuple[str, str, dict[str, Any]], ...]]:
    """Apply rules in order, each with its own generator derived from ``seed`` and its position
    among the rules applied before it (those that found nothing to change not counted).

    Returns the composed rewrite and the ``(name, version, params)`` actually applied. The
    result is validated as a harness document; an invalid one is the rule's bug. A rule that
    changes only what no row shows is applied here (planning leaves it out: ``shown``, as
    ``_apply_resolved`` takes it). ``strict``:
    as ``Rule.run`` takes it. ``fired``: the canonical ids of the hooks the trajectories fire
    (``Sight.of(events).hooks``), which the rewrite must keep; None, every hook of the harness.
    """
    resolved = [(item, item.resolve_params(params)) for item, params in chain]
    return _apply_resolved(
        harness, resolved, seed=seed, context=context, strict=strict, fired=fired
    )


def _apply_resolved(
    harness: Harness,
    chain: Sequence[tuple[Rule, dict[str, Any]]],
    *,
    seed: int,
    context: Context = NO_CONTEXT,
    strict: bool | None = None,
    fired: Iterable[str] | None = None,
    shown: bool = False,
) -> tuple[Rewrite, tuple[tuple[str, str, dict[str, Any]], ...]]:
    """``apply_chain`` with each rule's parameters resolved already (``Rule.resolve_params``).

    ``shown`` (planning): a rule whose changes no row under the result can show
    (``_unshown_steps``: skills of a harness that neither lists nor loads them, titles of
    sections that render empty or under XML headings, ...) is left out as one that changed
    nothing, and the rules after it are applied again without it; and a result whose prompt
    does not render, where the harness's does, raises ``PromptUnrendered``."""
    run = _Run(harness)
    skip: set[int] = set()
    while True:
        run.apply(chain, skip, seed=seed, context=context, strict=strict)
        hidden = _unshown_steps(run.rewrite.harness, run.steps) if shown and run.steps else ()
        if not hidden:
            break
        skip.update(hidden)
        run.back_to(min(hidden))
    rewrite, applied, stages = run.rewrite, run.applied, run.stages
    if stages and _alike(rewrite.harness) is not None and harness.derived(_alike) is None:
        index = next(k for k, stage in enumerate(stages) if _alike(stage.harness) is not None)
        raise HooksAlike(stages[index].harness, where=_rule_at(applied, index))
    # Validating once at the end keeps planning cheap; only when the result is invalid are the
    # intermediate harnesses checked, to name the first rule that broke it.
    if stages and harness_problems(rewrite.harness):
        before = harness_problems(harness)
        if before:  # not the rules' doing (a harness made in code is not validated)
            raise HarnessError(
                f"the harness to rewrite is invalid, before any rule: {before[0]}",
                where=f"harness {harness.id!r}",
            )
        for index, stage in enumerate(stages):
            problems = harness_problems(stage.harness)
            if problems:
                raise RuleError(
                    f"produced an invalid harness: {problems[0]}", where=_rule_at(applied, index)
                )
    hooks = None if fired is None else frozenset(fired)
    swaps = _enum_swaps(harness, run.steps, stages, context)
    if stages and (any(swaps) or _lost(harness, rewrite, context, hooks)):
        # name the first rule after which it is lost
        for index, stage in enumerate(stages):
            why = _lost(harness, stage, context, hooks, stages[index - 1] if index else None)
            why = why or swaps[index]
            if why:
                raise RuleError(why, where=_rule_at(applied, index))
    if shown and stages:
        # Rendered here, kept on the harness (``system_prompt``): the job renders every
        # variant's prompt anyway, so planning does it first at no cost.
        failed = _render_failure(rewrite.harness)
        if failed is not None and _render_failure(harness) is None:
            index = len(stages) - 1  # the rule after which it no longer renders
            while index and _render_failure(stages[index - 1].harness) is not None:
                index -= 1
            raise PromptUnrendered(harness, failed, where=_rule_at(applied, index))
    return rewrite, tuple(applied)


def _render_failure(harness: Harness) -> HsaError | None:
    """Why ``harness``'s system prompt does not render, or None (it renders, and is kept)."""
    try:
        system_prompt(harness)
    except HsaError as exc:
        return exc
    return None


class _Step(NamedTuple):
    """A rule of a chain that changed something: its position in the chain, the harness it
    was given, its own rewrite of it, and the fields of the harness it changed."""

    position: int
    before: Harness
    step: Rewrite
    fields: tuple[str, ...]


class _Run:
    """A chain being applied to ``harness``: the rewrite so far, the rules that changed
    something (``applied``), the rewrite after each of them (``stages``) and their own
    rewrites (``steps``)."""

    def __init__(self, harness: Harness):
        self.harness = harness
        self.rewrite = Rewrite(harness)
        self.applied: list[tuple[str, str, dict[str, Any]]] = []
        self.stages: list[Rewrite] = []
        self.steps: list[_Step] = []
        self.next = 0  # the position in the chain to go on from

    def apply(
        self,
        chain: Sequence[tuple[Rule, dict[str, Any]]],
        skip: Set[int],
        *,
        seed: int,
        context: Context,
        strict: bool | None,
    ) -> None:
        """Apply the rules of ``chain`` from ``self.next`` on, but those at ``skip``."""
        for position in range(self.next, len(chain)):
            if position in skip:
                continue
            item, resolved = chain[position]
            # seeded by its place among the rules applied before it, not in the chain: a
            # variant's harness is then its harness's, rules' and seed's alone, whatever else
            # was drawn and found nothing to change (its id names one harness)
            rng = generator("rule", seed, len(self.applied), item.name)
            before = self.rewrite.harness
            # the rule gets a copy of what is recorded, in case it changes its parameters
            step = item.run(
                before,
                rng,
                copy_json(resolved),
                context_through(context, self.rewrite.mapping),
                strict=strict,
            )
            fields = _changed(before, step.harness)
            if step.mapping.is_identity and not fields:
                continue  # it found nothing to change here: not a rule of this variant
            self.rewrite = self.rewrite.then(step)
            self.applied.append((item.name, item.version, resolved))
            self.stages.append(self.rewrite)
            self.steps.append(_Step(position, before, step, fields))
        self.next = len(chain)

    def back_to(self, position: int) -> None:
        """Undo the rules applied from ``position`` of the chain on, to apply them again."""
        keep = sum(1 for s in self.steps if s.position < position)
        del self.applied[keep:], self.stages[keep:], self.steps[keep:]
        self.rewrite = self.stages[-1] if self.stages else Rewrite(self.harness)
        self.next = position


class HooksAlike(RuleError):
    """Rules made two hooks' messages read alike (``alike_hooks``): a conversation under the
    rewritten harness could not tell which of them fired. A draw of rules that does is no
    variant; the planner draws again."""

    def __init__(self, harness: Harness, *, where: str):
        i, j = _alike(harness) or (0, 0)
        first, second = harness.hooks[i].id, harness.hooks[j].id
        super().__init__(
            f"made every message hook {second!r} shows read as a message of hook {first!r} "
            "too: a conversation could not tell which of them fired",
            where=where,
        )


class PromptUnrendered(RuleError):
    """Rules made the system prompt of a harness whose prompt renders fail to render (a
    template that indexes ``sections``, of which a section rendered empty is left out, or
    that names a tool renamed): no row under the rewritten harness could be written. A draw
    of rules that does is no variant; the planner draws again (planning only: the prompt of
    a rule's rewrite is otherwise rendered where it is used)."""

    def __init__(self, harness: Harness, error: HsaError, *, where: str):
        why = str(error).rstrip(".")
        super().__init__(
            f"made the prompt of harness {harness.id!r} fail to render: {why}", where=where
        )


def _alike(harness: Harness) -> tuple[int, int] | None:
    """``alike_hooks`` of ``harness``'s hooks (cheap: a render and a match per pair)."""
    return alike_hooks(harness.hooks) if len(harness.hooks) > 1 else None


def _rule_at(applied: Sequence[tuple[str, str, Any]], index: int) -> str:
    """The rule ``applied[index]``, with those applied before it, for an error's ``where``."""
    before = [a[0] for a in applied[:index]]
    return f"rule {applied[index][0]!r}" + (f" (after {before})" if before else "")


def _lost(
    harness: Harness,
    rewrite: Rewrite,
    context: Context,
    fired: Set[str] | None = None,
    before: Rewrite | None = None,
) -> str | None:
    """Why ``rewrite`` loses what the trajectories use, or None: a tool they call (a skill
    they load, a hook that fires in them) that the mapping sends to a name the variant's
    harness lacks, a tool they call whose surface tool is another canonical tool's
    (``_tool_swapped``), or an argument of a tool they call that the mapping sends to a name
    the rewritten tool does not declare, or swaps with another (``_arguments_lost``; an enum
    value respelled into another value of its enum is each rule's own doing, read rule by
    rule: ``_enum_swaps``). Such a rewrite's mapping and harness disagree (a rule recorded a
    rename it did not make, or made one it did not record), and its rows would call tools
    their own harness does not offer, or call them wrongly. Without a context every tool and
    skill of the harness may be used: no rule that drops one ran (dropping needs to know what
    is used); without ``fired`` (the hooks that fire, which no context holds) every hook may
    fire. ``before``: the rewrite the last rule of ``rewrite`` was given, to tell a renamed
    tool it dropped from a rename recorded but not made."""
    mapping, after = rewrite.mapping, rewrite.harness
    known = harness.derived(_names_called)
    used_tools = known if context.used_tools is None else context.used_tools & known
    names = _tool_names(after)
    lost = [
        ("tool", name, mapping.tool_name(name))
        for name in sorted(used_tools)
        if mapping.tool_name(name) not in names
    ]
    if not lost and harness.skills:
        ids = {s.id for s in after.skills}
        skills = {s.id for s in harness.skills}
        used = skills if context.used_skills is None else context.used_skills & skills
        lost = [
            ("skill", name, mapping.skills.get(name, name))
            for name in sorted(used)
            if mapping.skills.get(name, name) not in ids
        ]
    if not lost and harness.hooks:
        ids = {h.id for h in after.hooks}
        hooks = {h.id for h in harness.hooks}
        may_fire = hooks if fired is None else hooks & fired
        lost = [
            ("hook", name, mapping.hooks.get(name, name))
            for name in sorted(may_fire)
            if mapping.hooks.get(name, name) not in ids
        ]
    if not lost:
        found = _tool_swapped(harness, rewrite, used_tools)
        found = found or _arguments_lost(harness, rewrite, used_tools)
        found = found or _loads_refused(harness, rewrite, context)
        return found or undeclared.clash(context.arguments, mapping)
    kind, name, new = lost[0]
    use, does = _USES[kind]
    if new == name:
        why = (
            f"the rewritten harness has no {kind} {name!r} and the mapping gives it no other "
            f"name: dropped while {use} it, or renamed without the rename in the mapping"
        )
    elif before is not None and _had(before.harness, kind, new):
        why = (
            f"the rewritten harness has no {kind} {new!r} (canonical {name!r}), which the "
            f"harness it was given had: dropped while {use} it, or renamed without the "
            "rename in the mapping"
        )
    else:
        why = (
            f"the mapping renames {kind} {name!r} to {new!r}, which the rewritten harness does "
            "not have: a rename recorded but not made"
        )
    return f"{why} (rows would {does} a {kind} their harness does not offer)"


#: per kind of what trajectories use: how they use it, and what their rows would do with it
_USES = {
    "tool": ("the trajectories' calls use", "call"),
    "skill": ("the trajectories' loads use", "load"),
    "hook": ("the trajectories may fire", "show the firing of"),
}


def _had(harness: Harness, kind: str, name: str) -> bool:
    """Whether ``harness`` has the tool (skill, hook) ``name``."""
    if kind == "tool":
        return name in _tool_names(harness)
    if kind == "hook":
        return harness.hook(name) is not None
    return any(s.id == name for s in harness.skills)


def _loads_refused(harness: Harness, rewrite: Rewrite, context: Context) -> str | None:
    """Why a skill the trajectories load would be loaded with an id the rewritten skill tool's
    ``enum`` does not hold (where the canonical one held the canonical id), or None: a skill
    renamed without its skill tool's enum."""
    after = rewrite.harness
    allowed = _skill_ids_taken(after)
    if allowed is None or after.skill_tool is None:
        return None
    taken = _skill_ids_taken(harness)
    skills = {s.id for s in harness.skills}
    used = skills if context.used_skills is None else context.used_skills & skills
    for name in sorted(used):
        new = rewrite.mapping.skills.get(name, name)
        if new not in allowed and (taken is None or name in taken):
            return (
                f"skill tool {after.skill_tool.name!r} does not take {new!r} (its enum: "
                f"{sorted(allowed)!r}), which the mapping makes of the canonical skill "
                f"{name!r}: a skill renamed without its skill tool's enum (rows would load it "
                "with a value the skill tool refuses)"
            )
    return None


def _skill_ids_taken(harness: Harness) -> set[str] | None:
    """The skill ids ``harness``'s skill tool's ``enum`` holds, or None where it has none."""
    arg = harness.skill_arg
    props = None if harness.skill_tool is None else harness.skill_tool.parameters.get("properties")
    node = props.get(arg) if isinstance(props, MappingABC) and arg is not None else None
    ids = node.get("enum") if isinstance(node, MappingABC) else None
    return {v for v in ids if isinstance(v, str)} if isinstance(ids, list) else None


def _tool_swapped(harness: Harness, rewrite: Rewrite, used: frozenset[str]) -> str | None:
    """Why a tool the trajectories call would reach another tool, or None: its surface tool
    (under the name the mapping gives it) has the description and parameters of another
    canonical tool, not its own (names swapped without the renames in the mapping)."""
    mapping, after = rewrite.mapping, rewrite.harness
    surface: dict[str, Tool] = {}
    for found in after.tools:
        surface.setdefault(found.name, found)
    for tool in harness.tools:
        new = surface.get(mapping.tool_name(tool.name)) if tool.name in used else None
        if new is None or new is tool:
            continue
        other = swapped_with(harness, tool, new)
        if other is not None:
            return (
                f"tool {new.name!r} (canonical {tool.name!r}) has the description and "
                f"parameters of canonical tool {other!r}, not its own: tools swapped without "
                "the renames in the mapping (rows would call a tool that does something else)"
            )
    return None


def swapped_with(harness: Harness, tool: Tool, new: Tool) -> str | None:
    """The canonical tool of ``harness`` other than ``tool`` whose description and parameters
    ``new`` (``tool``'s surface tool) has, where they are not ``tool``'s own, or None."""
    # (looked up by description first: most rewritten tools say what no other tool says)
    others = harness.derived(_tools_by_description).get(new.description, ())
    others = [other for other in others if other.name != tool.name]
    if not others or (new.description == tool.description and new.parameters == tool.parameters):
        return None
    return next((other.name for other in others if other.parameters == new.parameters), None)


def _tools_by_description(harness: Harness) -> dict[str, list[Tool]]:
    out: dict[str, list[Tool]] = {}
    for tool in harness.tools:
        out.setdefault(tool.description, []).append(tool)
    return out


def _arguments_lost(harness: Harness, rewrite: Rewrite, used: frozenset[str]) -> str | None:
    """Why the calls of a used tool would not fit its rewritten parameters, or None: a
    parameter of the canonical tool (a required one, which every call carries, or an optional
    or nested one) that the mapping's steps send to a path the rewritten tool does not
    declare (``_paths_lost``) or onto another canonical parameter the rewritten tool declares
    as it was (``_carried_lost``), a name an object of the rewritten tool requires that no
    canonical parameter becomes or one its calls may leave out (``_required_lost``), an enum
    value the steps make one the rewritten enum does not hold (``_enum_lost``), or a type or
    bound narrowed (``_type_lost``, ``_bound_lost``). Read only where both schemas declare
    their names plainly (``_plainly_named``), so the names say it all; elsewhere only a drop
    of a top-level name (``_top_dropped``)."""
    mapping, after = rewrite.mapping, rewrite.harness
    surface: dict[str, Tool] = {}
    for found in after.tools:
        surface.setdefault(found.name, found)
    for tool in harness.tools:
        if tool.name not in used:
            continue
        mapped = mapping.tools.get(tool.name)
        new = surface.get(mapping.tool_name(tool.name))
        if new is None or (new is tool and mapped is None):
            continue
        if not (tool.derived(_plainly_named) and new.derived(_plainly_named)):
            # a drop needs no walk of the schema: its top-level names are the calls' own
            why = _top_dropped(tool, new, mapped)
            if why:
                return why
            continue
        why = _paths_lost(tool, new, mapped) or _carried_lost(tool, new, mapped)
        if why:
            return why
        swapped = swapped_parameter(tool, new, mapped)
        if swapped is not None:
            path, end, other, whole = swapped
            verb, what = ("declare", "schemas") if whole else ("describe", "descriptions")
            return (
                f"tool {new.name!r} (canonical {tool.name!r}) {verb}s {_shown(end)!r}, which "
                f"the mapping makes of the canonical {_shown(path)!r}, as the canonical tool "
                f"{verb}d {_shown(other)!r}, not as it {verb}d {_shown(path)!r}: two "
                f"parameters' {what} swapped, names kept (rows would pass a value under "
                "another parameter's description)"
            )
        why = _required_lost(tool, new, mapped)
        why = why or _enum_lost(tool, new, mapped) or _type_lost(tool, new, mapped)
        why = why or _bound_lost(tool, new, mapped)
        if why:
            return why
    return None


def _required_lost(tool: Tool, new: Tool, mapped: ToolMap | None) -> str | None:
    """A name an object of ``new`` requires (the top-level one first, then nested ones, by
    path) that no parameter of ``tool`` becomes under ``mapped``'s steps (nor an object they
    ensure), or that one becomes which the canonical calls may leave out where they carry
    that object (an optional parameter made required: at the top, one not every call carries;
    inside an object, one not required where it came from, or moved out of another object),
    or None."""
    keys = _follow(tool.derived(_declared_paths), mapped, grow=True)
    carried = _follow(tool.derived(_always_paths), mapped, grow=True)
    for at, names in sorted(new.derived(_required_at).items(), key=lambda kv: (len(kv[0]), kv)):
        for name in names:
            path = (*at, name)
            if not _under(path, keys):
                return (
                    f"tool {new.name!r} (canonical {tool.name!r}) requires {_shown(path)!r}, "
                    "which no parameter of the canonical tool becomes under the mapping: a "
                    "parameter renamed or added without the step in the mapping (rows would "
                    "call it without an argument it requires)"
                )
            if not _under(path, carried) and not _kept_with(tool, mapped, at, path):
                return (
                    f"tool {new.name!r} (canonical {tool.name!r}) requires {_shown(path)!r}, "
                    "which the mapping makes of a parameter the canonical tool's calls may "
                    "leave out: an optional parameter made required (rows whose calls leave it "
                    "out would call the tool without an argument it requires)"
                )
    return None


def _under(path: tuple[str, ...], paths: Set[tuple[str, ...]]) -> bool:
    """Whether ``paths`` hold ``path`` or a path inside it."""
    n = len(path)
    return any(p[:n] == path for p in paths)


def _kept_with(
    tool: Tool, mapped: ToolMap | None, at: tuple[str, ...], path: tuple[str, ...]
) -> bool:
    """Whether ``path`` (inside the object at ``at`` of the rewritten tool) is what a
    parameter of ``tool`` becomes that its own object requires, that object becoming the one
    at ``at``: every call carrying the object carries it (a nested object renamed or moved
    whole keeps its ``required``). Never at the top (``at`` ``()``), where only what every
    call carries is."""
    if not at:
        return False
    for required in tool.derived(_required_paths):
        if at in _follow({required[:-1]}, mapped) and _under(path, _follow({required}, mapped)):
            return True
    return False


def _required_at(tool: Tool) -> dict[tuple[str, ...], tuple[str, ...]]:
    """The names each object of ``tool``'s parameters requires (and declares), by the
    object's argument path (``()`` the top), once per tool."""
    out: dict[tuple[str, ...], tuple[str, ...]] = {}
    schemas = [((), tool.parameters), *tool.derived(_schemas_at).items()]
    for at, schema in schemas:
        props = schema.get("properties") if isinstance(schema, MappingABC) else None
        names = schema.get("required") if isinstance(props, MappingABC) else None
        if isinstance(props, MappingABC) and isinstance(names, list):
            found = tuple(n for n in names if isinstance(n, str) and n in props)
            if found:
                out[at] = found
    return out


def _required_paths(tool: Tool) -> frozenset[tuple[str, ...]]:
    """The argument paths of ``tool`` that their own object requires (``_required_at``)."""
    return frozenset((*at, n) for at, names in tool.derived(_required_at).items() for n in names)


def _always_paths(tool: Tool) -> frozenset[tuple[str, ...]]:
    """The argument paths every valid call of ``tool`` carries: a required parameter, and a
    required property of an object every call carries, once per tool."""
    out: set[tuple[str, ...]] = set()
    schemas: list[tuple[tuple[str, ...], Any]] = [((), tool.parameters)]
    while schemas:
        at, schema = schemas.pop()
        props = schema.get("properties")
        for name in schema.get("required") or ():
            out.add((*at, name))
            sub = props.get(name) if isinstance(props, MappingABC) else None
            if isinstance(sub, MappingABC):
                schemas.append(((*at, name), sub))
    return frozenset(out)


def _type_lost(tool: Tool, new: Tool, mapped: ToolMap | None) -> str | None:
    """A parameter of ``tool`` whose place in ``new`` (where the steps put it) declares a
    ``type`` its canonical type does not fit in (``string`` made ``integer``), or an ``enum``
    where it had none: a call with a value the canonical schema took would break the
    rewritten one. An enum of the canonical tool is ``_enum_lost``'s to read (its values may
    be respelled into another type)."""
    before, after = tool.derived(_schemas_at), new.derived(_schemas_at)
    for path, schema in before.items():
        if not isinstance(schema, MappingABC) or "enum" in schema or "const" in schema:
            continue
        for end in sorted(_follow({path}, mapped)):
            now = after.get(end)
            if not isinstance(now, MappingABC) or now is schema:
                continue
            was, kind = schema.get("type"), now.get("type")
            if was is not None and kind is not None and was != kind and not _fits(was, kind):
                said = f"type {kind!r} where the canonical one is {was!r}"
            elif "enum" in now:
                said = "an enum where the canonical one had none"
            else:
                continue
            return (
                f"tool {new.name!r} (canonical {tool.name!r}) declares {_shown(end)!r}, which "
                f"the mapping makes of the canonical {_shown(path)!r}, with {said}: a "
                "parameter's type changed (rows would call the tool with a value it refuses)"
            )
    return None


#: keywords that bound a value from below, and from above: a bound moved outward only widens
_LOWER = ("minimum", "exclusiveMinimum", "minLength", "minItems", "minProperties")
_UPPER = ("maximum", "exclusiveMaximum", "maxLength", "maxItems", "maxProperties")
#: keywords that narrow a value otherwise: any change of one may refuse a value it took
_NARROWING = ("pattern", "format", "multipleOf", "const", "uniqueItems")
_BOUNDS = frozenset((*_LOWER, *_UPPER, *_NARROWING))


def _bound_lost(tool: Tool, new: Tool, mapped: ToolMap | None) -> str | None:
    """A parameter of ``tool`` whose place in ``new`` (where the steps put it) bounds its
    values where the canonical schema did not, or more narrowly (a ``minimum`` added or
    raised, a ``pattern`` added or changed), or None: a value a canonical call gave may break
    the rewritten schema. No built-in rule changes these keywords."""
    before, after = tool.derived(_schemas_at), new.derived(_schemas_at)
    for path, schema in before.items():
        if not isinstance(schema, MappingABC):
            continue
        for end in sorted(_follow({path}, mapped)):
            now = after.get(end)
            if not isinstance(now, MappingABC) or now is schema:
                continue
            found = _BOUNDS.intersection(now)
            for key in (*_LOWER, *_UPPER, *_NARROWING) if found else ():
                if key not in found or (key in schema and _same(now[key], schema[key])):
                    continue
                if key in schema and _wider(key, schema[key], now[key]):
                    continue
                was = repr(schema[key]) if key in schema else "none"
                return (
                    f"tool {new.name!r} (canonical {tool.name!r}) declares {_shown(end)!r}, "
                    f"which the mapping makes of the canonical {_shown(path)!r}, with {key} "
                    f"{now[key]!r} where the canonical one has {was}: a parameter's values "
                    "narrowed (rows would call the tool with a value it may refuse)"
                )
    return None


def _wider(key: str, was: Any, now: Any) -> bool:
    """Whether bound ``key`` at ``now`` takes every value it took at ``was``."""
    numbers = all(isinstance(v, int | float) and not isinstance(v, bool) for v in (was, now))
    if not numbers:
        return False
    if key in _LOWER:
        return now <= was
    return key in _UPPER and now >= was


def _type_names(kind: Any) -> set[str] | None:
    """The names a ``type`` keyword lists, or None where it is not one or a list of them."""
    names = kind if isinstance(kind, list) else [kind]
    return set(names) if all(isinstance(n, str) for n in names) else None


def _fits(was: Any, now: Any) -> bool:
    """Whether every value of JSON Schema ``type`` ``was`` is of ``type`` ``now`` (a type
    that is no name nor list of names fits only itself)."""
    old, new = _type_names(was), _type_names(now)
    if old is None or new is None:
        return was == now
    if "number" in new:
        new.add("integer")
    return old <= new


def _paths_lost(tool: Tool, new: Tool, mapped: ToolMap | None) -> str | None:
    """A parameter of ``tool`` (its required ones first, then optional and nested ones) that
    the steps drop (``_dropped``: a call that carries it would lose its value) or send to a
    path ``new`` does not declare (it would carry an argument the tool does not take), or
    None."""
    declared = new.derived(_declared_paths)
    required = set(tool.parameters.get("required") or ())
    for path in sorted(tool.derived(_declared_paths), key=lambda p: (p[0] not in required, p)):
        kind = "required parameter" if path[0] in required else "parameter"
        if _dropped(path, mapped):
            return _drop_said(tool, new, path, kind)
        for end in sorted(_follow({path}, mapped)):
            if end not in declared:
                return (
                    f"tool {new.name!r} (canonical {tool.name!r}) does not declare "
                    f"{_shown(end)!r}, which the mapping makes of its {kind} {_shown(path)!r}:"
                    " a parameter renamed or dropped without the step in the mapping (rows "
                    "whose calls carry it would call the tool with an argument it does not take)"
                )
    return None


def _top_dropped(tool: Tool, new: Tool, mapped: ToolMap | None) -> str | None:
    """A top-level parameter of ``tool`` (its required ones first) that the steps drop, or
    None: read from the names its parameters list (``properties`` and ``required``), so of a
    tool whose schema ``_plainly_named`` does not read too (``$ref``, combinators)."""
    params = tool.parameters
    props = params.get("properties")
    listed = params.get("required")
    required = {r for r in listed if isinstance(r, str)} if isinstance(listed, list) else set()
    names = required | (set(props) if isinstance(props, MappingABC) else set())
    for name in sorted(names, key=lambda n: (n not in required, n)):
        if _dropped((name,), mapped):
            kind = "required parameter" if name in required else "parameter"
            return _drop_said(tool, new, (name,), kind)
    return None


def _drop_said(tool: Tool, new: Tool, path: tuple[str, ...], kind: str) -> str:
    return (
        f"tool {new.name!r} (canonical {tool.name!r}): the mapping drops its {kind} "
        f"{_shown(path)!r}, a value the trajectories' calls give (rows whose calls carry it "
        "would lose it; a drop is the inverse of an add, for a value only the surface has)"
    )


def _dropped(path: tuple[str, ...], mapped: ToolMap | None) -> bool:
    """Whether ``mapped``'s steps drop the value at ``path`` (where it is on the way: a
    ``drop`` step at it or at an object holding it). A ``prune`` loses nothing: it removes an
    object only when it is empty, its values moved out."""
    paths: Set[tuple[str, ...]] = {path}
    for step in () if mapped is None else mapped.steps:
        n = len(step.path)
        if step.kind == "drop" and any(p[:n] == step.path for p in paths):
            return True
        if step.kind not in ("ensure", "prune"):
            paths = _step_paths(paths, step)
    return False


def _carried_lost(tool: Tool, new: Tool, mapped: ToolMap | None) -> str | None:
    """A parameter of ``tool`` that the steps move onto another canonical parameter which
    ``new`` declares with the schema ``tool`` gave it (a swap of two values: the value then
    reads under the other parameter's description), or None."""
    if mapped is None:
        return None
    # a value lands on a canonical parameter's place where a move's destination (or an object
    # on its way) is one: most moves (renames, wraps, flattens) make only new names
    declared = tool.derived(_declared_paths)
    targets = [s.dst for s in mapped.steps if s.kind == "move" and s.dst is not None]
    if not any(dst[:n] in declared for dst in targets for n in range(1, len(dst) + 1)):
        return None
    before, after = tool.derived(_schemas_at), new.derived(_schemas_at)
    for path in sorted(before):
        for end in sorted(_follow({path}, mapped)):
            if end == path:
                continue
            # the parameters where the paths part (a nested object moved whole is one move)
            k = next(
                n for n in range(max(len(end), len(path))) if end[n : n + 1] != path[n : n + 1]
            )
            there, came = end[: k + 1], path[: k + 1]
            kept = before.get(there)
            if kept is not None and after.get(there) == kept and before.get(came) != kept:
                return (
                    f"tool {new.name!r} (canonical {tool.name!r}) declares {_shown(there)!r} "
                    f"as the canonical tool did, and the mapping moves the canonical "
                    f"{_shown(came)!r} there: values swapped, not names (rows would pass a "
                    f"value under another parameter's description)"
                )
    return None


class Swap(NamedTuple):
    """A parameter of a tool (``path``) whose place in the rewritten tool (``end``) has the
    schema of another canonical parameter beside it (``other``), or only its description
    (``whole`` False)."""

    path: tuple[str, ...]
    end: tuple[str, ...]
    other: tuple[str, ...]
    whole: bool


def swapped_parameter(tool: Tool, new: Tool, mapped: ToolMap | None) -> Swap | None:
    """A parameter of ``tool`` whose place in ``new`` (where the steps send it) has the schema,
    description included, of another parameter of ``tool`` beside it, not its own: two
    parameters' schemas swapped with their names kept (``origin`` described as the airport the
    flight goes to), so a value reads under the other's description. Failing that, one whose
    place has another's description, not its own, where the schemas differ otherwise (two
    descriptions swapped). Parameters declared (described) alike are not told apart; read
    where both schemas declare their names plainly (``_plainly_named``)."""
    if new is tool or not (tool.derived(_plainly_named) and new.derived(_plainly_named)):
        return None
    before, after = tool.derived(_schemas_at), new.derived(_schemas_at)
    described = tool.derived(_paths_by_description)
    told: Swap | None = None
    for path, schema in before.items():
        for end in sorted(_follow({path}, mapped)):
            now = after.get(end)
            said = now.get("description") if isinstance(now, dict) else None
            if not isinstance(said, str) or now == schema:
                continue
            own = schema.get("description") if isinstance(schema, dict) else None
            for other in described.get((path[:-1], said), ()):
                if other != path and before[other] == now:
                    return Swap(path, end, other, True)
                if other != path and told is None and said and said != own:
                    told = Swap(path, end, other, False)
    return told


def _paths_by_description(tool: Tool) -> dict[tuple[Any, ...], list[tuple[str, ...]]]:
    """The argument paths of ``tool`` by their parent's path and their description."""
    out: dict[tuple[Any, ...], list[tuple[str, ...]]] = {}
    for path, schema in tool.derived(_schemas_at).items():
        said = schema.get("description") if isinstance(schema, dict) else None
        if isinstance(said, str):
            out.setdefault((path[:-1], said), []).append(path)
    return out


def _schemas_at(tool: Tool) -> dict[tuple[str, ...], Any]:
    """The sub-schema at each argument path ``tool``'s parameters declare, once per tool."""
    out: dict[tuple[str, ...], Any] = {}
    for r in reached(dict(tool.parameters)):
        if r.path:
            out.setdefault(r.path, r.node)
    return out


def _enum_lost(tool: Tool, new: Tool, mapped: ToolMap | None) -> str | None:
    """A value of an ``enum`` of ``tool`` that the steps (moves, respellings) make a value the
    ``enum`` of ``new`` at its path does not hold (a call with it would break the rewritten
    schema: an enum respelled without the step in the mapping), or None."""
    enums = new.derived(_enums_at)
    if not enums:
        return None
    held: dict[tuple[str, ...], set[tuple[bool, Any]]] = {}
    for path, values in tool.derived(_enums_at).items():
        for value in values:
            end, value = _value_end(path, value, mapped)
            allowed = None if end is None else enums.get(end)
            if end is None or allowed is None:
                continue
            if end not in held:
                held[end] = _keys(allowed)
            if not _holds(held[end], allowed, value):
                return (
                    f"tool {new.name!r} (canonical {tool.name!r}) does not take {value!r} at "
                    f"{_shown(end)!r} (its enum: {list(allowed)!r}), which the mapping makes of "
                    f"the canonical value at {_shown(path)!r}: an enum respelled without the "
                    "step in the mapping (rows would call the tool with a value it refuses)"
                )
    return None


def _enum_swaps(
    harness: Harness, steps: Sequence[_Step], stages: Sequence[Rewrite], context: Context
) -> list[str | None]:
    """For each rule of a chain that changed something (``steps``, the rewrite after each in
    ``stages``): why it respells a value of an ``enum`` of a tool the trajectories call into
    another value of that enum (``_enum_swapped``), or None. Each rule is read against the
    harness it was given, not the canonical one: rules that respell one after another
    (``tools.enum_values`` twice) each keep clear only of the spellings of the enum they are
    given, so a later one may take a spelling another canonical value had (``AA``, ``Aa``,
    ``aa`` made ``AA``, ``AA_2``, ``AA_3``, then ``aa``, ``aa_2``, ``aa_3``): a respelling
    the mapping records, not a swap. Cheap where a rule's mapping has no enum steps."""
    out: list[str | None] = [None] * len(steps)
    called: frozenset[str] | None = None  # (the canonical tools the trajectories call)
    for index, step in enumerate(steps):
        mapping = step.step.mapping
        respelled = {n for n, m in mapping.tools.items() if any(s.kind == "enum" for s in m.steps)}
        if not respelled:
            continue
        if called is None:
            known = harness.derived(_names_called)
            called = known if context.used_tools is None else context.used_tools & known
        # the tools called, by their names in the harness the rule was given
        before = stages[index - 1].mapping if index else None
        given = {n if before is None else before.tool_name(n): n for n in called}
        surface: dict[str, Tool] = {}
        for found in step.step.harness.tools:
            surface.setdefault(found.name, found)
        for tool in step.before.tools:
            canonical = given.get(tool.name) if tool.name in respelled else None
            new = None if canonical is None else surface.get(mapping.tool_name(tool.name))
            if canonical is None or new is None:
                continue
            out[index] = _enum_swapped(tool, new, mapping.tools[tool.name], canonical, not index)
            if out[index]:
                break
    return out


def _enum_swapped(
    tool: Tool, new: Tool, mapped: ToolMap, canonical_name: str, first: bool
) -> str | None:
    """A value of an ``enum`` of ``tool`` that the steps respell into another value of the
    same ``enum`` (a call with it would say something else: ``damaged`` sent as
    ``wrong_size``), or into another value in another style (``WRONG_SIZE``: a swap hidden
    by a change of case, ``restyled_into``), or None. Read through ``$ref``s and combinators
    too: only ``tool``'s enum and the steps matter. ``canonical_name``: ``tool``'s canonical
    name; ``first``: whether the steps are the first rule's (``tool`` and its enum are then
    the canonical ones)."""
    for path, values in tool.derived(_enums_at).items():
        own: set[tuple[bool, Any]] | None = None  # (made when a value is respelled)
        for was in values:
            end, value = _value_end(path, was, mapped)
            if end is None or _same(value, was):
                continue
            own = _keys(values) if own is None else own
            other = value if _holds(own, values, value) else None
            if other is None and isinstance(value, str) and isinstance(was, str):
                other = restyled_into(was, value, values)
            if other is not None:
                of = f"the canonical {was!r}" if first else f"{was!r}"
                enum = "enum" if first else "enum the rule was given"
                styled = "" if other == value else f" ({other!r}) in another style"
                return (
                    f"tool {new.name!r} (canonical {canonical_name!r}) gets {value!r} at "
                    f"{_shown(end)!r} for {of}, another value of the {enum} at "
                    f"{_shown(path)!r}{styled}: an enum respelled into its own values (rows "
                    "would call the tool with a value that says something else)"
                )
    return None


def _enums_at(tool: Tool) -> dict[tuple[str, ...], tuple[Any, ...]]:
    """The ``enum`` of each argument path of ``tool`` that declares one, once per tool."""
    return {
        r.path: tuple(r.node["enum"])
        for r in reached(dict(tool.parameters))
        if r.path and isinstance(r.node.get("enum"), list)
    }


def _value_end(
    path: tuple[str, ...], value: Any, mapped: ToolMap | None
) -> tuple[tuple[str, ...] | None, Any]:
    """Where a value at ``path`` ends under ``mapped``'s steps (``_step_paths``: None when
    dropped), and what it becomes there (respelled as the engine respells it)."""
    at: tuple[str, ...] | None = path
    for step in () if mapped is None else mapped.steps:
        if at is None:
            break
        if step.kind == "enum" and step.path == at:
            value = respelled(step.values, value)
        elif step.kind != "ensure":  # (an object made: no value moves)
            ends = _step_paths({at}, step)
            at = next(iter(ends)) if ends else None
    return at, value


def _same(a: Any, b: Any) -> bool:
    """JSON equality: ``1 == 1.0``, but ``True`` is not ``1``."""
    return a == b and isinstance(a, bool) == isinstance(b, bool)


#: the values ``_keys`` indexes: hashed as ``_same`` compares them
_KEYED = frozenset((str, int, float, bool, type(None)))


def _keys(values: tuple[Any, ...]) -> set[tuple[bool, Any]]:
    """The scalars of ``values`` as ``_holds`` looks them up: ``1`` and ``1.0`` hash alike,
    and ``True`` is told from ``1`` by the flag beside it."""
    return {(type(v) is bool, v) for v in values if type(v) in _KEYED and v == v}


def _holds(keys: set[tuple[bool, Any]], values: tuple[Any, ...], value: Any) -> bool:
    """Whether ``values`` (of which ``keys`` are ``_keys``) hold one ``_same`` as ``value``:
    a scalar by its key (a scalar is the same as no object or array, nor NaN as anything),
    the rest one by one (an enum of thousands of values is checked value by value)."""
    if type(value) in _KEYED:
        return value == value and (type(value) is bool, value) in keys
    return any(_same(value, v) for v in values)


def _shown(path: tuple[str, ...]) -> str:
    return ".".join(path)


#: schema keywords under which names are declared other than by ``properties``
_INDIRECT = ("$ref", "$defs", "definitions", "allOf", "anyOf", "oneOf", "if", "patternProperties")


def _plainly_named(tool: Tool) -> bool:
    """Whether ``tool``'s parameters declare every name by ``properties`` alone (no keyword of
    ``_INDIRECT`` anywhere in the tool, descriptions included: a false "no" only leaves the
    tool unread), so ``_declared_paths`` are the paths calls may take."""
    params = tool.parameters
    if not isinstance(params.get("properties"), MappingABC):
        return False
    if not all(isinstance(r, str) for r in params.get("required") or ()):
        return False
    text = tool.to_json()
    return not any(f'"{key}"' in text for key in _INDIRECT)


def _declared_paths(tool: Tool) -> frozenset[tuple[str, ...]]:
    """The argument paths ``tool``'s parameters declare (``EACH`` for an array's items),
    nested ones included, once per tool object (the paths of ``_schemas_at``: one walk of the
    schema for both)."""
    return frozenset(tool.derived(_schemas_at))


def _step_paths(paths: Set[tuple[str, ...]], step: Step) -> Set[tuple[str, ...]]:
    """``paths`` after ``step``: moved, ensured, dropped, or pruned when nothing is left in
    it."""
    n = len(step.path)
    if step.kind == "move" and step.dst is not None:
        return {step.dst + p[n:] if p[:n] == step.path else p for p in paths}
    if step.kind == "ensure":  # (an "add" is the surface's alone: calls do not carry it)
        return paths | {step.path}
    if step.kind == "drop":
        return {p for p in paths if p[:n] != step.path}
    if step.kind == "prune" and not any(len(p) > n and p[:n] == step.path for p in paths):
        return paths - {step.path}
    return paths


def _follow(
    paths: Set[tuple[str, ...]], mapped: ToolMap | None, *, grow: bool = False
) -> Set[tuple[str, ...]]:
    """Where the values at ``paths`` end up under ``mapped``'s steps (moved, dropped, or
    pruned when nothing is left in them); ``grow``: with the objects steps ensure, and where
    later steps move them (a wrapper object made, then renamed)."""
    for step in () if mapped is None else mapped.steps:
        if grow or step.kind != "ensure":
            paths = _step_paths(paths, step)
    return paths


def _tool_names(harness: Harness) -> frozenset[str]:
    """The names of ``harness``'s tools, the skill tool's included (``Harness.tool``)."""
    return harness.derived(_names_of_tools)


def _names_called(harness: Harness) -> frozenset[str]:
    """The names calls may name: its tools' (skill loads are not calls)."""
    return frozenset(t.name for t in harness.tools)


def _names_of_tools(harness: Harness) -> frozenset[str]:
    skill_tool = [] if harness.skill_tool is None else [harness.skill_tool.name]
    return frozenset([t.name for t in harness.tools] + skill_tool)


#: the fields that make a harness what it is (its cache of derived values aside)
_HARNESS_FIELDS = tuple(f.name for f in dataclasses.fields(Harness) if f.compare)


def _changed(before: Harness, after: Harness) -> tuple[str, ...]:
    """The fields in which ``after`` is not ``before`` as it was (none: the same object, or
    equal field by field: a rule with nothing to change often rebuilds the harness from the
    same parts). Cheaper than comparing the JSON documents: parts a rule left alone are the
    same objects."""
    if after is before:
        return ()
    return tuple(
        name
        for name in _HARNESS_FIELDS
        if (a := getattr(after, name)) is not (b := getattr(before, name)) and a != b
    )


def _unshown_steps(harness: Harness, steps: Sequence[_Step]) -> list[int]:
    """The positions of the ``steps`` whose changes no row under ``harness`` (the chain's
    result) can show, whatever its trajectory does: what a step itself changed is in parts of
    ``harness`` no row shows (``_Shows``). A step whose changes a later one overwrites (a
    ``protocol.switch`` then a ``protocol.doc_format``) is not among them. The rules after a
    step left out are applied again without it and judged again (``_apply_resolved``): they
    may read the parts it changed (``tools.rename_params`` draws otherwise with distractor
    skills present, ``prompt.section_titles`` draws titles in section order), so the variant
    is the chain without it, not the chain's result less its changes. Decided without
    rendering, by exact rules of what the prompt shows; a change they cannot rule out counts
    as shown. A change to tools a later step drops shows nothing (``tools.add_optional`` on
    tools ``tools.drop_unused`` then drops): no row calls them (``_lost``)."""
    return [s.position for k, s in enumerate(steps) if not _shows_step(s, steps[k + 1 :], harness)]


def _shows_step(step: _Step, later: Sequence[_Step], harness: Harness) -> bool:
    """Whether a row under ``harness`` can show what ``step`` changed; ``later``: the steps
    after it, which say what each tool it changed is called in ``harness``, if it is there."""
    mapping = step.step.mapping
    if any(
        (t.name != k or t.steps) and _final_tool(t.name, later, harness) is not None
        for k, t in mapping.tools.items()
    ):
        return True  # a tool renamed, or its arguments rewritten, that the variant still has
    if not all(k == v for k, v in mapping.hooks.items()):
        return True
    if harness.skill_tool is not None and not all(k == v for k, v in mapping.skills.items()):
        return True  # a load names the skill (without a skill tool no row loads one)
    before, after = step.before, step.step.harness
    for name in step.fields:
        if name == "metadata":
            continue  # importer lineage, which no row shows
        if name == "protocol":  # (under ``api`` the text protocols' fields show nothing)
            if before.protocol.to_dict() != after.protocol.to_dict():
                return True
        elif name == "skills":
            if _skills_view(before, harness) != _skills_view(after, harness):
                return True
        elif name == "prompt":
            shows = _shows_of_step(before, after, harness)
            if _prompt_view(before, shows) != _prompt_view(after, shows):
                return True
        elif name == "tools":
            if _shows_tools(step, later, harness):
                return True
        else:  # the skill tool, hooks (any may fire), the id and version
            return True
    return False


def _final_tool(name: str, later: Sequence[_Step], harness: Harness) -> str | None:
    """The name in ``harness`` (the chain's result) of the tool called ``name`` before the
    ``later`` steps, each renaming it by its own mapping; None where ``harness`` has no tool
    of that name (a later step dropped it)."""
    for step in later:
        name = step.step.mapping.tool_name(name)
    return name if name in _tool_names(harness) else None


def _shows_tools(step: _Step, later: Sequence[_Step], harness: Harness) -> bool:
    """Whether a row under ``harness`` can show what ``step`` did to the tools: it removed
    one (a rename its mapping records is no removal), or the tools that ``harness`` still has
    (``_final_tool``) are not, in order, as they were before it (one added, changed, renamed
    or moved). A change only to tools a later step drops shows nothing."""
    mapping = step.step.mapping
    after = step.step.harness.tools
    kept = {t.name for t in after}
    if any(mapping.tool_name(t.name) not in kept for t in step.before.tools):
        return True
    # each tool under its name in ``harness``, before the step and after it
    was = [(_final_tool(mapping.tool_name(t.name), later, harness), t) for t in step.before.tools]
    now = [(_final_tool(t.name, later, harness), t) for t in after]
    return [p for p in was if p[0] is not None] != [p for p in now if p[0] is not None]


class _Shows(NamedTuple):
    """What of a harness's prompt its rows may show: the ids of the sections whose bodies may
    render (``_renders``), whether their headings show titles (not under ``xml``), whether one
    of them has a title, whether the prompt may be non-empty, and whether it may show skills
    (the catalogue in a ``skills`` section, or a body or template naming ``skills``)."""

    rendered: frozenset[str]
    titles: bool
    titled: bool
    prompt: bool
    skills: bool


def _shows(harness: Harness) -> _Shows:
    """``_Shows`` of ``harness`` (once per harness: ``Harness.derived``)."""
    prompt = harness.prompt
    shown = [s for s in prompt.sections if _renders(s, harness)]
    template = prompt.template or ""
    return _Shows(
        rendered=frozenset(s.id for s in shown),
        titles=prompt.heading_style != "xml",
        titled=any(s.title for s in shown),
        prompt=bool(shown) or bool(template),
        skills=any((s.kind == "skills" and not s.body) or "skills" in s.body for s in shown)
        or "skills" in template,
    )


def _shows_of_step(before: Harness, after: Harness, harness: Harness) -> _Shows:
    """``_Shows`` of ``harness`` (the chain's result) for a step from ``before`` to ``after``:
    with the sections the step deleted, where they would render in ``harness`` (a section
    deleted shows by its absence; ``harness`` lacks it, so its own ``_Shows`` never holds
    it)."""
    shows = harness.derived(_shows)
    kept = {s.id for s in (*after.prompt.sections, *harness.prompt.sections)}
    gone = {s.id for s in before.prompt.sections if s.id not in kept and _renders(s, harness)}
    return shows._replace(rendered=shows.rendered | gone) if gone else shows


def _renders(section: Section, harness: Harness) -> bool:
    """Whether ``section`` of ``harness`` may render a body (``hsa.harness.prompt``: a section
    whose body renders empty is left out, heading and all). No only where that is certain: a
    blank body (kept only when verbatim), an empty body of no generated kind, or of a kind
    whose generated text is empty (tool docs and call instructions under ``api``, the
    catalogue of no skills)."""
    if section.body:
        return section.verbatim or bool(section.body.strip())
    if section.kind == "skills":
        return bool(harness.skills)
    if section.kind in ("tools", "output_format"):
        return not harness.protocol.is_api
    return False


def _prompt_view(harness: Harness, shows: _Shows) -> tuple[Any, ...]:
    """What rows under a harness that shows ``shows`` show of ``harness``'s prompt: the
    sections that render there (titles under headings that show them), in order, how they are
    headed (Markdown and plain alike where none has a title), the template, and where the
    prompt goes, unless it is empty."""
    prompt = harness.prompt
    sections = tuple(
        (s.id, s.kind, s.body, s.verbatim, s.title if shows.titles else None)
        for s in prompt.sections
        if s.id in shows.rendered
    )
    style: str | None = prompt.heading_style
    if not sections:
        style = None
    elif style != "xml" and not shows.titled:
        style = "untitled"
    return (sections, style, prompt.template, prompt.placement if shows.prompt else None)


def _skills_view(harness: Harness, final: Harness) -> Any:
    """What rows under ``final`` show of ``harness``'s skills: all of each where its prompt
    may show them, their contents by id where only its skill tool loads them, none where
    neither."""
    if final.derived(_shows).skills:
        return [s.to_dict() for s in harness.skills]
    if final.skill_tool is not None:
        return {s.id: s.content for s in harness.skills}
    return None


def content_key(harness: Harness, mapping: RewriteMapping) -> bytes:
    """A digest of what a variant is (its harness and mapping as JSON): two variants with the
    same key render every row the same. The JSON is not kept on the harness."""
    return _digest(harness.to_json(keep=False), mapping.to_json())


def _digest(harness_json: str, mapping_json: str) -> bytes:
    """``content_key`` from the two JSON texts."""
    text = f"{harness_json}\0{mapping_json}"  # JSON holds no raw NUL
    return hashlib.sha256(text.encode("utf-8")).digest()


class Sight(NamedTuple):
    """What of a harness a trajectory's rows can show besides its prompt and tools: the skills
    it loads and the hooks that fire in it (canonical ids, sorted)."""

    skills: tuple[str, ...] = ()
    hooks: tuple[str, ...] = ()

    @classmethod
    def of(cls, events: Sequence[Event]) -> Sight:
        skills = {e.skill_id for e in events if isinstance(e, SkillLoad)}
        hooks = {e.hook_id for e in events if isinstance(e, HookFired)}
        return cls(tuple(sorted(skills)), tuple(sorted(hooks)))


#: a trajectory that loads no skill and fires no hook
NO_SIGHT = Sight()


def shown_key(
    harness: Harness,
    mapping: RewriteMapping,
    sight: Sight = NO_SIGHT,
    *,
    source: Harness | None = None,
    steps: bool = True,
) -> bytes:
    """A digest of what the rows of a trajectory with ``sight`` show of a variant (its
    ``harness`` and ``mapping``): the system prompt as rendered and where it goes, the
    protocol, the tools a request sends, how each tool and its arguments are renamed, and the
    skills the trajectory loads and hooks that fire in it as the variant has them. Two
    variants with the same key render its rows the same, so a rewrite of what they never show
    (the body of a skill never loaded, a hook that never fires, the sections of a prompt that
    renders empty, a tool a later rule dropped) is no change for it. ``source`` is the
    harness the variant was rewritten from: what its argument steps do is judged on arguments
    drawn from its tools (without it, by the steps as they are). ``steps=False`` leaves out
    what argument steps do (the tools' surface names kept): a cheaper key that equal keys
    also have. A prompt that does not render gives the whole ``content_key``: it fails where
    the variant is rendered."""
    try:
        prompt = system_prompt(harness)
    except HsaError:
        return content_key(harness, mapping)
    skills = {}
    for canonical in sight.skills:
        surface = mapping.skills.get(canonical, canonical)
        skill = harness.skill(surface)
        skills[canonical] = [surface, None if skill is None else skill.content]
    hooks = {}
    for canonical in sight.hooks:
        surface = mapping.hooks.get(canonical, canonical)
        hook = harness.hook(surface)
        hooks[canonical] = [surface, None if hook is None else hook.to_dict()]
    # a load shows the skill tool's name and the parameter naming the skill (the first one:
    # the order of its properties counts, which sorted JSON would lose)
    loader = harness.skill_tool if sight.skills else None
    # a mapping entry shows nothing when it maps a tool to itself, or maps it to a tool the
    # variant does not have (rewritten, then dropped by a later rule): no row calls that
    # tool, or planning would have refused the variant (``_lost``)
    tools = _tool_names(harness)
    shown = [
        harness.prompt.placement if prompt else None,
        harness.protocol.to_dict(),
        {
            name: _shown_map(source, name, found) if steps else found.name
            for name, found in mapping.tools.items()
            if (found.name != name or found.steps) and found.name in tools
        },
        skills,
        None if loader is None else [loader.name, harness.skill_arg],
        hooks,
    ]
    text = json.dumps(shown, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    parts = (prompt, harness.derived(tools_json), text)  # none holds a raw NUL
    return hashlib.sha256("\0".join(parts).encode("utf-8")).digest()


def _shown_map(source: Harness | None, canonical: str, mapped: ToolMap) -> list[Any]:
    """What calls show of how ``mapped`` maps canonical tool ``canonical``: its surface name
    and what its steps do to arguments, as witnesses (``_witnesses``) come out of them, so two
    step lists with one effect (a rename after a flatten, or one rename to the same name)
    show alike; the steps as they are where the canonical tool's arguments cannot be drawn
    (names declared other than by ``properties``, long enums)."""
    if not mapped.steps:
        return [mapped.name]
    tool = None if source is None else source.tool(canonical)
    witnesses = None if tool is None else tool.derived(_witnesses)
    if witnesses is None:
        return [mapped.name, [step.to_dict() for step in mapped.steps]]
    shown = [json.dumps(apply_steps(w, mapped.steps), ensure_ascii=False) for w in witnesses]
    return [mapped.name, shown]  # (each in its own key order: the order calls show)


_WITNESS_TURNS = 16  # enums longer than this are not drawn in turn: the steps are kept


def _witnesses(tool: Tool) -> tuple[dict[str, Any], ...] | None:
    """Arguments that tell apart what steps do to ``tool``'s calls: none, the required ones
    only, and every declared one, each leaf a value of its own (an enum's values in turn, one
    witness each); None where they cannot be drawn (``_plainly_named`` fails, or an enum is
    longer than ``_WITNESS_TURNS``)."""
    if not _plainly_named(tool):
        return None
    turns = _longest_enum(tool.parameters)
    if turns > _WITNESS_TURNS:
        return None
    required = _witness(tool.parameters, (), 0, required_only=True)
    drawn = [_witness(tool.parameters, (), k, required_only=False) for k in range(max(turns, 1))]
    return ({}, required, *drawn)


def _witness(schema: Any, path: tuple[str, ...], turn: int, *, required_only: bool) -> Any:
    if not isinstance(schema, MappingABC):
        return "\0" + "/".join(path)
    props = schema.get("properties")
    if isinstance(props, MappingABC):
        required = set(schema.get("required") or ())
        return {
            name: _witness(sub, (*path, name), turn, required_only=required_only)
            for name, sub in props.items()
            if not required_only or name in required
        }
    if isinstance(schema.get("items"), MappingABC):
        return [_witness(schema["items"], (*path, EACH), turn, required_only=required_only)]
    enum = schema.get("enum")
    if isinstance(enum, list) and enum:
        return enum[turn % len(enum)]
    return "\0" + "/".join(path)  # a value no other leaf has


def _longest_enum(schema: Any) -> int:
    """The length of the longest ``enum`` in ``schema``."""
    if isinstance(schema, MappingABC):
        enum = schema.get("enum")
        here = len(enum) if isinstance(enum, list) else 0
        return max([here, *(_longest_enum(v) for v in schema.values())])
    if isinstance(schema, list):
        return max([0, *(_longest_enum(v) for v in schema)])
    return 0


def variant_id(
    harness: Harness, rules: Sequence[tuple[str, str, MappingABC[str, Any]]], seed: int, ctx: Any
) -> str:
    key = {
        "harness": [harness.id, harness.version],
        "rules": [[n, v, dict(p)] for n, v, p in rules],
        "seed": seed,
        "context": ctx,
    }
    text = json.dumps(key, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def canonical_variant(harness: Harness) -> Variant:
    """The unchanged harness as a variant (no rules, identity mapping)."""
    return Variant(variant_id(harness, (), 0, None), harness.id, (), harness, RewriteMapping())


def _draw(recipe: Recipe, rng, eligible: set[str]) -> list[RecipeRule]:
    # Every rule gets its draw, eligible or not, so a context never shifts the other draws.
    drawn = [i for i, r in enumerate(recipe.rules) if rng.random() < r.probability]
    chosen = [i for i in drawn if recipe.rules[i].rule in eligible]
    pool = [
        i
        for i, r in enumerate(recipe.rules)
        if i not in chosen and r.rule in eligible and r.probability > 0
    ]
    while len(chosen) < recipe.min_rules and pool:
        extra = rng.choices(pool, weights=[recipe.rules[i].probability for i in pool])[0]
        pool.remove(extra)
        chosen.append(extra)
    if recipe.max_rules is not None and len(chosen) > recipe.max_rules:
        chosen = rng.sample(chosen, recipe.max_rules)
    return [recipe.rules[i] for i in sorted(chosen)]


def plan(
    harness: Harness,
    recipe: Recipe,
    *,
    seed: int | None = None,
    context: Context = NO_CONTEXT,
) -> list[Variant]:
    """The variants of ``harness`` under ``recipe`` (``seed`` defaults to the recipe's).

    Returns ``recipe.variants_per_harness`` variants, preceded by the canonical one when
    ``recipe.include_canonical``. Each after the canonical one is ``plan_variant(..., index)``
    (``index`` counted from 0 after it): planned on its own, so
    planning a few of them (what the augment job does, ``LazyPlan``) gives the same variants as
    planning all. Rules whose ``needs`` the context does not provide are not applied (plan
    with ``context=Context.of(events)`` to include them). ``PlanError`` where no variant
    changes the harness because every draw that did broke its prompt (``plan_variant``).
    """
    lazy = LazyPlan(harness, recipe, seed=seed, context=context)
    out = [lazy.variant(index) for index in range(recipe.variants_per_harness)]
    if all(v.key() == lazy.unchanged for v in out):
        _refuse_unrendered(harness, out)
    return [canonical_variant(harness), *out] if recipe.include_canonical else out


def _refuse_unrendered(harness: Harness, variants: Iterable[Variant]) -> None:
    """Refuse the plan ``variants`` of ``harness``, none of which changes it, where draws were
    dropped for breaking its prompt (``PromptUnrendered``): every draw that changed it did,
    so the recipe gives the harness no variant, and a job would write no row of it but the
    canonical one, saying nothing."""
    dropped = [why for variant in variants for why in variant.dropped]
    if dropped:
        raise PlanError(
            f"{dropped[0]}; every draw of rules that changed it did ({len(dropped)} dropped), "
            "so the recipe gives it no variant: leave the rule out of the recipe, or write the "
            "template so that it renders under it",
            harness_id=harness.id,
        )


def plan_variant(
    harness: Harness,
    recipe: Recipe,
    index: int,
    *,
    seed: int | None = None,
    context: Context = NO_CONTEXT,
) -> Variant:
    """Variant ``index`` of ``harness`` under ``recipe``, independent of the other variants.

    A draw whose rewrite changes nothing a row can show is drawn again (up to a few times;
    the last draw is kept, and the picker passes over it); so is one that makes two hooks'
    messages read alike (``HooksAlike``) or the harness's prompt fail to render
    (``PromptUnrendered``, listed in ``Variant.dropped``), kept at the last as the harness
    unchanged. Two variants may still be equal; the picker never gives one trajectory both.
    """
    return LazyPlan(harness, recipe, seed=seed, context=context).variant(index)


class LazyPlan:
    """The variants of one harness under one recipe, seed and context, each planned the first
    time it is asked for (``variant``). ``content(index)`` numbers the distinct rewrites: -1
    for a rewrite that changes nothing, otherwise the same number for equal rewrites;
    ``shown(index, sight)`` does the same for what the rows of a trajectory show of them."""

    def __init__(
        self,
        harness: Harness,
        recipe: Recipe,
        *,
        seed: int | None = None,
        context: Context = NO_CONTEXT,
        given: Sequence[Variant] | None = None,
    ):
        """``given`` variants, when given, are the plan (nothing is planned)."""
        _check_arguments(recipe, harness)
        self.harness, self.recipe, self.context = harness, recipe, context
        self.seed = recipe.seed if seed is None else _checked_seed(seed)
        self.rules = {r.rule: get(r.rule) for r in recipe.base + recipe.rules}
        self.unchanged = content_key(harness, RewriteMapping())
        self.variants: dict[int, Variant] = dict(enumerate(given or ()))
        self.given = given is not None
        self.width = len(self.variants) if given is not None else recipe.variants_per_harness
        self._content: dict[int, int] = {}
        self._keys: dict[bytes, int] = {}
        self._shown: dict[tuple[int, Sight], int] = {}
        # rewrites alike but for their argument steps, by shown_key without steps (each
        # _alike bucket belongs to one sight: the key holds what the sight shows)
        self._alike: dict[bytes, list[_Shown]] = {}
        self._plain: set[Sight] = set()  # the sights the unchanged harness is in _alike for
        self._classes = 0
        self._slots: _Slots | None = None  # made on the first variant planned here

    def variant(self, index: int) -> Variant:
        found = self.variants.get(index)
        if found is None:
            if self._slots is None:
                self._slots = _Slots(self.spec())
            found = self._slots.plan([index], unchanged=self.unchanged)[0]
            self.variants[index] = found
        return found

    def spec(self) -> PlanSpec:
        """What planning a variant needs, as one picklable value (for ``plan_slots`` in
        another process)."""
        return PlanSpec(self.harness, self.recipe, self.seed, self.context, self.rules)

    def fill(self, index: int, variant: Variant) -> None:
        """Take variant ``index`` planned elsewhere (``plan_slots`` with ``spec()``)."""
        self.variants.setdefault(index, variant)

    def content(self, index: int) -> int:
        if index not in self._content:
            key = self.variant(index).key()
            self._content[index] = (
                -1 if key == self.unchanged else self._keys.setdefault(key, len(self._keys))
            )
            if not self._keys and len(self._content) == self.width:
                _refuse_unrendered(self.harness, list(self.variants.values()))
        return self._content[index]

    def shown(self, index: int, sight: Sight) -> int:
        """``content`` as the rows of a trajectory with ``sight`` show it (``shown_key``): -1
        for a rewrite they would show as the unchanged harness.

        Rewrites are told apart by ``shown_key(..., steps=False)`` first, which leaves out
        what argument steps do; only rewrites alike in all else (and the unchanged harness,
        when alike) are told apart by the whole ``shown_key``, which runs the steps."""
        found = self._shown.get((index, sight))
        if found is None:
            found = -1 if self.content(index) < 0 else self._class(index, sight)
            self._shown[index, sight] = found
        return found

    def _class(self, index: int, sight: Sight) -> int:
        if sight not in self._plain:  # the unchanged harness, as class -1
            self._plain.add(sight)
            plain = _Shown(self.harness, RewriteMapping(), self.harness, -1)
            self._alike.setdefault(plain.key(sight, steps=False), []).append(plain)
        variant = self.variant(index)
        mine = _Shown(variant.harness, variant.mapping, self.harness, self._classes)
        alike = self._alike.setdefault(mine.key(sight, steps=False), [])
        for other in alike:
            if other.key(sight) == mine.key(sight):
                return other.number
        self._classes += 1
        alike.append(mine)
        return mine.number


@dataclass(slots=True)
class _Shown:
    """A rewrite (or the unchanged harness) of ``source`` and the number of its class, with
    its whole ``shown_key`` once made."""

    harness: Harness
    mapping: RewriteMapping
    source: Harness  # the harness it was rewritten from
    number: int
    whole: bytes = b""

    def key(self, sight: Sight, *, steps: bool = True) -> bytes:
        if not steps:
            return shown_key(self.harness, self.mapping, sight, steps=False)
        if not self.whole:
            self.whole = shown_key(self.harness, self.mapping, sight, source=self.source)
        return self.whole


@dataclass(frozen=True, slots=True)
class PlanSpec:
    """A harness, recipe, seed and context to plan variants of, with the recipe's rules."""

    harness: Harness
    recipe: Recipe
    seed: int
    context: Context
    rules: MappingABC[str, Rule]

    def portable(self) -> bool:
        """Whether another process gets the same rules back by importing the modules that
        define them (see ``__reduce__``): rules defined at a module's top level, not in
        ``__main__`` nor inside a function."""
        for found in self.rules.values():
            module = sys.modules.get(found.fn.__module__)
            name = found.fn.__qualname__
            if module is None or module.__name__ == "__main__" or "." in name:
                return False
            if getattr(module, name, None) not in (found, found.fn):
                return False
        return True

    def __reduce__(self) -> tuple[Any, ...]:
        # rules travel by name and module (functions a decorator replaced cannot be pickled)
        modules = {name: r.fn.__module__ for name, r in self.rules.items()}
        return (_spec, (self.harness, self.recipe, self.seed, self.context, modules))


def _spec(
    harness: Harness, recipe: Recipe, seed: int, context: Context, modules: dict[str, str]
) -> PlanSpec:
    """A ``PlanSpec`` in another process: each rule's module imported (which registers it),
    then the rule got by name."""
    for module in sorted(set(modules.values())):
        importlib.import_module(module)
    return PlanSpec(harness, recipe, seed, context, {name: get(name) for name in modules})


def plan_slots(
    spec: PlanSpec, indexes: Sequence[int], *, unchanged: bytes | None = None, keep: bool = False
) -> list[Variant]:
    """Variants ``indexes`` of ``spec`` (each on its own: see ``plan_variant``). ``unchanged``:
    the content key of ``spec.harness`` as it is, when the caller has it already (it is the
    whole harness as JSON, hashed). ``keep``: keep each variant harness's JSON on it."""
    return _Slots(spec).plan(indexes, unchanged=unchanged, keep=keep)


class _Slots:
    """What planning any variant of ``spec`` starts from, made once for all of them: the
    rules that may be drawn (``eligible``) and each recipe rule's parameters, resolved when
    first drawn."""

    def __init__(self, spec: PlanSpec):
        harness, context, rules = spec.harness, spec.context, spec.rules
        self.spec = spec
        self.eligible = {n for n, r in rules.items() if all(context.has(k) for k in r.needs)}
        self.eligible -= _never_shown(harness, rules)
        self.resolved: dict[int, tuple[Rule, dict[str, Any]]] = {}

    def resolve(self, item: RecipeRule) -> tuple[Rule, dict[str, Any]]:
        # keyed by the recipe rule's id: the recipe (which holds it) lives as long as spec
        found = self.resolved.get(id(item))
        if found is None:
            rule = self.spec.rules[item.rule]
            found = self.resolved[id(item)] = (rule, rule.resolve_params(item.params))
        return found

    def plan(
        self, indexes: Sequence[int], *, unchanged: bytes | None = None, keep: bool = False
    ) -> list[Variant]:
        """``plan_slots`` of this spec."""
        harness = self.spec.harness
        if unchanged is None:
            unchanged = content_key(harness, RewriteMapping())
        out = []
        for index in indexes:
            try:
                out.append(
                    _plan_slot(self.spec, index, self.eligible, self.resolve, unchanged, keep)
                )
            except HsaError as exc:
                raise PlanError(
                    exc.message, harness_id=harness.id, file=exc.file, where=exc.where
                ) from exc
        return out


def _never_shown(harness: Harness, rules: MappingABC[str, Rule]) -> frozenset[str]:
    """The rules no variant of ``harness`` under ``rules`` can show a change of, whatever is
    drawn with them: planning would leave each out of every variant it is drawn into
    (``_unshown_steps``), so it is taken out of the rules drawn from, as a rule whose
    ``needs`` the context lacks is (its draw still made, so the others' draws do not shift;
    the top-up to ``min_rules`` and ``max_rules``' pick are among the rules left).

    Only the exact case, and only where every rule is built in (a rule of one's own may add a
    skill tool or a skills section): the built-in skill rules on a harness with no skill tool
    whose prompt has no skills section and names ``skills`` in no body or template. No rule
    adds a skill tool or a skills section, and none changes the Jinja code of a body or
    template (renames leave ``{{ }}``, ``{% %}`` and ``{# #}`` as they are), so no row under
    any variant shows skills: ``skill_content.*`` changes nothing else. ``skill_ids.*``
    rewrites text where skill ids are named, so it is taken out only where the harness has
    no skill either (the only rule adding skills, ``skill_content.distractors``, being out
    too), where it finds nothing to change."""
    prompt = harness.prompt
    if (
        harness.skill_tool is not None
        or "skills" in (prompt.template or "")
        or any(s.kind == "skills" or "skills" in s.body for s in prompt.sections)
        or any(r.plugin for r in rules.values())
    ):
        return frozenset()
    # (the built-in rules of these families change only a harness's skills and its skill
    # tool's enum of them)
    out = {n for n, r in rules.items() if r.family == "skill_content"}
    if not harness.skills:
        out |= {n for n, r in rules.items() if r.family == "skill_ids"}
    return frozenset(out)


def _plan_slot(
    spec: PlanSpec,
    index: int,
    eligible: set[str],
    resolve: Callable[[RecipeRule], tuple[Rule, dict[str, Any]]],
    unchanged: bytes,
    keep: bool,
) -> Variant:
    """Variant ``index`` of ``spec`` (``plan_slots``).

    Planned without the context's undeclared ``arguments`` first, then, where it has any,
    with them: where they change the rewrite (a rule would have made a parameter one of them
    names), that rewrite is the variant, its id naming them; elsewhere the variant is the one
    every trajectory of the harness gets."""
    harness, context, rules = spec.harness, spec.context, spec.rules
    plain = context.without_arguments()
    drawn = _drawn(spec, index, eligible, resolve, unchanged, keep, plain)
    uses = any(rules[n].needs for n, _, _ in drawn.applied)
    ctx = plain.key() if uses else None
    argued = False
    if context.arguments:
        other = _drawn(spec, index, eligible, resolve, unchanged, keep, context)
        if other.key != drawn.key:
            drawn, argued = other, True
            uses = any(rules[n].needs for n, _, _ in drawn.applied)
            ctx = context.key() if uses else {"arguments": context.key()["arguments"]}
    vid = variant_id(harness, drawn.applied, drawn.seed, ctx)
    return Variant(
        vid,
        harness.id,
        drawn.applied,
        drawn.rewrite.harness,
        drawn.rewrite.mapping,
        drawn.seed,
        index,
        drawn.key,
        drawn.mapping_json,
        drawn.dropped,
        argued,
    )


class _Drawn(NamedTuple):
    """A slot's rewrite (``_drawn``): the rules applied, its seed, content key and mapping
    JSON, and why the draws before it were dropped (``PromptUnrendered``)."""

    rewrite: Rewrite
    applied: tuple[tuple[str, str, dict[str, Any]], ...]
    seed: int
    key: bytes
    mapping_json: str
    dropped: tuple[str, ...]


def _drawn(
    spec: PlanSpec,
    index: int,
    eligible: set[str],
    resolve: Callable[[RecipeRule], tuple[Rule, dict[str, Any]]],
    unchanged: bytes,
    keep: bool,
    context: Context,
) -> _Drawn:
    """The rewrite of slot ``index`` under ``context``: drawn again while it changes nothing
    (``plan_variant``)."""
    harness = spec.harness
    dropped: list[str] = []
    for attempt in range(_REDRAWS):
        variant_seed = derive_seed("variant", spec.seed, harness.id, index, attempt)
        chosen = _draw(spec.recipe, generator("draw", variant_seed), eligible)
        base = [r for r in spec.recipe.base if r.rule in eligible]
        chain = [resolve(r) for r in base + chosen]
        try:
            rewrite, applied = _apply_resolved(
                harness, chain, seed=variant_seed, context=context, shown=True
            )
        except HooksAlike:  # no variant: drawn again, the harness as it is at the last
            rewrite, applied = Rewrite(harness), ()
        except PromptUnrendered as exc:  # the same, counted (``LazyPlan.content`` tells)
            dropped.append(str(exc))
            rewrite, applied = Rewrite(harness), ()
        mapping_json = rewrite.mapping.to_json()
        key = _digest(rewrite.harness.to_json(keep=keep), mapping_json)  # content_key
        if key != unchanged:
            break
    return _Drawn(rewrite, applied, variant_seed, key, mapping_json, tuple(dropped))


def _checked_seed(seed: Any) -> int:
    """``seed`` if it is a seed (an integer, 0 or more): ``"0"`` or ``True`` would draw other
    variants than ``0`` or ``1``, silently."""
    try:
        value = operator.index(seed)  # numpy's integers too, as Python's
    except TypeError:
        value = -1
    if isinstance(seed, bool) or value < 0:
        raise RuleError(f"seed must be an integer, 0 or more, got {seed!r}")
    return value


def _check_arguments(recipe: Any, harness: Any, *, no_harness: bool = False) -> None:
    """Refuse a ``recipe`` or ``harness`` argument that is not one (a path, say); None for
    the harness where ``no_harness`` allows it."""
    refuse_kind(recipe, Recipe, "recipe", "hsa.load_recipe(path) reads one", RuleError)
    reads = "hsa.load_harness(path) reads one"
    refuse_kind(harness, Harness, "harness", reads, RuleError, none=no_harness)


def pick_order(ids: pa.Array, widths: np.ndarray, seed: int) -> np.ndarray:
    """For each id, the slots ``range(width)`` in the order its picks visit them.

    Column-wise: slot ``s`` of an id gets the key ``splitmix64(fnv1a(id) ^ derive_seed("pick",
    seed, s))`` and the slots are visited by increasing key, so an id's order depends on the
    id, the seed and its width, never on the other ids of the batch. Returns an ``(n, W)``
    array (``W`` the largest width); an id's slots past its own width are -1, at the end.
    """
    n = len(ids)
    width = int(widths.max()) if n else 0
    if width == 0:
        return np.full((n, 0), -1, dtype=np.int64)
    salts = np.array([derive_seed("pick", seed, s) for s in range(width)], dtype=np.uint64)
    keys = splitmix64(fnv1a(ids)[:, None] ^ salts[None, :])
    outside = np.arange(width)[None, :] >= widths[:, None]
    keys[outside] = np.iinfo(np.uint64).max
    order = np.argsort(keys, axis=1, kind="stable").astype(np.int64)
    order[np.take_along_axis(outside, order, axis=1)] = -1
    return order


def walk(order: np.ndarray, content: Callable[[int], int], k: int) -> list[int]:
    """The slots one trajectory is rendered under: ``order`` visited until ``k`` are taken,
    passing over rewrites that change nothing (``content`` -1) and rewrites equal to one
    already taken (same ``content``)."""
    taken: list[int] = []
    seen: set[int] = set()
    for slot in order:
        if len(taken) == k or slot < 0:
            break
        found = content(int(slot))
        if found >= 0 and found not in seen:
            seen.add(found)
            taken.append(int(slot))
    return taken


@dataclass(frozen=True, slots=True)
class Hazard:
    """What of a trajectory some text protocol may be unable to write (``cannot_write``
    tells): its assistant texts that may read as calls (``call_like``) and its calls whose
    argument values nest deeper than ``deep_args``."""

    texts: tuple[str, ...] = ()
    calls: tuple[ToolCall, ...] = ()


#: the levels a variant may move an argument value down that the picker foresees
#: (``tools.wrap_args`` moves one level): a call nesting within this many levels of a call
#: format's ``max_depth`` is mapped under each variant to see whether it still fits
MOVED_DOWN = 4


def deep_args() -> int | None:
    """The nesting (``args_depth``) past which a call's arguments may not fit some call
    format once a variant moves them: the least ``CallFormat.max_depth`` (the Python-literal
    formats') less ``MOVED_DOWN``; None when every format writes any value. Such arguments
    have more brackets than this in their JSON text, and twice as many characters: the quick
    look that leaves the others unread."""
    limits = [f.max_depth for f in CALL_FORMATS.values() if f.max_depth is not None]
    return min(limits) - MOVED_DOWN if limits else None


def args_depth(args: MappingABC[str, Any]) -> int:
    """How deep the values of a call's ``args`` nest (``nesting``)."""
    return max((nesting(v) for v in args.values()), default=0)


def hazard_of(events: Sequence[Event]) -> Hazard | None:
    """The ``Hazard`` of ``events``; None when they hold none (most trajectories)."""
    deep = deep_args()
    texts = tuple(e.text for e in events if isinstance(e, AssistantMessage) and call_like(e.text))
    calls = tuple(
        e
        for e in events
        if deep is not None and isinstance(e, ToolCall) and args_depth(e.args) > deep
    )
    return Hazard(texts, calls) if texts or calls else None


def cannot_write(hazard: Hazard | None, harness: Harness, mapping: RewriteMapping) -> bool:
    """Whether a trajectory with ``hazard`` cannot be written under the rewrite ``(harness,
    mapping)``, so the picker passes over such a variant for it: one of its assistant texts
    would read as calls under the harness's text protocol (``reads_as_calls``), or a call's
    arguments, as ``mapping`` writes them, nest deeper than its call format writes
    (``CallFormat.max_depth``: Python's parser refuses deeper literals)."""
    protocol = harness.protocol
    if hazard is None or protocol.is_api:
        return False
    fmt = CALL_FORMATS.get(protocol.call_format)
    limit = fmt.max_depth if fmt is not None else None
    if limit is not None and any(_deeper(c, mapping, limit) for c in hazard.calls):
        return True
    return any(reads_as_calls(text, protocol) for text in hazard.texts)


def _deeper(call: ToolCall, mapping: RewriteMapping, limit: int) -> bool:
    """Whether ``call``'s arguments, as ``mapping`` writes them, nest deeper than ``limit``."""
    tool = mapping.tools.get(call.tool)
    args = call.args
    if tool is not None and tool.steps:
        try:
            args = apply_steps(args, tool.steps)
        except RecursionError:  # hundreds of levels deep: far past any limit
            return True
    return args_depth(args) > limit


def pick(
    variants: Sequence[Variant] | MappingABC[str, Variant],
    trajectory_id: str,
    recipe: Recipe,
    *,
    seed: int | None = None,
    harness: Harness | None = None,
    events: Sequence[Event] = (),
) -> list[Variant]:
    """The variants one trajectory is rendered under, exactly as ``hsa augment`` picks them.

    The canonical variant first when ``variants`` hold one, then ``variants_per_trajectory``
    of the others (fewer when fewer differ), visited in the trajectory's ``pick_order`` and
    taken unless its rows would show the same as under the canonical harness or as under a
    variant already taken (``shown_key``: a rewrite of a skill the trajectory's ``events``
    never load, of a hook that never fires in them, or of a prompt that renders empty, shows
    nothing), or unless its protocol cannot write the ``events`` (``cannot_write``: assistant
    text its text protocol would read as calls, an argument nested deeper than its call format
    writes). ``harness`` is the harness ``variants`` were planned from; it may
    be left out when they hold its canonical variant (``include_canonical``), which carries
    it. The augment job plans only the variants this visits (``LazyPlan``), with the same
    result.
    """
    _check_arguments(recipe, harness, no_harness=True)
    if isinstance(variants, MappingABC):  # read_variants gives them by id
        variants = list(variants.values())
    if not isinstance(variants, Sequence) or not all(isinstance(v, Variant) for v in variants):
        raise RuleError(
            "variants must be a list of Variants (hsa.plan gives one), got "
            f"{type(variants).__name__}"
        )
    if not isinstance(trajectory_id, str):
        raise RuleError(f"trajectory_id must be a string, got {trajectory_id!r}")
    seed = recipe.seed if seed is None else _checked_seed(seed)
    # the canonical variant itself: a planned draw whose rules all changed nothing has no
    # rules either, and is one of the others (passed over, as the augment job passes it over)
    canonical = [v for v in variants if v.is_canonical and v == canonical_variant(v.harness)][:1]
    if harness is None:
        if not canonical:
            raise RuleError(
                "pick needs the harness the variants were planned from (harness=...) when "
                "they hold no canonical variant, to leave out rewrites that change nothing"
            )
        harness = canonical[0].harness
    others = [v for v in variants if not (canonical and v is canonical[0])]
    sight = Sight.of(events)
    unchanged = shown_key(harness, RewriteMapping(), sight, source=harness)
    contents: dict[bytes, int] = {}

    hazard = hazard_of(events)

    def content(slot: int) -> int:
        variant = others[slot]
        key = shown_key(variant.harness, variant.mapping, sight, source=harness)
        if key == unchanged or cannot_write(hazard, variant.harness, variant.mapping):
            return -1
        return contents.setdefault(key, len(contents))

    order = pick_order(id_array([trajectory_id]), np.array([len(others)], np.int64), seed)[0]
    return canonical + [others[s] for s in walk(order, content, recipe.variants_per_trajectory)]
