"""Skill-content rules: section order, list and heading formatting, descriptions, catalogue
order, distractor skills, and dropping skills a trajectory never loads."""

from __future__ import annotations

import dataclasses
import random
import re
from typing import Any

from hsa.augment import markdown
from hsa.augment.banks import bank, distractor_skills
from hsa.augment.names import ID_NAME, fresh_names
from hsa.augment.param_schemas import copy_schema
from hsa.augment.registry import rule
from hsa.augment.rule import Context, Rewrite
from hsa.augment.rules.tool_set import DROP_PARAMS, drop_count
from hsa.augment.rules.tool_text import fill
from hsa.augment.seeded import shuffled
from hsa.harness.model import Harness

# Sections titled like steps of a procedure depend on their order.
_ORDERED_TITLE = re.compile(r"^\s*(?:step|phase|part|stage)?\s*\d", re.IGNORECASE)


def _with_contents(harness: Harness, change) -> Harness:
    return harness.replace(
        skills=[dataclasses.replace(s, content=change(s.content)) for s in harness.skills]
    )


@rule(
    "skill_content.reorder_sections",
    # 5: "see X below", "the below section", "(below)" point by place too
    # 6: a "-" under a paragraph underlines a heading, so a fence indented 4 after it is code
    # 7: a heading in a raw HTML block (a section commented out) is none; a fence indented 4
    # closes none; a text ending in a block left open keeps its order
    version="7",
)
def reorder_sections(
    harness: Harness, rng: random.Random, params: dict[str, Any], context: Context
):
    """Shuffle independent sibling sections of each skill's Markdown (``## Check``, ``## Act``).

    The text before the first sibling heading stays first, and so does a document's title (a
    level-1 heading on its first line) with what follows it; sections titled like steps
    ("Step 1", "2. Install") are left in order, as are headings inside code blocks. A skill
    whose text points at other parts by where they are ("the section above", "see below",
    "see **Setup** below", "(below)", "the next step"), code blocks included, keeps its order:
    its sections are not independent.
    """

    def reorder(content: str) -> str:
        found = markdown.sibling_sections(content)
        if found is None or markdown.points_by_position(content):
            return content
        before, sections, tail = found
        titles = [s.split("\n", 1)[0].lstrip("#").strip() for s in sections]
        if any(_ORDERED_TITLE.match(t) for t in titles):
            return content
        gap = "\r\n\r\n" if "\r\n" in content else "\n\n"  # a CRLF document stays CRLF
        body = gap.join(shuffled(sections, rng))
        head = before.rstrip("\r\n")
        return (f"{head}{gap}{body}" if head else body) + tail

    return Rewrite(_with_contents(harness, reorder))


@rule(
    "skill_content.list_style",
    # 2: thematic breaks, indented code and paragraph text left alone
    # 3: an empty item ("-" alone on its line) is restyled with the rest of its list
    # 4: items in a raw HTML block are none; a fence indented 4 closes none (the code after
    # it stays code)
    version="4",
    params={
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "bullet": {"enum": ["any", "-", "*", "+"], "default": "any"},
            "ordered": {"enum": ["any", ".", ")"], "default": "any"},
        },
    },
)
def list_style(harness: Harness, rng: random.Random, params: dict[str, Any], context: Context):
    """Rewrite list markers in skill contents: ``-``/``*``/``+`` bullets, ``1.``/``1)`` items."""

    def restyle(content: str) -> str:
        bullets, ordered = markdown.list_markers(content)
        bullet = params["bullet"]
        if bullet == "any":
            bullet = rng.choice([b for b in "-*+" if b not in bullets] or ["-"])
        marker = params["ordered"]
        if marker == "any":
            marker = rng.choice([o for o in ".)" if o not in ordered] or ["."])
        return markdown.restyle_lists(content, bullet, marker)

    return Rewrite(_with_contents(harness, restyle))


@rule(
    "skill_content.heading_style",
    # 3: a setext or bold heading parted from the text before it; "C#" kept
    # 4: a "-" under a paragraph underlines a heading, so a fence indented 4 after it is code
    # 5: headings in a raw HTML block are none; a fence indented 4 closes none; no blank line
    # put into a fence that a heading ends by ending its list item
    version="5",
    params={
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "style": {"enum": ["any", "atx", "closed", "bold", "setext"], "default": "any"}
        },
    },
)
def heading_style(harness: Harness, rng: random.Random, params: dict[str, Any], context: Context):
    """Rewrite skill headings: ``## T``, ``## T ##``, ``**T**`` or setext underlines."""

    def restyle(content: str) -> str:
        if not markdown.headings(content):
            return content
        style = params["style"]
        if style == "any":
            current = markdown.heading_style_of(content)
            style = rng.choice([s for s in ("atx", "closed", "bold", "setext") if s != current])
        return markdown.restyle_headings(content, style)

    return Rewrite(_with_contents(harness, restyle))


@rule("skill_content.descriptions", version="1")
def descriptions(harness: Harness, rng: random.Random, params: dict[str, Any], context: Context):
    """Reword skill descriptions (what the catalogue shows) with templates that keep the text."""
    templates = bank("descriptions.yaml")["skill"]
    skills = []
    for skill in harness.skills:
        text = skill.description
        choices = [t for t in templates if fill(t, text, skill.id) != text] or templates
        new = fill(rng.choice(choices), text, skill.id) if text.strip() else text
        skills.append(dataclasses.replace(skill, description=new))
    return Rewrite(harness.replace(skills=skills))


@rule("skill_content.shuffle", version="1")
def shuffle(harness: Harness, rng: random.Random, params: dict[str, Any], context: Context):
    """Shuffle the order of skills in the catalogue."""
    return Rewrite(harness.replace(skills=shuffled(list(harness.skills), rng)))


def _skill_enum(harness: Harness, ids: list[str]) -> Harness:
    """The skill tool with an ``enum`` of skill ids (when it has one) set to ``ids``."""
    tool, arg = harness.skill_tool, harness.skill_arg
    if tool is None or arg is None:
        return harness
    schema = copy_schema(tool.parameters)
    prop = (schema.get("properties") or {}).get(arg)
    if not (isinstance(prop, dict) and isinstance(prop.get("enum"), list)):
        return harness
    prop["enum"] = ids
    return harness.replace(skill_tool=dataclasses.replace(tool, parameters=schema))


@rule(
    "skill_content.distractors",
    version="1",
    params={
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "count": {"type": "integer", "minimum": 1, "maximum": 8, "default": 2},
        },
    },
)
def distractors(harness: Harness, rng: random.Random, params: dict[str, Any], context: Context):
    """Add distractor skills from hsa's bank at random places in the catalogue.

    Their ids never collide with a skill of the harness, and no task needs them.
    """
    pool = distractor_skills()
    picked = rng.sample(pool, min(params["count"], len(pool)))
    existing = [s.id for s in harness.skills]
    table = fresh_names([s.id for s in picked], lambda i: i, taken=existing, pattern=ID_NAME)
    skills = list(harness.skills)
    for skill in picked:
        new_id = table[skill.id]
        skills.insert(
            rng.randint(0, len(skills)), dataclasses.replace(skill, id=new_id, name=new_id)
        )
    out = harness.replace(skills=skills)
    return Rewrite(_skill_enum(out, [s.id for s in skills]))


@rule("skill_content.drop_unused", version="2", params=DROP_PARAMS, needs=("used_skills",))
def drop_unused(harness: Harness, rng: random.Random, params: dict[str, Any], context: Context):
    """Drop skills the trajectory never loads (depends on the trajectory: needs used_skills).

    Which and how many of the unused skills go is drawn (all of them at most). Only for
    harnesses with a skill tool: without one, every skill is printed in full in the prompt and a
    trajectory may follow any of them without a load event, so nothing is dropped.
    """
    if harness.skill_tool is None:
        return Rewrite(harness)
    used = context.used_skills or frozenset()
    unused = [s.id for s in harness.skills if s.id not in used]
    count = drop_count(len(unused), params["fraction"], rng, params["keep"])
    dropped = set(rng.sample(unused, count))
    kept = [s for s in harness.skills if s.id not in dropped]
    out = harness.replace(skills=kept)
    return Rewrite(_skill_enum(out, [s.id for s in kept]))
