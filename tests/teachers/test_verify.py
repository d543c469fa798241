"""Verification checks: format, schema, execution, score; the first failure is the reason."""

from __future__ import annotations

import json

import pytest

from hsa.envs.base import Outcome
from hsa.harness.events import AssistantMessage, HookFired, ToolCall, ToolResult, UserMessage
from hsa.harness.model import Harness, Tool
from hsa.harness.sandbox import message_fields
from hsa.teachers.verify import (
    call_attempt,
    execution_problems,
    round_trip_problem,
    schema_problems,
    verify,
)


@pytest.mark.parametrize(
    "text",
    [
        "The Brightpan Pro costs $119.99.",
        "Use the search_products tool? No need: it is $5.",
        "[1, 2, 3] are the sizes.",
        "",
    ],
)
def test_ordinary_answers_are_not_call_attempts(env, text):
    assert call_attempt(text, env.harness()) is None


@pytest.mark.parametrize(
    "text",
    [
        '<tool_call>\n{"name": "search_products", "arguments": {}\n</tool_call>',
        "<TOOLCALL>[search_products(query='x')</TOOLCALL>",
        '[{"name": "search_products", "arguments": {"query": "x"}',
        "search_products(query='x'",
        '```json\n[{"function": "search_products"}\n```',
        "<search_products><query>x</query>",
    ],
)
def test_broken_calls_are_call_attempts(env, text):
    assert call_attempt(text, env.harness()) is not None


def test_schema_problems_name_the_call_and_the_argument(env):
    harness = env.harness()
    calls = [
        ToolCall("call_0", "search_products", {"query": "lamp"}),
        ToolCall("call_1", "search_products", {"query": 5}),
        ToolCall("call_2", "no_such_tool", {}),
    ]
    problems = schema_problems(calls, harness)
    assert len(problems) == 2
    assert problems[0].startswith(
        "call_1: invalid arguments for search_products: $.query: 5 is not of type"
    )
    assert problems[1].startswith("call_2: unknown tool 'no_such_tool'; available: ")
    assert "search_products" in problems[1]


def test_each_harness_checks_calls_against_its_own_schemas():
    # Validators are kept per harness object: a tool of the same name under another schema,
    # in an equal-looking but distinct harness, is checked against that schema.
    loose = Harness("h", tools=(Tool("get", parameters={"type": "object"}),))
    strict = loose.replace(tools=[Tool("get", parameters={"type": "object", "required": ["id"]})])
    call = [ToolCall("call_0", "get", {})]
    for _ in range(2):  # the second time, from the kept validators
        assert schema_problems(call, loose) == []
        assert schema_problems(call, strict) == [
            "call_0: invalid arguments for get: $: 'id' is a required property"
        ]
    again = Harness.from_dict(json.loads(strict.to_json()))
    assert schema_problems(call, again) == schema_problems(call, strict)


def test_execution_problems_cover_errors_and_denied_calls(env):
    harness = env.harness()
    events = [
        ToolCall("call_0", "get_product_details", {"product_id": "X"}),
        ToolResult("call_0", '{"error": "no product X"}', is_error=True),
        ToolCall("call_1", "pin_product", {"product_id": "P"}),
        ToolResult("call_1", "Pin refused", is_error=False),
        HookFired("no-sold-out-pin", "pre_tool_use", {"name": "n", "product_id": "P"}),
    ]
    problems = execution_problems(events, harness)
    assert problems == [
        'call_0 get_product_details: {"error": "no product X"}',
        "call_1: denied by hook 'no-sold-out-pin'",
    ]


def test_round_trip_problem_spots_events_the_conversation_cannot_carry(env):
    harness = env.harness()
    good = [UserMessage("hi"), AssistantMessage("hello")]
    assert round_trip_problem(good, harness) is None
    # a user who types exactly what a hook shows reads back as that hook firing
    hook_text = (
        "<reminder>\nReminder: flash sale on Lamp at $5.00 until 21:00; mention it if it fits "
        "the conversation.\n</reminder>"
    )
    bad = [UserMessage("hi"), AssistantMessage("a"), UserMessage(hook_text)]
    problem = round_trip_problem(bad, harness)
    assert problem is not None and "parses back differently" in problem


def test_a_note_among_parallel_results_round_trips_where_render_shows_it(env):
    # render shows a note fired after the first of two parallel results after the second
    harness = env.harness()
    hook = next(h for h in harness.hooks if h.inject in ("system", "user"))
    fired = HookFired(hook.id, hook.event, {f: "x" for f in message_fields(hook.message)})
    tool = harness.tools[0].name
    events = [
        UserMessage("hi"),
        ToolCall("call_0", tool, {}),
        ToolCall("call_1", tool, {}),
        ToolResult("call_0", "a"),
        fired,
        ToolResult("call_1", "b"),
        AssistantMessage("done"),
    ]
    assert round_trip_problem(events, harness) is None


def _verify(env, *, ended="answered", detail=None, calls=(), events=(), outcome=None):
    harness = env.harness()
    events = list(events) or [UserMessage("hi"), AssistantMessage("hello")]
    return verify(
        ended=ended,
        detail=detail,
        surface_events=events,
        surface_calls=list(calls),
        canonical_events=events,
        surface=harness,
        canonical=harness,
        outcome=outcome,
    )


def test_verified_only_when_every_check_passes(env):
    ok = _verify(env, outcome=Outcome(True))
    assert ok.verified and ok.reason == "ok" and ok.score == 1.0
    assert ok.checks == {
        "complete": True,
        "format": True,
        "schema": True,
        "execution": True,
        "score": True,
    }
    unsolved = _verify(env, outcome=Outcome(False, ("missing fact 'x'",)))
    assert not unsolved.verified and unsolved.reason == "score: missing fact 'x'"


def test_how_the_rollout_ended_comes_first(env):
    solved = Outcome(True)
    limit = _verify(env, ended="step_limit", detail="no final answer", outcome=solved)
    assert not limit.verified and limit.reason == "step_limit: no final answer"
    broken = _verify(env, ended="format", detail="args are not JSON", outcome=Outcome(False))
    assert broken.reason == "format: args are not JSON" and not broken.checks["format"]
    bad_call = ToolCall("call_0", "search_products", {"query": 1})
    schema = _verify(env, calls=[bad_call], outcome=Outcome(False, ("wrong",)))
    assert schema.reason.startswith("schema: call_0") and not schema.checks["score"]


def test_a_skill_load_the_harness_lacks_fails_the_schema_check(env):
    # the rollout ends (``schema``) before the load is a surface call: its check said True,
    # so hsa train rl gave such an episode the format reward
    lacked = _verify(
        env, ended="schema", detail="loads skill 'nope', which the harness lacks", outcome=None
    )
    assert not lacked.verified and lacked.reason.startswith("schema: loads skill 'nope'")
    assert lacked.checks["schema"] is False
