"""Tool-schema rules over the set of tools: order, property order, distractors, unused tools."""

from __future__ import annotations

import dataclasses
import random
import re
from typing import Any

from hsa.augment.banks import bank
from hsa.augment.draw import shuffled
from hsa.augment.edits import format_accepts
from hsa.augment.names import TOOL_NAME, fresh_names
from hsa.augment.registry import rule
from hsa.augment.rule import Context, Rewrite
from hsa.augment.schemas import copy_schema, free_nodes
from hsa.harness.model import Harness, Tool


@rule("tools.shuffle", version="1")
def shuffle(harness: Harness, rng: random.Random, params: dict[str, Any], context: Context):
    """Shuffle the order of the tools (in the request's ``tools`` list and in printed docs)."""
    return Rewrite(harness.replace(tools=shuffled(list(harness.tools), rng)))


@rule(
    "tools.reorder_properties",
    version="1",
    params={
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "required_first": {
                "type": "boolean",
                "default": False,
                "description": "Put required parameters before optional ones, else shuffle all.",
            }
        },
    },
)
def reorder_properties(
    harness: Harness, rng: random.Random, params: dict[str, Any], context: Context
):
    """Shuffle the order of properties in every object schema, nested ones and ``$defs`` too.

    Arguments are keyed by name, so order changes what the model reads, never what a call means.
    ``required`` lists are reordered to match.
    """

    def reorder(tool: Tool) -> Tool:
        schema = copy_schema(tool.parameters)
        for node, _ in free_nodes(schema):
            props = node.get("properties")
            if not isinstance(props, dict) or len(props) < 2:
                continue
            keys = list(props)
            if params["required_first"]:
                required = set(node.get("required") or ())
                order = [k for k in keys if k in required] + [k for k in keys if k not in required]
                if order == keys:
                    order = shuffled(keys, rng)
            else:
                order = shuffled(keys, rng)
            node["properties"] = {k: props[k] for k in order}
            if isinstance(node.get("required"), list):
                node["required"] = [k for k in order if k in node["required"]]
        return dataclasses.replace(tool, parameters=schema)

    return Rewrite(harness.replace(tools=[reorder(t) for t in harness.tools]))


@rule(
    "tools.distractors",
    version="1",
    params={
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "count": {
                "type": "integer",
                "minimum": 1,
                "maximum": 16,
                "default": 2,
                "description": "How many distractor tools to add.",
            }
        },
    },
)
def distractors(harness: Harness, rng: random.Random, params: dict[str, Any], context: Context):
    """Add distractor tools from hsa's bank at random positions; the task never needs them.

    Names never collide with a tool of the harness (a clash gets a ``_2`` suffix), and hook
    matchers keep their firing: a distractor a matcher would catch is renamed until it is not.
    """
    pool = [Tool.from_dict(t) for t in bank("distractor_tools.json")]
    count = min(params["count"], len(pool))
    picked = rng.sample(pool, count)
    existing = [t.name for t in harness.tools]
    if harness.skill_tool is not None:
        existing.append(harness.skill_tool.name)
    patterns = [h.matcher.tool for h in harness.hooks if h.matcher.tool is not None]

    def untouched(name: str) -> bool:
        return format_accepts(harness.protocol, name) and not any(
            re.fullmatch(p, name) for p in patterns
        )

    table = fresh_names(
        [t.name for t in picked],
        lambda n: n if untouched(n) else f"x_{n}",
        taken=existing,
        pattern=TOOL_NAME,
        accept=untouched,
    )
    tools = list(harness.tools)
    for tool in picked:
        name = table[tool.name]
        if not untouched(name):
            continue
        tools.insert(rng.randint(0, len(tools)), dataclasses.replace(tool, name=name))
    return Rewrite(harness.replace(tools=tools))


@rule("tools.drop_unused", version="1", needs=("used_tools",))
def drop_unused(harness: Harness, rng: random.Random, params: dict[str, Any], context: Context):
    """Drop the tools the trajectory never calls (depends on the trajectory: needs used_tools).

    The skill-loading tool is kept. At least one tool stays, so a harness never loses its tools
    list altogether.
    """
    used = context.used_tools or frozenset()
    kept = [t for t in harness.tools if t.name in used]
    if not kept and harness.tools:
        kept = [rng.choice(list(harness.tools))]
    return Rewrite(harness.replace(tools=kept))
