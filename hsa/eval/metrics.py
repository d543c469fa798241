"""What one episode measured: success, why it failed, turns, tokens and latency, as a row.

``success`` is the environment's score of the episode (the model reached a final answer, or
a reply the environment scores as no call, and the environment scores it solved), whatever
happened on the way; ``verified`` is the teacher's
stricter verdict (every call also validated and ran). A failed episode gets one failure class,
read from its checks and its calls, not from the words of its reason (which names how it
ended: a step limit hides the unknown tool called at every step). The first that applies, in
this order -- a cut-off reply, how the episode ended, then verification's checks in their own
order, each decided by the first call that failed it, then the step limit and the score:

- ``truncated``: a reply cut off at the token limit (``max_tokens``), or a conversation the
  endpoint refused as past the model's context window (what follows comes from it);
- ``unknown_tool``: a skill load naming a skill the harness does not offer (it ends the
  episode);
- ``error``: the environment or harness failed (not the model);
- ``unparseable_call``: a reply that does not parse under the harness's protocol (the format
  check);
- ``unknown_tool``, ``invalid_arguments``: the first call the harness refused (the schema
  check), by why: a tool it does not offer, or arguments the tool's schema refuses;
- ``policy_violation``, ``wrong_arguments``: the first call that did not run (the execution
  check): one a hook denied, or one the environment answered with an error;
- ``step_limit``: no final answer within the steps allowed;
- ``policy_violation``, ``wrong_tool``, ``wrong_arguments``, ``wrong_final_answer``: a valid
  episode the environment scores unsolved, by what its scorer names first (an answer a hook
  refused or a forbidden claim, a required tool never called, a call with other arguments, an
  answer missing a fact).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from hsa.augment.rule import FAMILIES
from hsa.envs.hook_runtime import DENIED
from hsa.errors import HsaError
from hsa.harness.arguments import checker_of
from hsa.harness.events import CALL_KINDS, ToolCall, ToolResult, UserMessage
from hsa.harness.parse import parse
from hsa.teachers.rollout import Rollout

FAILURES = (
    "unparseable_call",
    "unknown_tool",
    "invalid_arguments",
    "policy_violation",
    "truncated",
    "step_limit",
    "wrong_tool",
    "wrong_arguments",
    "wrong_final_answer",
    "error",
)

EPISODE_SCHEMA = pa.schema(
    [
        ("suite", pa.string()),
        ("config", pa.string()),
        ("task_id", pa.string()),
        ("task_group", pa.string()),
        ("task_kind", pa.string()),
        ("variant_id", pa.string()),
        ("rules", pa.list_(pa.string())),
        ("families", pa.list_(pa.string())),
        ("protocol", pa.string()),
        ("policy", pa.string()),
        ("success", pa.bool_()),
        ("score", pa.float64()),
        ("verified", pa.bool_()),
        ("failure", pa.string()),
        ("reason", pa.string()),
        ("turns", pa.int32()),
        ("steps", pa.int32()),
        ("calls", pa.int32()),
        ("tokens_in", pa.int64()),
        ("tokens_out", pa.int64()),
        ("latency_s", pa.float64()),
        ("call_latencies_s", pa.list_(pa.float64())),
        # the firstcall suite's partial matches (``hsa.eval.firstcall``); null elsewhere
        ("name_match", pa.bool_()),
        ("keys_match", pa.bool_()),
        # whether the first reply names a tool or skill the harness offers, right or wrong, or
        # rightly calls none (firstcall only): a reply cut off is classed ``truncated`` whatever
        # it named, so this is not read from ``failure``
        ("offered", pa.bool_()),
        # the name the expected first call has under the episode's harness (firstcall only)
        ("target", pa.string()),
        # how many first calls the harness offers: its tools, and its skills when it loads them
        ("choices", pa.int32()),
    ]
)

_POLICY = re.compile(r"denied by hook|refused by hook|forbidden absolute claim", re.IGNORECASE)
_ANSWER = re.compile(r"missing fact|no final answer|acceptable answers|final answer", re.IGNORECASE)
_TOOL = re.compile(
    r"expected a call to|required tool|wrong number of calls|forbidden call|required skill",
    re.IGNORECASE,
)
_NAMED = re.compile(r"(?:action \S+ |required call |expected call \d+, )'?([A-Za-z0-9_.:-]+)")


def family_of(rule: str) -> str:
    """The family a rule belongs to, by its name's prefix (``tools.rename`` -> ``tools``)."""
    prefix = rule.partition(".")[0]
    return prefix if prefix in FAMILIES else "other"


def failure_class(result: Rollout) -> str | None:
    """The failure class of a finished rollout (``FAILURES``), None when it succeeded."""
    if succeeded(result):
        return None
    ended, checks = result.ended, result.verification.checks
    reason = result.verification.reason
    if not checks.get("complete", True):  # a cut-off reply explains what follows from it
        return "truncated"
    if ended == "schema":
        return "unknown_tool"  # a skill load the harness lacks
    if ended == "error":
        return "error"
    if not checks.get("format", True):  # a reply that did not parse ended it, or one that
        return "unparseable_call"  # parses back as something else was recorded
    if not checks.get("schema", True):
        return _refused_class(result)
    if not checks.get("execution", True):
        return _unrun_class(result)
    if ended == "step_limit":
        return "step_limit"
    return _score_class(reason, result)


def _refused_class(result: Rollout) -> str:
    """``unknown_tool`` or ``invalid_arguments``: why the harness refused the episode's first
    refused call, checked again on the calls as the model wrote them (the surface
    conversation's: the canonical events hold a refused call's name mapped back, which may
    name a tool the surface offers)."""
    surface = result.spec.variant.harness
    try:
        calls = [e for e in parse(result.conversation, surface) if isinstance(e, ToolCall)]
    except HsaError:  # not once the format check passed; if it does, the reason's words
        reason = result.verification.reason
        return "unknown_tool" if "unknown tool" in reason else "invalid_arguments"
    checker = checker_of(surface)
    for call in calls:
        problem = checker.problem(call.tool, call.args)
        if problem is not None:  # the forms ``hsa.harness.arguments`` documents
            return "unknown_tool" if problem.startswith("unknown tool") else "invalid_arguments"
    return "invalid_arguments"


def _unrun_class(result: Rollout) -> str:
    """``policy_violation`` when the episode's first call that did not run was denied by a
    hook (its result is the runtime's ``DENIED``), else ``wrong_arguments``: the environment
    answered it with an error."""
    for event in result.events:
        if isinstance(event, ToolResult) and event.is_error:
            return "policy_violation" if event.content == DENIED else "wrong_arguments"
    return "wrong_arguments"


def _score_class(reason: str, result: Rollout) -> str:
    text = reason.removeprefix("score: ")
    first = text.split("; ")[0]
    if _POLICY.search(first):
        return "policy_violation"
    if _ANSWER.search(first):
        return "wrong_final_answer"
    if _TOOL.search(first):
        return "wrong_tool"
    named = _NAMED.search(first)
    if named is not None:
        called = {e.tool for e in result.events if isinstance(e, ToolCall)}
        return "wrong_arguments" if named.group(1) in called else "wrong_tool"
    return "wrong_arguments"


def succeeded(result: Rollout) -> bool:
    """Whether the environment scores the episode solved: every turn answered, or, where a
    reply that does not parse is scored as no call (``Rollout.unparsed_as_no_call``: BFCL's
    irrelevance entries), ended at one."""
    over = result.ended == "answered" or result.unparsed_as_no_call
    return over and bool(result.verification.checks.get("score"))


def episode_row(
    suite: str,
    config: str,
    result: Rollout,
    *,
    policy: str,
    group: str | None = None,
    rules: Sequence[str] | None = None,
) -> dict[str, Any]:
    """The row (``EPISODE_SCHEMA``) of one finished episode; ``group`` is what intervals
    resample (the task unless given), ``rules`` the drawn rules it is attributed to
    (``Episode.rules``; unless given, every rule of its variant)."""
    spec, variant = result.spec, result.spec.variant
    rules = [name for name, _, _ in variant.rules] if rules is None else list(rules)
    families = sorted({family_of(r) for r in rules})
    latencies = [round(x, 6) for x in result.latencies_s]
    return {
        "suite": suite,
        "config": config,
        "task_id": spec.task.id,
        "task_group": group or spec.task.id,
        "task_kind": spec.task.kind,
        "variant_id": variant.variant_id,
        "rules": rules,
        "families": families,
        "protocol": variant.harness.protocol.label,
        "policy": policy,
        "success": succeeded(result),
        "score": result.verification.score,
        "verified": result.verification.verified,
        "failure": failure_class(result),
        "reason": result.verification.reason,
        "turns": sum(isinstance(e, UserMessage) for e in result.events),
        "steps": result.requests + result.cache_hits,
        "calls": sum(isinstance(e, CALL_KINDS) for e in result.events),  # skill loads too
        "tokens_in": result.usage.prompt_tokens,
        "tokens_out": result.usage.completion_tokens,
        "latency_s": round(sum(result.latencies_s), 6),
        "call_latencies_s": latencies,
        "name_match": None,
        "keys_match": None,
        "offered": None,
        "target": None,
        "choices": None,
    }


def episodes_table(rows: Sequence[dict[str, Any]]) -> pa.Table:
    return pa.Table.from_pylist(list(rows), schema=EPISODE_SCHEMA)
