"""Previews: what a rule does to a harness and to one rendered trajectory, as unified diffs."""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hsa.augment.mapping import map_events
from hsa.augment.planner import PromptUnrendered, Sight, apply_chain
from hsa.augment.rule import Context, Rewrite, Rule
from hsa.augment.synthetic import sample_trajectory
from hsa.errors import TemplateError
from hsa.harness.events import Trajectory
from hsa.harness.io import dump_yaml
from hsa.harness.model import Harness
from hsa.harness.render import Conversation, render


@dataclass(frozen=True, slots=True)
class Preview:
    """A rule's effect: the rewrite, the parameters it ran with, and two unified diffs."""

    rewrite: Rewrite
    params: Mapping[str, Any]
    harness_diff: str
    conversation_diff: str


def harness_text(harness: Harness) -> str:
    """A harness as the YAML document a reader diffs: a sub-schema two tools share is
    written out at each (an alias would show as a change where there is none)."""
    return dump_yaml(harness.to_dict(), aliases=False)


def conversation_text(conversation: Conversation) -> str:
    """A rendered conversation as plain text: one block per message, then the tools list."""
    blocks = []
    for message in conversation.messages:
        head = f"--- {message['role']}"
        if message.get("tool_call_id"):
            head += f" ({message['tool_call_id']})"
        body = message.get("content")
        lines = [head]
        if body:
            lines.append(str(body))
        for call in message.get("tool_calls") or []:
            fn = call["function"]
            lines.append(f"[tool_call {call['id']}] {fn['name']}({fn['arguments']})")
        blocks.append("\n".join(lines))
    if conversation.tools:
        blocks.append("--- tools\n" + json.dumps(conversation.tools, indent=2, ensure_ascii=False))
    return "\n".join(blocks) + "\n"


def _diff(before: str, after: str, a: str, b: str) -> str:
    lines = difflib.unified_diff(
        before.splitlines(keepends=True), after.splitlines(keepends=True), a, b, n=2
    )
    return "".join(lines)


def preview(
    rule: Rule,
    harness: Harness,
    *,
    seed: int = 0,
    params: Mapping[str, Any] | None = None,
    trajectory: Trajectory | None = None,
) -> Preview:
    """Apply ``rule`` with ``seed`` and diff the harness and one rendered trajectory.

    Without ``trajectory`` a synthetic one is used (``hsa.augment.synthetic``). A rule that
    finds nothing to change gives empty diffs (and its parameters as resolved).
    """
    trajectory = trajectory or sample_trajectory(harness)
    resolved = rule.resolve_params(params or {})
    events = trajectory.events
    rewrite, _ = apply_chain(
        harness,
        [(rule, resolved)],
        seed=seed,
        context=Context.of(events, harness),
        fired=Sight.of(events).hooks,
    )
    before = conversation_text(render(trajectory.events, harness))
    try:
        after = conversation_text(
            render(map_events(trajectory.events, rewrite.mapping, harness), rewrite.harness)
        )
    except TemplateError as exc:  # (the prompt renders under ``harness``: the rule's doing)
        raise PromptUnrendered(harness, exc, where=f"rule {rule.name!r}") from None
    return Preview(
        rewrite,
        resolved,
        _diff(harness_text(harness), harness_text(rewrite.harness), "harness", f"{rule.name}"),
        _diff(before, after, f"{trajectory.id} (canonical)", f"{trajectory.id} ({rule.name})"),
    )
