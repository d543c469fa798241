"""Tool-schema rules over the set of tools: order, property order, distractors, unused tools."""

from __future__ import annotations

import dataclasses
import functools
import random
import re
from typing import Any

from hsa.augment.banks import distractor_tools
from hsa.augment.free_text import format_accepts
from hsa.augment.names import TOOL_NAME, fresh_names, split_words, word_form
from hsa.augment.param_schemas import copy_schema, free_nodes
from hsa.augment.registry import rule
from hsa.augment.rule import Context, Rewrite
from hsa.augment.seeded import shuffled
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


def named_alike(name: str, other: str) -> bool:
    """Whether one of two tool names holds every word of the other, in any case style, singular
    and plural alike, and a word alike with its kin (``translate_text`` and ``translate``,
    ``getStockQuotes`` and ``get_stock_quote``, ``convert_units`` and
    ``recipe_unit_conversion``): tools so named do the same job. It errs towards alike
    (``getCurrency`` and ``get_current_time``): a distractor left out costs a variant little,
    one that can do the task's job makes a wrong row."""
    (words, keys), (others, other_keys) = _name_words(name), _name_words(other)

    def held(these: tuple[str, ...], those: tuple[str, ...]) -> bool:
        return all(any(_kin(w, o) for o in those) for w in these)

    # kin words begin alike (their first five letters, or the whole of a shorter word): a
    # name whose beginnings are not all among the other's holds none of it
    return bool(words and others) and (
        (keys <= other_keys and held(words, others)) or (other_keys <= keys and held(others, words))
    )


@functools.lru_cache(maxsize=4096)
def _name_words(name: str) -> tuple[tuple[str, ...], frozenset[str]]:
    """The words of a tool name in their ``word_form``, and their beginnings (``_kin``): every
    bank tool's are asked for once per variant the rule draws."""
    words = tuple(word_form(w) for w in split_words(name))
    return words, frozenset(w[:_KIN] for w in words)


#: how many first letters two kin words share at least (``_kin``)
_KIN = 5


def _kin(word: str, other: str) -> bool:
    """Whether two words (``word_form``s) share their root: the same word, or one beginning of
    five letters at least that leaves two letters of the shorter at most (``convert`` and
    ``conversion``, ``translate`` and ``translator``; never ``get`` and ``generate``)."""
    common = max(_KIN, min(len(word), len(other)) - 2)
    return word == other or (
        common <= min(len(word), len(other)) and word[:common] == other[:common]
    )


@rule(
    "tools.distractors",
    # 3: a bank tool whose name holds every word of a harness tool's, or the reverse, is not
    # drawn (translate_text beside translate, convert_units beside recipe_unit_conversion),
    # not only one named alike in another case style
    version="3",
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
    needs=("used_tools",),
)
def distractors(harness: Harness, rng: random.Random, params: dict[str, Any], context: Context):
    """Add distractor tools from hsa's bank at random positions; the task never needs them
    (depends on the trajectory: needs used_tools).

    A distractor is sure to be unneeded only where the trajectory calls tools: one that calls
    none (a refusal, where whether any tool fits is the task: "what time is it in New York?"
    with no clock among the tools) gets none, since a bank tool might answer it. A bank tool
    named like a tool of the harness (``named_alike``: ``translate_text`` beside ``translate``)
    is the same capability, and is not drawn. Hook matchers keep their firing: a distractor a
    matcher would catch is renamed until it is not.
    """
    if not context.used_tools:
        return Rewrite(harness)
    existing = [t.name for t in harness.tools]
    if harness.skill_tool is not None:
        existing.append(harness.skill_tool.name)
    pool = [t for t in distractor_tools() if not any(named_alike(t.name, own) for own in existing)]
    count = min(params["count"], len(pool))
    picked = rng.sample(pool, count)
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


DROP_PARAMS = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "fraction": {
            "type": ["number", "null"],
            "minimum": 0,
            "maximum": 1,
            "default": None,
            "description": "Share of the unused ones to drop; null draws how many (at least one).",
        },
        "keep": {
            "type": ["integer", "null"],
            "minimum": 0,
            "default": None,
            "description": "Keep this many of the unused ones (drawn), drop the rest; set, it "
            "replaces fraction (a compact harness: what the trajectory uses plus `keep` more).",
        },
    },
}


def drop_count(
    unused: int, fraction: float | None, rng: random.Random, keep: int | None = None
) -> int:
    """How many of ``unused`` items to drop: all but ``keep`` of them, a share of them, or a
    draw from 1 to all."""
    if unused == 0:
        return 0
    if keep is not None:
        return max(unused - keep, 0)
    if fraction is None:
        return rng.randint(1, unused)
    return round(unused * fraction)


@rule("tools.drop_unused", version="2", params=DROP_PARAMS, needs=("used_tools",))
def drop_unused(harness: Harness, rng: random.Random, params: dict[str, Any], context: Context):
    """Drop tools the trajectory never calls (depends on the trajectory: needs used_tools).

    Which and how many of the unused tools go is drawn (all of them at most); the skill-loading
    tool is kept, and so is at least one tool.
    """
    used = context.used_tools or frozenset()
    unused = [t.name for t in harness.tools if t.name not in used]
    count = drop_count(len(unused), params["fraction"], rng, params["keep"])
    if count >= len(harness.tools):
        count = len(harness.tools) - 1
    dropped = set(rng.sample(unused, count)) if count > 0 else set()
    return Rewrite(harness.replace(tools=[t for t in harness.tools if t.name not in dropped]))
