"""Scoring a livestream episode against its task's ground truth; every failure gives a reason."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from hsa.envs.base import Outcome, Task
from hsa.envs.episode import final_answers
from hsa.envs.livestream.compliance import absolute_claims
from hsa.envs.livestream.facts import fact_label, has_fact
from hsa.envs.livestream.state import LiveState
from hsa.envs.livestream.tools import defaults
from hsa.harness.events import (
    AssistantMessage,
    Event,
    HookFired,
    SkillLoad,
    ToolCall,
    ToolResult,
    UserMessage,
)
from hsa.harness.model import Harness

# Free-text arguments the tool reads without regard to case (``actions.search`` lower-cases
# the query), so ``northloom core`` is the same call as ``Northloom Core``.
_CASELESS: dict[str, tuple[str, ...]] = {"search_products": ("query",)}


def args_match(expected: Any, actual: Any) -> bool:
    """Whether ``actual`` has every value of ``expected``: objects by subset, lists in any
    order, scalars by equality."""
    if isinstance(expected, Mapping):
        return isinstance(actual, Mapping) and all(
            k in actual and args_match(v, actual[k]) for k, v in expected.items()
        )
    if isinstance(expected, list):
        if not isinstance(actual, list) or len(actual) != len(expected):
            return False
        remaining = list(actual)
        for item in expected:
            hit = next((i for i, a in enumerate(remaining) if args_match(item, a)), None)
            if hit is None:
                return False
            remaining.pop(hit)
        return True
    return expected == actual


def _as_run(harness: Harness, tool: str, args: Mapping[str, Any]) -> dict[str, Any]:
    """A call's ``args`` as the tool runs them: schema defaults filled in for absent parameters
    (leaving ``slot`` at its default ``main`` is the same pin as writing it), and caseless
    free-text arguments lower-cased."""
    declared = harness.tool(tool)
    return _caseless(tool, dict(args) if declared is None else defaults(declared, dict(args)))


def _caseless(tool: str, args: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(args)
    for name in _CASELESS.get(tool, ()):
        if isinstance(out.get(name), str):
            out[name] = out[name].lower()
    return out


def _call_text(spec: Mapping[str, Any]) -> str:
    args = ", ".join(f"{k}={v!r}" for k, v in (spec.get("args") or {}).items())
    return f"{spec['tool']}({args})"


def _product_ids(args: Mapping[str, Any]) -> list[str]:
    found: list[str] = []

    def walk(value: Any, key: str | None) -> None:
        if isinstance(value, Mapping):
            for k, v in value.items():
                walk(v, k)
        elif isinstance(value, list):
            for v in value:
                walk(v, key)
        elif key in ("product_id", "product_ids") and isinstance(value, str):
            found.append(value)

    walk(args, None)
    return found


def score(task: Task, state: LiveState, events: Sequence[Event], harness: Harness) -> Outcome:
    """Check ``events`` and the final ``state`` against the ground truth of ``task``."""
    truth = task.ground_truth
    reasons: list[str] = []
    calls = [e for e in events if isinstance(e, ToolCall)]

    answers = final_answers(events)
    answered_turns = {turn for turn, _, _ in answers}
    for turn in range(len(task.turns)):
        if turn not in answered_turns:
            reasons.append(f"turn {turn + 1} has no final answer")
    deny_hooks = {h.id for h in harness.hooks if h.effect == "deny"}
    reasons.extend(_claims(events, deny_hooks))
    for turn, _answer, stops in answers:
        refused = [s.hook_id for s in stops if s.hook_id in deny_hooks]
        if refused:
            reasons.append(f"the answer to turn {turn + 1} was refused by hook {refused[0]!r}")
    spoken = "\n".join(answer.text for _, answer, _ in answers)
    for fact in truth.get("facts") or ():
        if not has_fact(fact, spoken):
            reasons.append(f"missing fact {fact_label(fact)}")

    for spec in truth.get("required_calls") or ():
        same_tool = [c for c in calls if c.tool == spec["tool"]]
        # a spec leaves out what it does not care about, so only the call gets its defaults
        want = _caseless(spec["tool"], spec.get("args") or {})
        if not same_tool:
            reasons.append(f"required tool {spec['tool']!r} never called")
        elif not any(args_match(want, _as_run(harness, c.tool, c.args)) for c in same_tool):
            reasons.append(f"required call {_call_text(spec)} never made")
    for spec in truth.get("forbidden_calls") or ():
        want = _caseless(spec["tool"], spec.get("args") or {})
        for c in calls:
            if c.tool == spec["tool"] and args_match(want, _as_run(harness, c.tool, c.args)):
                reasons.append(f"forbidden call {_call_text(spec)} made ({c.call_id})")

    allowed = set(truth.get("product_ids") or ())
    for c in calls:
        for pid in _product_ids(c.args):
            if pid not in allowed:
                reasons.append(f"wrong product id {pid!r} in {c.tool} ({c.call_id})")

    reasons.extend(_denied_calls(events, deny_hooks))
    reasons.extend(_skill_order(events, truth.get("required_skills") or ()))

    expected = truth.get("final_state")
    if expected is not None:
        actual = state.snapshot()
        for key in ("pinned", "handoffs"):
            want = expected.get(key, {} if key == "pinned" else [])
            if actual[key] != want:
                reasons.append(f"final state mismatch: {key} is {actual[key]!r}, expected {want!r}")
    return Outcome(success=not reasons, reasons=tuple(reasons))


def _claims(events: Sequence[Event], deny_hooks: set[str]) -> list[str]:
    """Absolute claims in any text the viewer saw: answers, and text sent with calls. An answer
    a deny stop hook refused and the model then replaced was never shown (the refusal of a
    turn's last answer is a reason of its own)."""
    reasons: list[str] = []
    turn = -1
    for i, event in enumerate(events):
        if isinstance(event, UserMessage):
            turn += 1
        if not isinstance(event, AssistantMessage):
            continue
        claims = absolute_claims(event.text)
        if not claims:
            continue
        if i + 1 < len(events) and isinstance(events[i + 1], ToolCall | SkillLoad):
            where = f"in text sent with a call in turn {turn + 1}"
        elif _refused(events, i, deny_hooks) and _answered_again(events, i):
            continue
        else:
            where = f"in the answer to turn {turn + 1}"
        reasons.extend(f"forbidden absolute claim {claim!r} {where}" for claim in claims)
    return reasons


def _refused(events: Sequence[Event], at: int, deny_hooks: set[str]) -> bool:
    """Whether a deny stop hook fired right after the assistant text at ``at``."""
    for event in events[at + 1 :]:
        if not isinstance(event, HookFired):
            return False
        if event.event == "stop" and event.hook_id in deny_hooks:
            return True
    return False


def _answered_again(events: Sequence[Event], at: int) -> bool:
    """Whether more assistant text follows ``at`` in the same user turn."""
    for event in events[at + 1 :]:
        if isinstance(event, UserMessage):
            return False
        if isinstance(event, AssistantMessage):
            return True
    return False


def _denied_calls(events: Sequence[Event], deny_hooks: set[str]) -> list[str]:
    reasons = []
    by_id = {e.call_id: e for e in events if isinstance(e, ToolCall)}
    last_result: ToolResult | None = None
    for event in events:
        if isinstance(event, ToolResult):
            last_result = event
        elif (
            isinstance(event, HookFired)
            and event.event == "pre_tool_use"
            and event.hook_id in deny_hooks
            and last_result is not None
        ):
            call = by_id.get(last_result.call_id)
            tool = call.tool if call else "?"
            reasons.append(
                f"call {last_result.call_id} to {tool} was blocked by hook {event.hook_id!r}"
            )
    return reasons


def _skill_order(events: Sequence[Event], required: Sequence[str]) -> list[str]:
    """Required skills must be loaded before the first tool call."""
    reasons = []
    first_call = next((i for i, e in enumerate(events) if isinstance(e, ToolCall)), len(events))
    loads = {
        e.skill_id: i for i, e in reversed(list(enumerate(events))) if isinstance(e, SkillLoad)
    }
    for skill in required:
        if skill not in loads:
            reasons.append(f"required skill {skill!r} never loaded")
        elif loads[skill] > first_call:
            reasons.append(f"required skill {skill!r} loaded after the first tool call")
    return reasons
