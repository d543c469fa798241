"""The hook runtime: matchers, payloads and the four effects."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hsa.envs.base import ToolOutput
from hsa.envs.hook_runtime import (
    DENIED,
    HookContext,
    hook_problems,
    matches,
    payload,
    run_hooks,
    update_output,
)
from hsa.errors import EnvError
from hsa.harness.events import HookFired
from hsa.harness.model import Harness, Hook, Matcher

CALLS: list[str] = []


def shout(hook, context):
    """A payload function: fires with the tool name, or not at all on turn 3."""
    CALLS.append(hook.id)
    if context.turn == 3:
        return None
    return {"tool": context.tool or "-"}


def bad_payload(hook, context):
    return {"tool": 42}


def _harness(*hooks: Hook) -> Harness:
    return Harness(id="h", hooks=hooks)


def test_tool_matcher_is_a_full_match():
    m = Matcher(tool="search")
    assert matches(m, HookContext("pre_tool_use", tool="search"))
    assert not matches(m, HookContext("pre_tool_use", tool="search_products"))
    assert not matches(m, HookContext("stop"))  # no tool at a stop
    assert matches(Matcher(tool="get_.*|compare"), HookContext("pre_tool_use", tool="compare"))


def test_turn_and_every_n_turns():
    assert matches(Matcher(turn=2), HookContext("user_prompt_submit", turn=2))
    assert not matches(Matcher(turn=2), HookContext("user_prompt_submit", turn=1))
    every = Matcher(every_n_turns=2)
    assert [t for t in range(7) if matches(every, HookContext("user_prompt_submit", t))] == [
        2,
        4,
        6,
    ]


def test_static_payload_and_add_context():
    hook = Hook(
        "note",
        "user_prompt_submit",
        "add_context",
        "Turn note: {{ x }}.",
        params={"payload": {"x": "hello"}},
    )
    result = run_hooks(_harness(hook), "user_prompt_submit", HookContext("user_prompt_submit"))
    assert result.fired == (HookFired("note", "user_prompt_submit", {"x": "hello"}),)
    assert not result.denied


def test_payload_fn_may_decline():
    hook = Hook(
        "fn",
        "pre_tool_use",
        "add_context",
        "Tool {{ tool }} called.",
        payload_fn="tests.envs.test_hook_runtime:shout",
    )
    h = _harness(hook)
    fired = run_hooks(h, "pre_tool_use", HookContext("pre_tool_use", turn=1, tool="t", args={}))
    assert fired.fired == (HookFired("fn", "pre_tool_use", {"tool": "t"}),)
    quiet = run_hooks(h, "pre_tool_use", HookContext("pre_tool_use", turn=3, tool="t", args={}))
    assert quiet.fired == ()


def test_payload_must_match_the_message_fields():
    hook = Hook(
        "x", "stop", "add_context", "Says {{ a }} and {{ b }}.", params={"payload": {"a": "1"}}
    )
    with pytest.raises(EnvError, match=r"placeholders \['a', 'b'\]"):
        payload(hook, HookContext("stop"))
    typed = Hook(
        "y",
        "stop",
        "add_context",
        "{{ tool }}!",
        payload_fn="tests.envs.test_hook_runtime:bad_payload",
    )
    with pytest.raises(EnvError, match="mapping of strings to strings"):
        payload(typed, HookContext("stop"))


def test_update_input_sets_and_removes_arguments():
    hook = Hook(
        "cap",
        "pre_tool_use",
        "update_input",
        "Capped at {{ n }}.",
        matcher=Matcher(tool="search"),
        params={"set": {"limit": 5}, "remove": ["debug"], "payload": {"n": "5"}},
    )
    ctx = HookContext("pre_tool_use", tool="search", args={"q": "x", "limit": 50, "debug": True})
    result = run_hooks(_harness(hook), "pre_tool_use", ctx)
    assert result.args == {"q": "x", "limit": 5}
    assert [f.hook_id for f in result.fired] == ["cap"]


def test_deny_blocks_the_call_and_stops_later_hooks():
    deny = Hook(
        "no", "pre_tool_use", "deny", "Refused: {{ why }}.", params={"payload": {"why": "sold out"}}
    )
    later = Hook("later", "pre_tool_use", "add_context", "later", params={})
    result = run_hooks(
        _harness(deny, later), "pre_tool_use", HookContext("pre_tool_use", tool="pin", args={})
    )
    assert result.denied and result.denied_by == "no"
    assert result.output == ToolOutput(DENIED, is_error=True)
    assert [f.hook_id for f in result.fired] == ["no"]
    assert result.fired[0].payload == {"why": "sold out"}  # the reason travels in the hook


def test_deny_at_stop_refuses_the_answer():
    guard = Hook(
        "guard",
        "stop",
        "deny",
        "Claims: {{ claims }}.",
        payload_fn="hsa.envs.livestream.hookfns:compliance_guard",
    )
    h = _harness(guard)
    bad = run_hooks(h, "stop", HookContext("stop", final_text="The best blender, 100% safe!"))
    assert bad.denied_by == "guard"
    assert bad.fired[0].payload == {"claims": "best, 100%"}
    assert not run_hooks(h, "stop", HookContext("stop", final_text="Rated 4.6 of 5.")).denied


def test_update_output_removes_keys_at_any_depth():
    hook = Hook(
        "r",
        "post_tool_use",
        "update_output",
        "Removed {{ fields }}.",
        payload_fn="hsa.envs.livestream.hookfns:redacted_fields",
        params={"remove": ["cost", "secret"]},
    )
    output = ToolOutput(json.dumps({"a": 1, "cost": 2, "rows": [{"secret": 1, "b": 2}]}))
    result = run_hooks(
        _harness(hook),
        "post_tool_use",
        HookContext("post_tool_use", tool="t", args={}, output=output),
    )
    assert json.loads(result.output.content) == {"a": 1, "rows": [{"b": 2}]}
    assert result.fired[0].payload == {"fields": "cost, secret"}
    clean = ToolOutput('{"a": 1}')
    untouched = run_hooks(
        _harness(hook),
        "post_tool_use",
        HookContext("post_tool_use", tool="t", args={}, output=clean),
    )
    assert untouched.fired == () and untouched.output == clean


def test_non_json_output_is_left_alone():
    hook = Hook("r", "post_tool_use", "update_output", "x", params={"remove": ["a"]})
    assert update_output(hook, ToolOutput("plain text")) == ToolOutput("plain text")


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(["a", "b", "cost", "x"]), inner, max_size=3)
    ),
    max_leaves=12,
)


@given(json_values)
def test_update_output_property(value):
    hook = Hook("r", "post_tool_use", "update_output", "x", params={"remove": ["cost"]})
    out = json.loads(update_output(hook, ToolOutput(json.dumps(value))).content)

    def keys(v):
        if isinstance(v, dict):
            return set(v) | {k for x in v.values() for k in keys(x)}
        if isinstance(v, list):
            return {k for x in v for k in keys(x)}
        return set()

    assert "cost" not in keys(out)
    if "cost" not in keys(value):
        assert out == value


def test_effects_only_apply_where_they_mean_something():
    wrong = Hook("w", "session_start", "deny", "no", params={})
    with pytest.raises(EnvError, match="does not apply at 'session_start'"):
        run_hooks(_harness(wrong), "session_start", HookContext("session_start"))
    assert [p.where for p in hook_problems(_harness(wrong))] == ["$.hooks[0]"]


def test_unimportable_payload_fn_is_reported():
    hook = Hook("m", "stop", "add_context", "{{ a }}", payload_fn="no.such.module:fn")
    problems = hook_problems(_harness(hook))
    assert len(problems) == 1 and "cannot import" in problems[0].message
    with pytest.raises(EnvError, match="cannot import"):
        run_hooks(_harness(hook), "stop", HookContext("stop"))


def test_unknown_event_is_an_error():
    with pytest.raises(EnvError, match="unknown lifecycle event"):
        run_hooks(_harness(), "teardown", HookContext("teardown"))
