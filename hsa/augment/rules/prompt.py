"""Prompt-structure rules: section order, heading style, section titles, role placement."""

from __future__ import annotations

import dataclasses
import random
from typing import Any

from hsa.augment import markdown
from hsa.augment.banks import bank
from hsa.augment.registry import rule
from hsa.augment.rule import WHEN, Context, Rewrite
from hsa.augment.seeded import shuffled
from hsa.harness.model import HEADING_STYLES, Harness


def _pick_other(value: str, choices: list[str], given: str, rng: random.Random) -> str:
    if given != "any":
        return given
    others = [c for c in choices if c != value]
    return rng.choice(others) if others else value


@rule(
    "prompt.section_order",
    version="3",  # 3: "see X below", "the below section", "(below)" point by place too
    params={
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "keep_first": {
                "type": "boolean",
                "default": False,
                "description": "Keep the first section (often the persona) in place.",
            }
        },
    },
)
def section_order(harness: Harness, rng: random.Random, params: dict[str, Any], context: Context):
    """Shuffle the order of the system prompt's sections (persona, policy, tools, skills, ...).

    A prompt whose text points at another section by where it is ("the section below", "the
    policy described above" opening a section) keeps its order: its sections are not
    independent. A pointer within one section ("the options listed above", after them) is not
    such a pointer.
    """
    sections = list(harness.prompt.sections)
    if any(markdown.points_outside_by_position(s.body) for s in sections):
        return Rewrite(harness)
    head = sections[:1] if params["keep_first"] else []
    tail = shuffled(sections[len(head) :], rng)
    prompt = dataclasses.replace(harness.prompt, sections=tuple(head + tail))
    return Rewrite(harness.replace(prompt=prompt))


@rule(
    "prompt.heading_style",
    version="1",
    params={
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "style": {
                "enum": ["any", *HEADING_STYLES],
                "default": "any",
                "description": "Markdown '## Title', XML '<id>...</id>', or plain 'Title:'.",
            }
        },
    },
)
def heading_style(harness: Harness, rng: random.Random, params: dict[str, Any], context: Context):
    """Switch how prompt sections are headed: Markdown headings, XML tags or plain labels."""
    style = _pick_other(harness.prompt.heading_style, list(HEADING_STYLES), params["style"], rng)
    prompt = dataclasses.replace(harness.prompt, heading_style=style)
    return Rewrite(harness.replace(prompt=prompt))


@rule(
    "prompt.placement",
    version="1",
    params={
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "placement": {
                "enum": ["any", "system", "user"],
                "default": "any",
                "description": "A system message, or prepended to the first user message.",
            },
            "hooks": {
                "type": "boolean",
                "default": True,
                "description": (
                    "When the prompt moves to the user message, move system-position hooks to "
                    "user messages too (a model without a system role sees no system messages)."
                ),
                WHEN: {"placement": ["user"]},
            },
        },
    },
)
def placement(harness: Harness, rng: random.Random, params: dict[str, Any], context: Context):
    """Move the system prompt between the system role and the first user message.

    Moving it into the user message is how a harness serves a model without a system role; with
    ``hooks`` (the default), hooks shown as system messages move to user messages as well, each
    wrapped in a tag drawn from a bank so it stays distinct from what the user says.
    """
    where = _pick_other(harness.prompt.placement, ["system", "user"], params["placement"], rng)
    prompt = dataclasses.replace(harness.prompt, placement=where)
    hooks = list(harness.hooks)
    if where == "user" and params["hooks"]:
        tags = bank("hooks.yaml")["wrappers"]
        hooks = [
            dataclasses.replace(h, inject="user", wrapper=h.wrapper or rng.choice(tags))
            if h.inject == "system"
            else h
            for h in hooks
        ]
    return Rewrite(harness.replace(prompt=prompt, hooks=hooks))


@rule("prompt.section_titles", version="2")
def section_titles(harness: Harness, rng: random.Random, params: dict[str, Any], context: Context):
    """Retitle prompt sections with equivalent titles from a bank ("Tools" -> "Functions").

    An output-format section is titled as a calling convention ("How to call tools") only when
    it holds the protocol's call instructions (its body left empty, to be filled with them); a
    body of its own (how to phrase replies) keeps titles about replies."""
    titles = bank("prompt.yaml")["titles"]
    sections = []
    for section in harness.prompt.sections:
        if not section.title:  # an untitled section (a verbatim system message) stays bare
            sections.append(section)
            continue
        offered = list(titles.get(section.kind, []))
        if section.kind == "output_format" and not section.body.strip():
            offered += titles["output_format_calls"]
        choices = [t for t in offered if t != section.title]
        title = rng.choice(choices) if choices else section.title
        sections.append(dataclasses.replace(section, title=title))
    prompt = dataclasses.replace(harness.prompt, sections=tuple(sections))
    return Rewrite(harness.replace(prompt=prompt))
