"""Hook rules: message wording, wrapper tags, injection position, neutral extra hooks.

Hook firings are events of the canonical trajectory, so these rules change only how a firing
reads and where it appears, never whether it fires or what it does: matchers, events, effects
and effect parameters are left alone.
"""

from __future__ import annotations

import dataclasses
import random
import re
from typing import Any

from hsa.augment.banks import bank
from hsa.augment.names import ID_NAME, fresh_names
from hsa.augment.registry import rule
from hsa.augment.rule import Context, Rewrite
from hsa.harness.model import HOOK_POSITIONS, Harness, Hook, Matcher


def _framed(message: str, framing: str) -> str:
    return framing.replace("{message}", message)


@rule("hooks.wording", version="1")
def wording(harness: Harness, rng: random.Random, params: dict[str, Any], context: Context):
    """Reword hook messages with framings from a bank ("Reminder: ...", "... (automated)").

    The original template is kept whole inside the framing, placeholders and the literal text
    between them included, so every payload still renders and parses back.
    """
    framings = bank("hooks.yaml")["framings"]
    hooks = []
    for hook in harness.hooks:
        choices = [f for f in framings if _framed(hook.message, f) != hook.message]
        if hook.message and choices:
            hook = dataclasses.replace(hook, message=_framed(hook.message, rng.choice(choices)))
        hooks.append(hook)
    return Rewrite(harness.replace(hooks=hooks))


@rule(
    "hooks.wrapper",
    version="1",
    params={
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "allow_none": {
                "type": "boolean",
                "default": True,
                "description": "Let system-position hooks lose their wrapper altogether.",
            }
        },
    },
)
def wrapper(harness: Harness, rng: random.Random, params: dict[str, Any], context: Context):
    """Change the tags hook messages are wrapped in (``<system-reminder>``, ``<hook>``, ...).

    Hooks shown in user messages or tool results always keep a wrapper: it is how they are
    told apart from the text around them.
    """
    tags = bank("hooks.yaml")["wrappers"]
    hooks = []
    for hook in harness.hooks:
        choices: list[str | None] = [t for t in tags if t != hook.wrapper]
        if params["allow_none"] and hook.inject == "system" and hook.wrapper is not None:
            choices.append(None)
        hooks.append(dataclasses.replace(hook, wrapper=rng.choice(choices)))
    return Rewrite(harness.replace(hooks=hooks))


def valid_positions(harness: Harness, hook: Hook) -> list[str]:
    """Where ``hook`` may be shown: ``tool_result`` only for a post-tool-use hook whose matcher
    cannot fire on the skill tool (skill results are not tool results of the trajectory)."""
    positions = ["system", "user"]
    if hook.event == "post_tool_use" and hook.matcher.tool is not None:
        skill = harness.skill_tool.name if harness.skill_tool is not None else None
        if skill is None or not re.fullmatch(hook.matcher.tool, skill):
            positions.append("tool_result")
    return [p for p in HOOK_POSITIONS if p in positions]


@rule("hooks.position", version="1")
def position(harness: Harness, rng: random.Random, params: dict[str, Any], context: Context):
    """Move hook messages between valid positions: system message, user message, tool result.

    Only post-tool-use hooks can be appended to a tool result (see ``valid_positions``). A hook
    moved out of the system position gets a wrapper tag if it had none."""
    tags = bank("hooks.yaml")["wrappers"]
    hooks = []
    for hook in harness.hooks:
        choices = [p for p in valid_positions(harness, hook) if p != hook.inject]
        if not choices:
            hooks.append(hook)
            continue
        inject = rng.choice(choices)
        wrap = hook.wrapper
        if inject != "system" and not wrap:
            wrap = rng.choice(tags)
        hooks.append(dataclasses.replace(hook, inject=inject, wrapper=wrap))
    return Rewrite(harness.replace(hooks=hooks))


@rule(
    "hooks.neutral_extra",
    version="1",
    params={
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "count": {"type": "integer", "minimum": 1, "maximum": 5, "default": 1},
        },
    },
)
def neutral_extra(harness: Harness, rng: random.Random, params: dict[str, Any], context: Context):
    """Add neutral hooks that only add a fixed line of context.

    They never deny a call or change its input or output, and fire on events of their own, so
    no other hook's firing changes. Their messages are literal text in a tag no other hook
    uses, so they can never be mistaken for another hook's message when a conversation is
    parsed.
    """
    neutral = bank("hooks.yaml")["neutral"]
    picked = rng.sample(neutral, min(params["count"], len(neutral)))
    used_tags = {h.wrapper for h in harness.hooks}
    table = fresh_names(
        [f"neutral-{p['event'].replace('_', '-')}" for p in picked],
        lambda n: n,
        taken=[h.id for h in harness.hooks],
        pattern=ID_NAME,
    )
    hooks = list(harness.hooks)
    for item, hook_id in zip(picked, table.values(), strict=True):
        tag, n = "neutral-note", 1
        while tag in used_tags:
            n += 1
            tag = f"neutral-note-{n}"
        used_tags.add(tag)
        hooks.append(
            Hook(
                id=hook_id,
                event=item["event"],
                effect="add_context",
                message=item["message"],
                matcher=Matcher(),
                inject="system",
                wrapper=tag,
            )
        )
    return Rewrite(harness.replace(hooks=hooks))
