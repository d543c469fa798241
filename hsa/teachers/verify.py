"""Verification: does a finished rollout parse, validate, execute and solve its task?

Four checks, in order: ``format`` (every model message parsed, and the recorded surface
conversation parses back to the recorded events), ``schema`` (every call names a tool of the
surface harness and its arguments validate against that tool's JSON Schema), ``execution``
(every call ran: no error result, no call denied by a hook) and ``score`` (the environment
scores the episode as solved). A rollout that did not reach a final answer fails ``format``,
``completion`` or ``backend``. The first failure is the rollout's reason; every rollout is
kept, verified or not.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from hsa.envs.base import Outcome
from hsa.errors import HsaError
from hsa.harness.arguments import checker_of
from hsa.harness.events import Event, HookFired, ToolCall, ToolResult
from hsa.harness.model import Harness
from hsa.harness.parse import parse
from hsa.harness.render import Conversation, as_shown, render

CHECKS = ("format", "schema", "execution", "score")

_TAGS = re.compile(r"</?(tool_call|toolcall|function_call|tool_use)\b", re.IGNORECASE)

#: the ``finish_reason`` values of a reply that called tools (``function_call``: OpenAI's
#: older shape of one call, ``message.function_call``)
CALLED = ("tool_calls", "function_call")
#: the ``finish_reason`` values of a reply the backend cut off, and what each says
CUT_OFF = {
    "length": "at the token limit (finish_reason 'length'; raise max_tokens)",
    "content_filter": "by the provider's content filter (finish_reason 'content_filter')",
    "repetition": "as it repeated itself (vLLM's finish_reason 'repetition')",
}


@dataclass(frozen=True, slots=True)
class Verification:
    """The outcome of every check and the rollout's reason (``ok`` when verified)."""

    verified: bool
    reason: str
    checks: Mapping[str, bool] = field(default_factory=dict)
    score: float | None = None

    def to_dict(self) -> dict:
        return {
            "verified": self.verified,
            "reason": self.reason,
            "checks": dict(self.checks),
            "score": self.score,
        }


def holds_call_markup(text: str) -> bool:
    """Whether ``text`` holds a tool-call tag (``<tool_call>``, ``<TOOLCALL>``, ...)."""
    return _TAGS.search(text) is not None


def call_attempt(text: str, harness: Harness) -> str | None:
    """Why ``text`` (assistant text that parsed as no call) looks like a failed tool call.

    A message that parsed as plain text but holds call markup or starts like a calls block
    naming a tool is a malformed call, not a final answer. Returns None for ordinary text.
    """
    if holds_call_markup(text):
        return "holds tool-call markup that does not parse as a call"
    body = text.lstrip()
    if body.startswith("```"):  # a calls block in a Markdown code fence
        body = body.partition("\n")[2].lstrip()
    head = body[:1]
    names = [t.name for t in harness.tools]
    if harness.skill_tool is not None:
        names.append(harness.skill_tool.name)
    if head in ("[", "{", "<") and any(name in body for name in names):
        return "starts like a calls block naming a tool but does not parse as one"
    for name in names:
        if re.search(rf"(?:^|\[)\s*{re.escape(name)}\s*\(", body):
            return f"writes a call to {name!r} that does not parse"
    return None


def schema_problems(events: Sequence[Event], harness: Harness) -> list[str]:
    """Problems of the calls in ``events`` (surface identifiers) against ``harness``'s tools,
    each as ``CALL_ID: problem``."""
    checker = checker_of(harness)
    problems: list[str] = []
    for event in events:
        if isinstance(event, ToolCall):
            problem = checker.problem(event.tool, event.args)
            if problem is not None:
                problems.append(f"{event.call_id}: {problem}")
    return problems


def execution_problems(events: Sequence[Event], canonical: Harness) -> list[str]:
    """Calls that did not run: error results, and calls a ``pre_tool_use`` hook denied."""
    problems: list[str] = []
    tools = {e.call_id: e.tool for e in events if isinstance(e, ToolCall)}
    denying = {h.id for h in canonical.hooks if h.effect == "deny" and h.event == "pre_tool_use"}
    last_call: str | None = None
    for event in events:
        if isinstance(event, ToolResult):
            last_call = event.call_id
            if event.is_error:
                detail = " ".join(event.content.split())[:160]
                problems.append(f"{event.call_id} {tools.get(event.call_id, '?')}: {detail}")
        elif isinstance(event, HookFired) and event.hook_id in denying and last_call:
            problems.append(f"{last_call}: denied by hook {event.hook_id!r}")
    return problems


def round_trip_problem(
    surface_events: Sequence[Event], harness: Harness, conversation: Conversation | None = None
) -> str | None:
    """Why the surface events would not survive ``render`` then ``parse``, or None: they come
    back in the order render shows them (``as_shown``: a hook's note among the results of one
    message's calls after the last of them).

    ``conversation``, when given, is ``render(surface_events, harness)`` already made.
    """
    try:
        if conversation is None:
            conversation = render(surface_events, harness)
        back = parse(conversation, harness)
    except HsaError as exc:
        return f"the recorded conversation does not parse: {exc}"
    shown = as_shown(surface_events, harness)
    if list(back) != shown:
        index = next(
            (i for i, (a, b) in enumerate(zip(back, shown, strict=False)) if a != b),
            min(len(back), len(shown)),
        )
        return f"the recorded conversation parses back differently from event {index} on"
    return None


def verify(
    *,
    ended: str,
    detail: str | None,
    surface_events: Sequence[Event],
    surface_calls: Sequence[ToolCall],
    conversation: Conversation | None = None,
    canonical_events: Sequence[Event],
    surface: Harness,
    canonical: Harness,
    outcome: Outcome | None,
    cut: Sequence[tuple[int, str]] = (),
) -> Verification:
    """Every check of a finished rollout; ``ended`` says how the rollout stopped.

    ``ended`` is ``answered`` (every user turn got a final answer), ``format`` (a model
    message did not parse and was not repaired), ``step_limit``, ``backend`` (no answer from
    the backend), ``context`` (the endpoint refused the conversation as past the model's
    context window), ``empty`` (the model answered nothing) or ``schema`` (it loaded a skill
    the harness lacks); ``detail`` says more.
    ``surface_events`` are the canonical events mapped to the surface (what the conversation
    shows), ``conversation`` their rendering when already made; ``surface_calls`` the calls
    exactly as the model wrote them. ``cut``: (step, ``finish_reason``) of the steps whose
    reply the backend cut off (``CUT_OFF``: the token limit, a content filter): such a reply
    may read as a step, but not the one the model meant, so it fails the ``complete`` check
    however it reads.
    """
    checks: dict[str, bool] = {}
    reasons: list[str] = []
    checks["complete"] = not cut and ended != "context"
    for finish, why in CUT_OFF.items():
        steps = ", ".join(str(step) for step, reason in cut if reason == finish)
        if steps:
            reasons.append(f"truncated: the reply at step(s) {steps} was cut off {why}")
    if ended == "format":
        checks["format"] = False
        reasons.append(f"format: {detail}")
    else:
        problem = round_trip_problem(surface_events, surface, conversation)
        checks["format"] = problem is None
        if problem is not None:
            reasons.append(f"format: {problem}")
    schema = schema_problems(surface_calls, surface)
    # a skill load the harness lacks ends the rollout (``schema``) before it is a surface call
    checks["schema"] = not schema and ended != "schema"
    if schema:
        reasons.append(f"schema: {schema[0]}" + (f" (+{len(schema) - 1} more)" * (len(schema) > 1)))
    execution = execution_problems(canonical_events, canonical)
    checks["execution"] = not execution
    if execution:
        extra = f" (+{len(execution) - 1} more)" * (len(execution) > 1)
        reasons.append(f"execution: {execution[0]}{extra}")
    solved = outcome is not None and outcome.success
    checks["score"] = solved
    if ended not in ("answered", "format"):
        reasons.insert(0, f"{ended}: {detail}" if detail else ended)
    elif not solved and outcome is not None:
        why = "; ".join(outcome.reasons) or "not solved"
        reasons.append(f"score: {why}")
    verified = ended == "answered" and all(checks.values())
    return Verification(
        verified=verified,
        reason="ok" if verified else reasons[0] if reasons else "not verified",
        checks=checks,
        score=None if outcome is None else outcome.score,
    )
