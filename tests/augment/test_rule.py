"""The rule API: names, parameter schemas and defaults, needs, composition of rewrites."""

from __future__ import annotations

import dataclasses
import random

import pytest

from hsa.augment import NO_CONTEXT, Context, Mapping, Rewrite, Rule, ToolMap, compose
from hsa.augment.rule import FAMILIES
from hsa.errors import RuleError
from hsa.harness import SkillLoad, ToolCall, UserMessage


def _noop(harness, rng, params, context):
    return Rewrite(harness)


def test_rule_name_must_be_family_dot_verb():
    with pytest.raises(RuleError, match=r"family\.verb"):
        Rule("Tools-Rename", "1", _noop, doc="x")


def test_rule_needs_a_docstring_and_a_valid_schema():
    with pytest.raises(RuleError, match="docstring"):
        Rule("tools.x", "1", _noop, doc="  ")
    with pytest.raises(RuleError, match="not valid JSON Schema"):
        Rule("tools.x", "1", _noop, params={"type": 5}, doc="x")


def test_params_are_validated_and_defaults_filled():
    schema = {
        "type": "object",
        "additionalProperties": False,
        "properties": {"n": {"type": "integer", "minimum": 1, "default": 2}},
    }
    item = Rule("tools.x", "1", _noop, params=schema, doc="Do x.")
    assert item.resolve_params(None) == {"n": 2}
    assert item.resolve_params({"n": 5}) == {"n": 5}
    with pytest.raises(RuleError, match=r"rule 'tools.x': params.n"):
        item.resolve_params({"n": 0})
    with pytest.raises(RuleError, match="Additional properties"):
        item.resolve_params({"m": 1})


def test_a_rule_that_needs_the_trajectory_refuses_to_run_without_it(harness):
    item = Rule("tools.y", "1", _noop, doc="Do y.", needs=frozenset({"used_tools"}))
    with pytest.raises(RuleError, match="needs \\['used_tools'\\]"):
        item.apply(harness, random.Random(0), {}, NO_CONTEXT)
    assert item.apply(harness, random.Random(0), {}, Context(frozenset())).harness is harness


def test_unknown_need_is_refused():
    with pytest.raises(RuleError, match="unknown need"):
        Rule("tools.y", "1", _noop, doc="Do y.", needs=frozenset({"weather"}))


def test_a_rule_must_return_a_rewrite(harness):
    item = Rule("tools.z", "1", lambda h, r, p, c: h, doc="Broken.")
    with pytest.raises(RuleError, match="not a Rewrite"):
        item.apply(harness, random.Random(0))


def test_context_of_events():
    ctx = Context.of([UserMessage("x"), ToolCall("c", "a", {}), SkillLoad("s")])
    assert ctx == Context(frozenset({"a"}), frozenset({"s"}))
    both = Context.union([ctx, Context(frozenset({"b"}), frozenset())])
    assert both.used_tools == {"a", "b"}


def test_rewrites_compose(harness):
    first = Rewrite(harness, Mapping(tools={"get_order": ToolMap("a")}))
    changed = dataclasses.replace(harness, id="other")
    second = Rewrite(changed, Mapping(tools={"a": ToolMap("b")}))
    chain = compose(harness, [first, second])
    assert chain.harness is changed
    assert chain.mapping.tool_name("get_order") == "b"
    assert first.then(second) == chain


def test_families_cover_the_design():
    assert set(FAMILIES) == {
        "skill_ids",
        "skill_content",
        "tools",
        "prompt",
        "hooks",
        "protocol",
    }
