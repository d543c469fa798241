"""Tool-schema rules over descriptions: tool and parameter descriptions from a template bank."""

from __future__ import annotations

import dataclasses
import random
from functools import lru_cache
from typing import Any

from hsa.augment.banks import bank
from hsa.augment.param_schemas import copy_schema, free_nodes
from hsa.augment.registry import rule
from hsa.augment.rule import Context, Rewrite
from hsa.harness.model import Harness


def fill(template: str, text: str, name: str) -> str:
    """A bank template filled in; plain ``str.replace`` so braces in ``text`` are safe."""
    out = template.replace("{name}", "\0name\0").replace("{text}", "\0text\0")
    return out.replace("\0name\0", name).replace("\0text\0", text).strip()


def _reword(text: str, name: str, templates: tuple[str, ...], rng: random.Random) -> str:
    if not text.strip():
        return text
    return rng.choice(_rewordings(text, name, templates))


# A few thousand: a tool's variants reword it one after another, and a many-harness corpus's
# descriptions are mostly its own: at ~1.4 KB an entry, 32,768 held some 45 MB once full.
@lru_cache(maxsize=4096)
def _rewordings(text: str, name: str, templates: tuple[str, ...]) -> tuple[str, ...]:
    """``text`` filled into each template that changes it (into each, when none does): made
    once per distinct description, which a corpus's conversations repeat with their tools."""
    filled = tuple(fill(t, text, name) for t in templates)
    return tuple(f for f in filled if f != text) or filled


@rule(
    "tools.descriptions",
    # 2: no "Use this tool to {lower}", which read "Use this tool to this function serves as..."
    version="2",
    params={
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "parameters": {
                "type": "boolean",
                "default": True,
                "description": "Also reword parameter descriptions.",
            }
        },
    },
)
def descriptions(harness: Harness, rng: random.Random, params: dict[str, Any], context: Context):
    """Reword tool (and parameter) descriptions with templates from a bank.

    Every template keeps the original description whole, so no information the task needs is
    lost; only its framing changes ("What this tool does: ...", "Purpose: ...").
    """
    templates = bank("descriptions.yaml")
    for_parameter, for_tool = tuple(templates["parameter"]), tuple(templates["tool"])
    tools = []
    for tool in harness.tools:
        schema = copy_schema(tool.parameters)
        if params["parameters"]:
            for node, _paths in free_nodes(schema):
                for key, sub in (node.get("properties") or {}).items():
                    if isinstance(sub, dict) and isinstance(sub.get("description"), str):
                        sub["description"] = _reword(sub["description"], key, for_parameter, rng)
        tools.append(
            dataclasses.replace(
                tool,
                description=_reword(tool.description, tool.name, for_tool, rng),
                parameters=schema,
            )
        )
    return Rewrite(harness.replace(tools=tools))
