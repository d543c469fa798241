"""The ``firstcall`` suite: the model's first reply to each task, against the oracle's first step.

Each task is asked once under its own harness and once under each of ``variants`` held-out
variants: the opening the rollout would send (session-start hooks, the first user turn), one
request, the reply parsed under the variant's protocol. It is scored in three steps against
the environment's oracle's first step (canonical names on both sides, through the variant's
inverse mapping):

- ``name``: the first call names the right tool (or loads the right skill) -- by a name the
  variant offers: a canonical name the variant renamed is an unknown tool, not a match; a
  call to the right tool whose arguments its schema refuses matches here, and no further. A
  skill load's target is its skill, not the skill tool (as ``target`` and ``choices`` count
  it): a call to the skill tool whose arguments its schema refuses matches when its skill
  argument names the right skill, and none without one (``skill_id`` where the variant's
  tool takes ``skillId``);
- ``keys``: and with exactly the right argument names, arguments the tool's schema accepts;
- ``exact``: and with the right values (the episode's ``success``).

A task whose oracle answers without a call is matched by a reply without a call, and on a task
where the environment scores a reply that does not parse as no call
(``Environment.unparsed_is_no_call``: BFCL's irrelevance entries), by such a reply. Cheap enough
for models too small to finish an episode, and the same for any model: the small-model
experiment of the HAT study measures exactly this.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from hsa.augment.mapping import ArgumentClash, map_events
from hsa.augment.planner import Variant
from hsa.envs.base import Environment
from hsa.errors import EnvError, EvalError, TeacherError
from hsa.eval.metrics import family_of
from hsa.eval.suites import Episode
from hsa.harness.arguments import checker_of
from hsa.harness.events import Event, SkillLoad, ToolCall
from hsa.harness.model import Harness
from hsa.harness.render import render
from hsa.teachers.backends.base import Backend
from hsa.teachers.request import ChatRequest
from hsa.teachers.rollout import (
    TASK_KEY,
    VARIANT_KEY,
    RolloutConfig,
    StepError,
    protocol_view,
    read_step,
    surface_opening,
)
from hsa.teachers.verify import CUT_OFF


def _first(events: Sequence[Event]) -> ToolCall | SkillLoad | None:
    return next((e for e in events if isinstance(e, ToolCall | SkillLoad)), None)


def expected(
    env: Environment, episode: Episode, opening: Sequence[Event]
) -> ToolCall | SkillLoad | None:
    """The oracle's first call of the episode's task after its ``opening`` events (canonical),
    None when it answers."""
    try:
        policy = env.oracle()
    except EnvError as exc:
        raise EvalError(
            f"{exc.message}; the firstcall suite scores against the environment's oracle",
            where="suites",
        ) from None
    return _first(policy(episode.spec.task, opening))


def judge(
    want: ToolCall | SkillLoad | None,
    got: ToolCall | SkillLoad | None,
    problem: str | None,
    named: str | SkillLoad | None = None,
) -> tuple[bool, bool, bool, str | None]:
    """``(name, keys, exact, failure class)`` of a first call ``got`` against ``want``; with a
    ``problem``, ``named`` is what an offered tool's refused call named, canonical: its tool,
    or for the skill tool the load of the offered skill its skill argument names (its
    arguments did not fit: the right name all the same, not the right keys)."""
    if problem is not None:
        if isinstance(want, SkillLoad):
            name = named == want
        else:
            name = isinstance(want, ToolCall) and named is not None and want.tool == named
        return name, False, False, problem
    if want is None:
        ok = got is None
        return ok, ok, ok, None if ok else "wrong_tool"
    if got is None:
        return False, False, False, "wrong_final_answer"
    if isinstance(want, SkillLoad) or isinstance(got, SkillLoad):
        ok = isinstance(want, SkillLoad) and isinstance(got, SkillLoad)
        ok = ok and want.skill_id == got.skill_id  # type: ignore[union-attr]
        return ok, ok, ok, None if ok else "wrong_tool"
    if want.tool != got.tool:
        return False, False, False, "wrong_tool"
    if set(want.args) != set(got.args):
        return True, False, False, "wrong_arguments"
    exact = dict(want.args) == dict(got.args)
    return True, True, exact, None if exact else "wrong_arguments"


async def first_reply(
    episode: Episode, env: Environment, backend: Backend, settings: RolloutConfig, policy: str
) -> tuple[dict[str, Any], bool] | str:
    """The row of one firstcall episode and whether its answer came from the cache, or why
    the backend gave no answer."""
    spec = episode.spec
    variant = spec.variant
    opening, shown = surface_opening(env, spec.task, variant)
    conversation = render(shown, variant.harness)
    request = ChatRequest(
        settings.model,
        conversation.messages,
        conversation.tools,
        dataclasses.replace(settings.sampling, seed=spec.seed),
        {VARIANT_KEY: variant.variant_id, TASK_KEY: spec.task.id},
    )
    try:
        response = await backend.chat(request)
    except TeacherError as exc:
        return str(exc)
    want = expected(env, episode, opening)
    problem: str | None = None
    named: str | SkillLoad | None = None
    got: ToolCall | SkillLoad | None = None
    calls = 0  # the calls the reply made, skill loads included as in every suite, valid or not
    offered = False  # whether its first call names a tool or skill the harness offers
    parsed = True
    try:
        view = variant.harness.derived(protocol_view)
        surface = read_step(response.message, variant.harness, view, 0, response.finish_reason)
    except StepError as exc:
        parsed, reason = False, str(exc)
        # no call where the benchmark's decoder reads it as none (BFCL's irrelevance entries)
        if not env.unparsed_is_no_call(spec.task):
            problem = "unparseable_call"
            offered = _names_offered_tool(response.message, variant.harness)
    else:
        first = _first(surface)
        calls = sum(isinstance(e, ToolCall | SkillLoad) for e in surface)
        reason = "ok"
        if isinstance(first, ToolCall):
            found = checker_of(variant.harness).problem(first.tool, first.args)
            offered = found is None or not found.startswith("unknown tool")
            if found is not None:
                problem, reason = ("invalid_arguments" if offered else "unknown_tool"), found
                if offered:
                    named = _named(first, variant)
        elif isinstance(first, SkillLoad):
            offered = variant.harness.skill(first.skill_id) is not None
            if not offered:
                problem, reason = "unknown_tool", f"loads skill {first.skill_id!r}, not offered"
        if problem is None:
            try:
                got = _first(map_events(surface, variant.mapping.inverse(), variant.harness))
            except ArgumentClash as exc:  # an undeclared argument where the inverse puts one
                problem, reason = "invalid_arguments", f"{exc.where}: {exc.message}"
    name, keys, exact, failure = judge(want, got, problem, named)
    if failure is not None and reason == "ok":
        reason = f"{failure}: expected {_show(want)}, got {_show(got)}"
    if failure is not None and response.finish_reason in CUT_OFF:
        # scored as written, but a reply the backend cut off (max_tokens, a content filter,
        # vLLM's repetition stop) explains the failure
        failure, reason = "truncated", f"cut off {CUT_OFF[response.finish_reason]}: {reason}"
    rules = list(episode.rules)  # drawn rules only: a recipe's base rules are every harness's
    latency = round(response.latency_s, 6)
    row = {
        "suite": "firstcall",
        "config": episode.config,
        "task_id": spec.task.id,
        "task_group": episode.group,
        "task_kind": spec.task.kind,
        "variant_id": variant.variant_id,
        "rules": rules,
        "families": sorted({family_of(r) for r in rules}),
        "protocol": variant.harness.protocol.label,
        "policy": policy,
        "success": exact,
        "score": (name + keys + exact) / 3,
        "verified": exact and parsed,  # (as a rollout that ends at it is never verified)
        "failure": failure,
        "reason": reason,
        "turns": 1,
        "steps": 1,
        "calls": calls,
        "tokens_in": response.usage.prompt_tokens,
        "tokens_out": response.usage.completion_tokens,
        "latency_s": latency,
        "call_latencies_s": [latency],
        "name_match": name,
        "keys_match": keys,
        "offered": name or offered,
        "target": _target(want, variant.mapping),
        "choices": len(variant.harness.tools)
        + (len(variant.harness.skills) if variant.harness.skill_tool is not None else 0),
    }
    return row, response.cached


def _names_offered_tool(message: Mapping[str, Any], harness: Harness) -> bool:
    """Whether a reply that does not parse names a tool ``harness`` offers in its first API
    call (``tool_calls``): a reply cut off at ``max_tokens`` most often stops inside the
    arguments, its name written whole. A call written in the text (in-prompt protocols) is
    not taken apart unparsed: it names nothing here."""
    calls = message.get("tool_calls")
    first = calls[0] if isinstance(calls, list) and calls else None
    function = first.get("function") if isinstance(first, Mapping) else None
    name = function.get("name") if isinstance(function, Mapping) else None
    return isinstance(name, str) and harness.tool(name) is not None


def _named(call: ToolCall, variant: Variant) -> str | SkillLoad | None:
    """What an offered tool's refused ``call`` names, canonical: its tool, or for the skill
    tool the load of the skill its skill argument names when the variant offers that skill
    (None when it names none: the skill tool alone is no skill)."""
    harness, inverse = variant.harness, variant.mapping.inverse()
    if harness.skill_tool is None or call.tool != harness.skill_tool.name:
        return inverse.tool_name(call.tool)
    skill_id = call.args.get(harness.skill_arg or "")
    if not isinstance(skill_id, str) or harness.skill(skill_id) is None:
        return None
    load = _first(map_events([SkillLoad(skill_id)], inverse))
    return load if isinstance(load, SkillLoad) else None


def _target(want: ToolCall | SkillLoad | None, mapping: Any) -> str | None:
    """The name the expected call has under the variant: its tool, or the skill id loaded."""
    if want is None:
        return None
    surface = _first(map_events([want], mapping))
    if isinstance(surface, SkillLoad):
        return surface.skill_id
    return surface.tool if isinstance(surface, ToolCall) else None


def _show(event: ToolCall | SkillLoad | None) -> str:
    if event is None:
        return "no call"
    if isinstance(event, SkillLoad):
        return f"skill {event.skill_id!r}"
    return f"{event.tool}({', '.join(sorted(event.args))})"
